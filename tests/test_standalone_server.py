"""The plugin deployed the way an operator runs it: Spark's sbin/start-connect-server.sh with
--jars and --conf and a token, reached from the client at sc://localhost:<port>/;token=...;
a client without the token is refused."""
import secrets

import pytest
from pyspark.sql import SparkSession

from clusters import ConnectDaemon
from mapwithstate import map_with_state
from specs import running_count


@pytest.fixture
def standalone_server(tmp_path):
    server = ConnectDaemon(tmp_path, token=secrets.token_urlsafe(32))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_running_count_on_a_standalone_connect_server(standalone_server):
    spark = SparkSession.builder.remote(standalone_server.url).create()
    try:
        df = spark.createDataFrame([("a",), ("b",), ("a",)], "word STRING")
        rows = map_with_state(df, key="word", spec=running_count()).collect()
        assert sorted(tuple(r) for r in rows) == [("a", 1), ("a", 2), ("b", 1)]
    finally:
        spark.stop()
    intruder = SparkSession.builder.remote(f"sc://localhost:{standalone_server.port}").create()
    try:
        with pytest.raises(Exception, match="UNAUTHENTICATED"):
            intruder.range(1).collect()
    finally:
        intruder.stop()
