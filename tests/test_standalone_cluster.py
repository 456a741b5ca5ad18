"""The plugin on a real cluster manager: a Spark standalone master and two workers on this
machine, the Connect server started with the jar against ``spark://``, and a streaming running
count whose state lives on both executors. One executor JVM is killed mid-stream; the master
launches a replacement, the lost tasks and shuffle output are recomputed, the lost state is
loaded from the checkpoint, and every count comes out exactly once.
"""
import json
import re
import subprocess
import time
import urllib.request

import pytest
from pyspark.sql import SparkSession

from clusters import ConnectDaemon, StandaloneCluster, pid_alive
from mapwithstate import map_with_state
from specs import running_count
from streams import Stream

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """(cluster, Connect server, session): two 1-core workers, one 1-core executor on each."""
    root = tmp_path_factory.mktemp("standalone")
    cluster = StandaloneCluster(root / "cluster", workers=2)
    server = None
    try:
        server = ConnectDaemon(root / "server", master=cluster.url, ui=True, conf={
            "spark.executor.cores": "1", "spark.executor.memory": "768m", "spark.cores.max": "2",
            "spark.sql.shuffle.partitions": "4", "spark.task.maxFailures": "4",
            # a lost executor's state must come from the checkpoint, not another replica
            "spark.sql.streaming.stateStore.maintenanceInterval": "600s"})
        deadline = time.monotonic() + 120
        while not all(cluster.executor_pids(w) for w in (0, 1)):
            assert time.monotonic() < deadline, cluster.log("master")[-3000:]
            time.sleep(1)
        spark = SparkSession.builder.remote(server.url).create()
        try:
            yield cluster, server, spark
        finally:
            spark.stop()
    finally:
        if server is not None:
            server.stop()
        cluster.stop()


def executors(server: ConnectDaemon) -> list:
    """The application's live executors from the driver's REST API (driver excluded)."""
    base = f"http://127.0.0.1:{server.ui_port}/api/v1/applications"
    app = json.load(urllib.request.urlopen(base, timeout=10))[0]["id"]
    found = json.load(urllib.request.urlopen(f"{base}/{app}/executors", timeout=10))
    return [e for e in found if e["id"] != "driver"]


def test_executor_killed_on_a_standalone_cluster_recovers_exactly(standalone, tmp_path):
    cluster, server, spark = standalone
    stream = Stream(str(tmp_path))
    words = [f"w{i % 16}" for i in range(64)]
    batches = 8
    query = map_with_state(stream.read(spark), "word", running_count()).writeStream \
        .format("json").option("path", stream.output) \
        .option("checkpointLocation", stream.checkpoint) \
        .trigger(processingTime="1 second").start()
    killed = None
    try:
        for i in range(batches):
            stream.add(*words)
            if i == 3:
                # state committed on both workers' executors first, then one executor goes
                deadline = time.monotonic() + 180
                while (query.lastProgress or {}).get("batchId", -1) < 2:
                    assert query.isActive, query.exception()
                    assert time.monotonic() < deadline, server.log()[-3000:]
                    time.sleep(0.5)
                busy = {e["hostPort"] for e in executors(server) if e["totalTasks"] > 0}
                assert len(busy) == 2, executors(server)
                killed = cluster.executor_pids(0)[0]
                subprocess.run(["kill", "-9", str(killed)], check=True)
            time.sleep(1)
        expected_rows = batches * len(words)
        deadline = time.monotonic() + 300
        while len(stream.results(spark)) < expected_rows:
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, server.log()[-3000:]
            time.sleep(1)
    finally:
        query.stop()
    assert not pid_alive(killed)
    # the driver saw the loss, and the master replaced the executor on the same worker
    assert "Lost executor" in server.log(), server.log()[-3000:]
    master = cluster.log("master")
    assert re.search(r"Removing executor app-\S+ because it is EXITED", master), master[-3000:]
    assert master.count("Launching executor") >= 3, master[-3000:]
    assert cluster.executor_pids(0) and killed not in cluster.executor_pids(0)
    # every word counted exactly once per occurrence: 1..32 for each of the 16 words
    assert stream.results(spark) == sorted(
        (f"w{k}", n) for k in range(16) for n in range(1, batches * 4 + 1))
