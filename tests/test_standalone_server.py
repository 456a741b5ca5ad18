"""The plugin deployed the way an operator runs it: Spark's sbin/start-connect-server.sh with
--jars and --conf and a token, reached from the client at sc://localhost:<port>/;token=...;
a client without the token is refused."""
import os
import secrets
import socket
import subprocess

import pyspark
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S


@pytest.fixture
def standalone_server(tmp_path):
    """The address of a server started by start-connect-server.sh, and its token."""
    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_urlsafe(32)
    # The token goes in the environment, where `ps` does not show it.
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOG_DIR=str(tmp_path / "logs"),
               SPARK_PID_DIR=str(tmp_path / "pids"), SPARK_IDENT_STRING=f"mws{port}",
               SPARK_CONNECT_AUTHENTICATE_TOKEN=token)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    command = [os.path.join(home, "sbin", "start-connect-server.sh"), "--master", "local[2]",
               "--jars", mws.jar_path(),
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", "spark.ui.enabled=false"]
    for key, value in mws.server_conf().items():
        if key != "spark.jars":
            command += ["--conf", f"{key}={value}"]
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        yield port, token
    finally:
        subprocess.run([os.path.join(home, "sbin", "stop-connect-server.sh")], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_running_count_on_a_standalone_connect_server(standalone_server):
    port, token = standalone_server
    # The Connect client retries while the server starts.
    spark = SparkSession.builder.remote(f"sc://localhost:{port}/;token={token}").create()
    try:
        df = spark.createDataFrame([("a",), ("b",), ("a",)], "word STRING")
        spec = StateSpec.function(
            "n BIGINT",
            update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
            emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
        rows = map_with_state(df, key="word", spec=spec).collect()
        assert sorted(tuple(r) for r in rows) == [("a", 1), ("a", 2), ("b", 1)]
    finally:
        spark.stop()
    intruder = SparkSession.builder.remote(f"sc://localhost:{port}").create()
    try:
        with pytest.raises(Exception, match="UNAUTHENTICATED"):
            intruder.range(1).collect()
    finally:
        intruder.stop()
