"""The plugin deployed the way an operator runs it: Spark's sbin/start-connect-server.sh with
--jars and --conf, reached from the client at sc://localhost:<port>."""
import os
import subprocess
import time
import socket

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from mapwithstate.server import _free_port, _spark_home


@pytest.fixture
def standalone_server(tmp_path):
    home = _spark_home()
    port = _free_port()
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOG_DIR=str(tmp_path / "logs"),
               SPARK_PID_DIR=str(tmp_path / "pids"), SPARK_IDENT_STRING=f"mws{port}")
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    command = [os.path.join(home, "sbin", "start-connect-server.sh"), "--master", "local[2]",
               "--jars", mws.jar_path(),
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", "spark.ui.enabled=false"]
    for key, value in mws.server_conf().items():
        if key != "spark.jars":
            command += ["--conf", f"{key}={value}"]
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("*.out"))
                    pytest.fail(f"start-connect-server.sh did not listen on {port}:\n{logs[-3000:]}")
                time.sleep(0.5)
        yield f"sc://localhost:{port}"
    finally:
        subprocess.run([os.path.join(home, "sbin", "stop-connect-server.sh")], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_running_count_on_a_standalone_connect_server(standalone_server):
    spark = SparkSession.builder.remote(standalone_server).create()
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
