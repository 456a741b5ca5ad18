"""An executor lost mid-stream: the query recovers its state from the checkpoint files.

The server runs Spark's local-cluster mode (a master, two workers and one executor JVM per
worker, all on this machine), so killing one executor process is a real executor loss: its
in-memory state stores (or RocksDB instances on its local disk) are gone, its tasks are
retried on the other executor, which loads those partitions' state from the checkpoint files
(the heap backend's delta and snapshot files, RocksDB's changelogs and snapshots).
"""
import shutil
import subprocess
import time
from pathlib import Path

import pyspark
import pytest

import mapwithstate as mws
from mapwithstate import map_with_state
from specs import running_count
from streams import Stream


def executor_pids(server_pid: int):
    """The executor JVMs of a LocalConnectServer: started by the local-cluster workers inside
    the server, they share its session (the server starts one of its own)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,sid=,args="], capture_output=True, text=True).stdout
    pids = []
    for line in out.splitlines():
        pid, sid, args = line.split(None, 2)
        if int(sid) == server_pid and "CoarseGrainedExecutorBackend" in args:
            pids.append(int(pid))
    return pids


@pytest.fixture(scope="module")
def cluster():
    server = mws.LocalConnectServer(
        master="local-cluster[2,1,1024]",
        conf={"spark.sql.shuffle.partitions": "4", "spark.task.maxFailures": "4",
              # a lost executor's state must come from the checkpoint, not another replica
              "spark.sql.streaming.stateStore.maintenanceInterval": "600s"})
    try:
        deadline = time.monotonic() + 120
        while len(executor_pids(server._process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(1)
        session = server.session()
        app_id = session.conf.get("spark.app.id")
        yield server, session
        session.stop()
    finally:
        server.stop()
    # local-cluster workers keep their executors' directories (jars, logs) under
    # SPARK_HOME/work, which is the installed pyspark: leave nothing behind there.
    work = Path(pyspark.__file__).parent / "work"
    shutil.rmtree(work / app_id, ignore_errors=True)
    if work.is_dir() and not any(work.iterdir()):
        work.rmdir()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_executor_lost_mid_stream_recovers_from_the_checkpoint(cluster, tmp_path, backend):
    server, spark = cluster
    assert len(executor_pids(server._process.pid)) == 2, server.log_tail()
    stream = Stream(str(tmp_path))
    words = [f"w{i % 16}" for i in range(64)]
    batches = 8
    spec = running_count().backend(backend)
    killed = None
    query = map_with_state(stream.read(spark), "word", spec).writeStream.format("json") \
        .option("path", stream.output).option("checkpointLocation", stream.checkpoint) \
        .trigger(processingTime="1 second").start()
    try:
        for i in range(batches):
            stream.add(*words)
            if i == 3:
                # let the query commit state on both executors, then take one away
                deadline = time.monotonic() + 120
                while (query.lastProgress or {}).get("batchId", -1) < 2 \
                        and time.monotonic() < deadline:
                    time.sleep(0.5)
                victim = executor_pids(server._process.pid)[0]
                subprocess.run(["kill", "-9", str(victim)], check=True)
                killed = victim
            time.sleep(1)
        expected_rows = batches * len(words)
        deadline = time.monotonic() + 180
        while len(stream.results(spark)) < expected_rows and time.monotonic() < deadline:
            assert query.isActive, query.exception()
            time.sleep(1)
    finally:
        query.stop()
    assert killed not in executor_pids(server._process.pid)
    # every word counted exactly once per occurrence: 1..32 for each of the 16 words
    assert stream.results(spark) == sorted(
        (f"w{k}", n) for k in range(16) for n in range(1, batches * 4 + 1))
