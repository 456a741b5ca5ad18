"""Checkpoints written by a release, kept as fixtures that later releases must restart.

``tests/fixtures/checkpoints/<release>/`` holds, per query of that release's ``queries.py``:
``<query>/checkpoint/`` (the query's checkpoint after ``PART1_BATCHES`` micro-batches) and
``<query>/expected.json`` (what the release itself then produced over the next
``PART2_BATCHES``: each run's output rows, and ``read_state`` of its heap operators), beside
``inputs.json`` (the records of every batch). ``dev/gen-checkpoint-fixture`` makes one with
the release's jar; ``tests/test_checkpoint_upgrades.py`` restarts every fixture with the
current code and compares.

Run as a script, this module is the generator (``dev/gen-checkpoint-fixture`` documents it)::

    MAPWITHSTATE_JAR=/path/to/release.jar python tests/checkpoint_fixtures.py 0.1.0
"""
import glob
import importlib.util
import json
import os
import shutil
import sys
import tempfile

from pyspark.sql import functions as F

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "checkpoints")
# A key's last update is the batch time of a micro-batch, which is the wall clock: compared as
# the id of that micro-batch (from the checkpoint's offset log) instead.
LAST_UPDATED_BATCH = "last_updated_batch"
SINK_LOG_COMPACT_INTERVAL = "spark.sql.streaming.fileSink.log.compactInterval"


def operator_metadata(checkpoint, operator=1000):
    """The path and the ``_mapwithstate`` properties of one operator of the checkpoint."""
    path = os.path.join(checkpoint, "state", str(operator), "_mapwithstate")
    with open(path) as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    return path, dict(line.split("=", 1) for line in lines)


def releases():
    """The releases with a fixture, oldest first."""
    return sorted(os.listdir(FIXTURES), key=lambda v: tuple(int(p) for p in v.split(".")))


def load_queries(release):
    """The ``queries.py`` module of a release's fixture."""
    path = os.path.join(FIXTURES, release, "queries.py")
    spec = importlib.util.spec_from_file_location(f"checkpoint_queries_{release}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_inputs(release):
    with open(os.path.join(FIXTURES, release, "inputs.json")) as f:
        return json.load(f)


def run_batches(spark, result, checkpoint, runs, output):
    """Runs `result` `runs` times with ``availableNow`` on `checkpoint` (each run reads one more
    batch of the input), each run into its own JSON directory under `output` (Spark's memory
    sink refuses to restart a checkpoint in append mode); returns each run's rows, sorted, as
    dicts."""
    outputs = []
    # A sink's log compacts its earlier batches' entries every 10 batch ids, which a fresh
    # directory's log does not have: no compaction within these few batches.
    spark.conf.set(SINK_LOG_COMPACT_INTERVAL, "1000000")
    try:
        for run in range(runs):
            path = os.path.join(output, f"run-{run}")
            query = result.writeStream.format("json").option("path", path) \
                .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
            query.awaitTermination()
            # The part files themselves: the log of a directory whose first batch id is not 0
            # reads as damaged.
            files = os.path.join(path, "part-*")
            rows = spark.read.schema(result.schema).json(files).collect() \
                if glob.glob(files) else []
            outputs.append(_sorted_dicts(rows))
    finally:
        spark.conf.unset(SINK_LOG_COMPACT_INTERVAL)
    return outputs


def state_rows(spark, checkpoint, operator_id):
    """``read_state`` of one operator, sorted, with ``last_updated`` as the id of the
    micro-batch whose time it is (kept as epoch milliseconds when none is, and 0 for a key
    under event-time timers, which has no update time)."""
    import mapwithstate as mws

    batch_of_time = {ms: batch for batch, ms in _batch_times(checkpoint).items()}
    state = mws.read_state(spark, checkpoint, operator_id=operator_id)
    rows = state.withColumn("last_updated", F.unix_millis("last_updated")) \
        .withColumn("timeout_at", F.col("timeout_at").cast("string")).collect()
    normalized = []
    for row in rows:
        record = row.asDict()
        if record["last_updated"] is None:
            # No update time (a timer query's key): null, which release 0.1.0's reader, whose
            # column was not nullable, gave as the epoch; the fixtures hold that 0.
            record["last_updated"] = 0
        if record["last_updated"] in batch_of_time:
            record[LAST_UPDATED_BATCH] = batch_of_time[record.pop("last_updated")]
        normalized.append(record)
    return sorted(normalized, key=lambda r: json.dumps(r, sort_keys=True))


def _batch_times(checkpoint):
    """Batch id -> the batch's time (ms), from the checkpoint's offset log."""
    times = {}
    for path in glob.glob(os.path.join(checkpoint, "offsets", "[0-9]*")):
        with open(path) as f:
            times[int(os.path.basename(path))] = json.loads(f.readlines()[1])["batchTimestampMs"]
    return times


def _sorted_dicts(rows):
    return sorted((r.asDict() for r in rows), key=lambda r: json.dumps(r, sort_keys=True))


def continue_query(spark, release, query_name, checkpoint, output):
    """Restarts a fixture query on `checkpoint` (a copy of its ``checkpoint/``) for the
    release's part 2, writing its rows under `output`; returns what ``expected.json`` holds
    for it."""
    queries = load_queries(release)
    build, operators = queries.QUERIES[query_name]
    result = build(spark, read_inputs(release))
    outputs = run_batches(spark, result, checkpoint, queries.PART2_BATCHES, output)
    return {"outputs": outputs,
            "state": {str(op): state_rows(spark, checkpoint, op) for op in operators}}


def generate(release):
    """Writes the fixture of `release` with the jar and client this process runs (see the
    module's docstring); replaces one already there, keeping its ``queries.py``."""
    import mapwithstate as mws

    queries = load_queries(release)
    root = os.path.join(FIXTURES, release)
    records = queries.make_inputs()
    with open(os.path.join(root, "inputs.json"), "w") as f:
        json.dump(records, f, indent=0)
        f.write("\n")
    # Two state partitions keep the fixture small; the checkpoint records the number.
    conf = {"spark.sql.shuffle.partitions": "2"}
    with mws.LocalConnectServer(conf=conf) as server, tempfile.TemporaryDirectory() as work:
        spark = server.session()
        try:
            for name, (build, _) in sorted(queries.QUERIES.items()):
                checkpoint = os.path.join(work, name, "checkpoint")
                run_batches(spark, build(spark, records), checkpoint, queries.PART1_BATCHES,
                            os.path.join(work, name, "part1"))
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                shutil.copytree(checkpoint, os.path.join(root, name, "checkpoint"))
                expected = continue_query(spark, release, name, checkpoint,
                                          os.path.join(work, name, "part2"))
                with open(os.path.join(root, name, "expected.json"), "w") as f:
                    json.dump(expected, f, indent=1, sort_keys=True)
                    f.write("\n")
                print(f"{name}: {len(expected['outputs'])} runs, "
                      f"{sum(map(len, expected['outputs']))} rows", flush=True)
        finally:
            spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: checkpoint_fixtures.py RELEASE   (with MAPWITHSTATE_JAR that release's)")
    generate(sys.argv[1])
