"""repartition_state: a stopped query's state rewritten into another number of partitions, after
which the restarted query continues exactly as if it had never been repartitioned.

The queries are the release fixture's (``tests/fixtures/checkpoints/<release>/queries.py``):
the heap and the RocksDB backend with event-time timers, map_groups_with_state with event-time
timers, and two map_with_state operators in one query, one with an idle timeout. Each starts
from the fixture's checkpoint (two partitions, three micro-batches) and runs the fixture's part
2 (three more micro-batches) with a repartition before each (2→4, 4→7, 7→2) and must produce
exactly the rows and the final state the release produced without them (``expected.json``).
"""
import glob
import json
import os
import shutil

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

import mapwithstate as mws
from checkpoint_fixtures import FIXTURES, load_queries, read_inputs, releases, run_batches

RELEASE = releases()[0]
QUERIES = load_queries(RELEASE)
INTERRUPT = "spark.mapwithstate.test.interruptRepartitionAfter"

pytestmark = pytest.mark.sessions("connect", "classic")


def fixture(name, tmp_path):
    """A copy of the fixture query's checkpoint, and what the release produced after it."""
    checkpoint = str(tmp_path / "checkpoint")
    shutil.copytree(os.path.join(FIXTURES, RELEASE, name, "checkpoint"), checkpoint)
    with open(os.path.join(FIXTURES, RELEASE, name, "expected.json")) as f:
        return checkpoint, json.load(f)


def offset_entries(checkpoint):
    """Batch id -> (batch time in ms, spark.sql.shuffle.partitions) from the offset log."""
    entries = {}
    for path in glob.glob(os.path.join(checkpoint, "offsets", "[0-9]*")):
        with open(path) as f:
            metadata = json.loads(f.readlines()[1])
        entries[int(os.path.basename(path))] = (
            metadata["batchTimestampMs"], int(metadata["conf"]["spark.sql.shuffle.partitions"]))
    return entries


def state_as_if_never_repartitioned(spark, checkpoint, operator_id, repartition_batches):
    """``read_state`` of one operator as the fixture's ``expected.json`` holds it: sorted,
    ``last_updated`` as the id of the micro-batch whose time it is — counted without the
    repartitions' batches, which read no input (each has the time of the batch before it)."""
    batch_of_time = {}
    for batch, (ms, _) in sorted(offset_entries(checkpoint).items(), reverse=True):
        if batch not in repartition_batches:
            batch_of_time[ms] = batch - sum(1 for r in repartition_batches if r < batch)
    rows = mws.read_state(spark, checkpoint, operator_id=operator_id) \
        .withColumn("last_updated", F.unix_millis("last_updated")) \
        .withColumn("timeout_at", F.col("timeout_at").cast("string")).collect()
    normalized = []
    for row in rows:
        record = row.asDict()
        updated = record.pop("last_updated")
        if updated is None:
            record["last_updated"] = 0
        else:
            record["last_updated_batch"] = batch_of_time[updated]
        normalized.append(record)
    return sorted(normalized, key=lambda r: json.dumps(r, sort_keys=True))


def repartitioned_run(spark, name, tmp_path, counts):
    """Runs the fixture query's part 2 on a copy of its checkpoint, one micro-batch per run,
    repartitioning into each of `counts` before the corresponding run. Returns the runs'
    outputs, the summaries and the checkpoint."""
    checkpoint, expected = fixture(name, tmp_path)
    build, _ = QUERIES.QUERIES[name]
    result = build(spark, read_inputs(RELEASE))
    outputs, summaries = [], []
    for run, n in enumerate(counts):
        summaries.append(mws.repartition_state(spark, checkpoint, n))
        outputs += run_batches(spark, result, checkpoint, 1, str(tmp_path / f"out-{run}"))
    return outputs, summaries, checkpoint, expected


def assert_continues_exactly(spark, name, checkpoint, outputs, summaries, expected):
    assert len(outputs) == len(expected["outputs"])
    for run, (got, want) in enumerate(zip(outputs, expected["outputs"], strict=True)):
        missing = [r for r in want if r not in got]
        extra = [r for r in got if r not in want]
        assert (missing, extra) == ([], []), f"run {run}: rows missing, rows not expected"
        assert got == want, f"run {run}"
    repartition_batches = {s.batch_id for s in summaries if s.keys is not None}
    _, operators = QUERIES.QUERIES[name]
    for op in operators:
        assert state_as_if_never_repartitioned(spark, checkpoint, op, repartition_batches) \
            == expected["state"][str(op)], f"operator {op}"


@pytest.mark.connect_only
@pytest.mark.parametrize("name", sorted(QUERIES.QUERIES))
def test_repartitioned_4_7_2_the_query_continues_exactly(spark, tmp_path, name):
    outputs, summaries, checkpoint, expected = repartitioned_run(
        spark, name, tmp_path, [4, 7, 2])
    assert [(s.old_partitions, s.new_partitions) for s in summaries] == [(2, 4), (4, 7), (7, 2)]
    operators = [1000, 1001] if name == "two_operators" else [1000]
    assert all(s.operators == operators for s in summaries)
    # A repartition is a micro-batch of its own after the last one, which records the count.
    entries = offset_entries(checkpoint)
    for s in summaries:
        assert entries[s.batch_id][1] == s.new_partitions
        assert entries[s.batch_id][0] == entries[s.batch_id - 1][0]
    # Every key of the state after the run before it was rewritten (and none lost).
    assert all(s.keys > 0 for s in summaries)
    for op in operators:
        assert sorted(os.listdir(os.path.join(checkpoint, "state", str(op)))) == \
            ["0", "1", "_mapwithstate", "_metadata"]
    # The same outputs and state as the release's run without repartitioning (the state's
    # partition column included: its last layout is two partitions again).
    assert_continues_exactly(spark, name, checkpoint, outputs, summaries, expected)
    if "rocksdb" in name:
        return  # read_state reads the heap backend's files only
    # The batches before the last repartition were written in seven partitions: refused, not
    # read from the two there are now.
    last = summaries[-1].batch_id
    for read in (lambda: mws.read_state(spark, checkpoint, batch_id=last - 1,
                                        operator_id=operators[0]).collect(),
                 lambda: mws.read_state_changes(spark, checkpoint, start_batch=last,
                                                operator_id=operators[0]).collect()):
        message = error_of(read)
        assert "MAPWITHSTATE_BATCH_UNAVAILABLE" in message
        assert f"repartition_state replaced at batch {last}" in message
    assert mws.read_state(spark, checkpoint, batch_id=last, operator_id=operators[0]).count() > 0


# Spark's state checkpoint format v2, which Real-Time Mode runs on: each commit's files named by
# a unique id that the batch's commit-log entry records. A micro-batch query runs on it with
# this setting, which makes such checkpoints without a broker.
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"


@pytest.mark.slow
@pytest.mark.connect_only
@pytest.mark.parametrize("name", ["memory_event_time", "rocksdb_event_time"])
def test_a_checkpoint_of_format_v2_repartitioned_continues_exactly(spark, tmp_path, name):
    # The fixture query's part 1 run anew with checkpoint ids (in the session's four
    # partitions), then its part 2 with repartitions 4->3->2 made from a session without the
    # setting: the same outputs and state as the release's run (in two partitions) without
    # either.
    _, expected = fixture(name, tmp_path / "fixture")
    build, _ = QUERIES.QUERIES[name]
    result = build(spark, read_inputs(RELEASE))
    checkpoint = str(tmp_path / "checkpoint")
    backend = "memory" if name.startswith("memory") else "rocksdb"

    def run(runs, output):
        spark.conf.set(FORMAT_VERSION, "2")
        try:
            return run_batches(spark, result, checkpoint, runs, str(tmp_path / output))
        finally:
            spark.conf.unset(FORMAT_VERSION)

    def repartition(n):
        # Its commit names the versions it wrote, one id per new partition, which the
        # restarted query opens.
        summary = mws.repartition_state(spark, checkpoint, n)
        with open(os.path.join(checkpoint, "commits", str(summary.batch_id))) as f:
            ids = json.loads(f.readlines()[1])["stateUniqueIds"]["1000"]
        assert len(ids) == n
        for partition, (state_id,) in enumerate(ids):
            written = os.path.join(checkpoint, "state", "1000", str(partition),
                                   f"{summary.batch_id + 1}_{state_id}{suffix}")
            assert os.path.exists(written), sorted(os.listdir(os.path.dirname(written)))
        return summary

    suffix = ".snapshot" if backend == "memory" else ".zip"
    run(QUERIES.PART1_BATCHES, "part1")
    summaries = [repartition(3)]
    outputs = run(1, "out-0")
    summaries.append(repartition(2))
    outputs += run(QUERIES.PART2_BATCHES - 1, "out-1")
    assert [(s.old_partitions, s.new_partitions) for s in summaries] == [(4, 3), (3, 2)]
    assert_continues_exactly(spark, name, checkpoint, outputs, summaries, expected)
    if backend == "rocksdb":
        # Its state read back by the ids of the last commit (the release's run read none): the
        # heap query's, of the same records and spec.
        _, heap = fixture("memory_event_time", tmp_path / "heap")
        repartitions = {s.batch_id for s in summaries}
        assert state_as_if_never_repartitioned(spark, checkpoint, 1000, repartitions) == \
            heap["state"]["1000"]


def test_a_classic_or_connect_session_repartitions_and_the_query_continues(spark, tmp_path):
    # The reference is this session's own run without repartitioning: the order of a key's
    # records within a batch (which a running sum's emitted rows show) follows the session's
    # default parallelism, which the fixture's server had and a classic session need not.
    name = "two_operators"
    checkpoint, _ = fixture(name, tmp_path / "reference")
    build, operators = QUERIES.QUERIES[name]
    result = build(spark, read_inputs(RELEASE))
    reference = {
        "outputs": run_batches(spark, result, checkpoint, QUERIES.PART2_BATCHES,
                               str(tmp_path / "reference" / "out")),
        "state": {str(op): state_as_if_never_repartitioned(spark, checkpoint, op, set())
                  for op in operators}}
    outputs, summaries, checkpoint, _ = repartitioned_run(spark, name, tmp_path, [3, 3, 2])
    assert [s.keys is None for s in summaries] == [False, True, False]
    assert summaries[1].batch_id == summaries[0].batch_id + 1  # one real batch between
    assert_continues_exactly(spark, name, checkpoint, outputs, summaries, reference)


def error_of(call):
    with pytest.raises(PySparkException) as raised:
        call()
    return str(raised.value)


def test_bad_arguments_are_refused_naming_the_problem(spark, tmp_path):
    with pytest.raises(ValueError, match="num_partitions must be at least 1, got 0"):
        mws.repartition_state(spark, str(tmp_path), 0)
    with pytest.raises(TypeError, match="num_partitions must be an int, got str"):
        mws.repartition_state(spark, str(tmp_path), "4")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="checkpoint must be a non-empty path string"):
        mws.repartition_state(spark, "", 4)
    missing = str(tmp_path / "nowhere")
    message = error_of(lambda: mws.repartition_state(spark, missing, 4))
    assert "MAPWITHSTATE_NOT_A_CHECKPOINT" in message and "has no offsets/" in message
    # A checkpoint of a query without map_with_state: only Spark's aggregation's state.
    checkpoint = str(tmp_path / "agg")
    query = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 1).load() \
        .groupBy((F.col("value") % 2).alias("k")).count().writeStream.format("noop") \
        .outputMode("update").option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    message = error_of(lambda: mws.repartition_state(spark, checkpoint, 4))
    assert "holds no map_with_state state" in message
    assert "only the state of Spark's stateful operators 0" in message
    ours, _ = fixture("memory_event_time", tmp_path)
    message = error_of(lambda: mws.repartition_state(spark, ours, 100_000))
    assert "num_partitions 100000 is above the limit of 10000" in message


def test_a_running_query_and_a_batch_left_uncommitted_are_refused(spark, tmp_path):
    checkpoint, _ = fixture("memory_event_time", tmp_path)
    build, _ = QUERIES.QUERIES["memory_event_time"]
    query = build(spark, read_inputs(RELEASE)).writeStream.format("noop") \
        .option("checkpointLocation", checkpoint).trigger(processingTime="1 second").start()
    try:
        with pytest.raises(PySparkException) as raised:
            mws.repartition_state(spark, checkpoint, 4)
        error = raised.value
        assert (error.getCondition(), error.getSqlState()) == ("MAPWITHSTATE_QUERY_ACTIVE", "55006")
        assert f"belongs to streaming query {query.id}, running in this application" in str(error)
    finally:
        query.stop()
    # Stopped in the middle of a batch (or running in another application): an offset log
    # entry without its commit (stopping may itself have left one).
    last = max(offset_entries(checkpoint))
    if os.path.exists(os.path.join(checkpoint, "commits", str(last))):
        os.remove(os.path.join(checkpoint, "commits", str(last)))
    message = error_of(lambda: mws.repartition_state(spark, checkpoint, 4))
    assert "MAPWITHSTATE_QUERY_ACTIVE" in message
    assert f"batch {last} is planned but not committed" in message
    assert offset_entries(checkpoint)[last][1] == 2  # nothing written


@pytest.mark.sessions("classic")
def test_sparks_own_repartition_fails_on_these_operators_and_repartition_state_finishes_it(
        spark, tmp_path):
    # Spark's checkpointManager.repartition (classic only; pyspark has no binding yet) logs
    # its batch first, then reads the state with Spark's state data source, which cannot.
    checkpoint, _ = fixture("memory_event_time", tmp_path)
    last = max(offset_entries(checkpoint))
    jvm, session = spark.sparkContext._jvm, spark._jsparkSession
    manager = jvm.org.apache.spark.sql.classic.StreamingCheckpointManager(
        session, session.sessionState().conf())
    with pytest.raises(Exception, match="STDS_FAILED_TO_READ_STATE_SCHEMA"):
        manager.repartition(checkpoint, 4, True)
    assert offset_entries(checkpoint)[last + 1][1] == 4  # its batch, left unfinished
    message = error_of(lambda: mws.repartition_state(spark, checkpoint, 3))
    assert f"unfinished repartition into 4 partitions (batch {last + 1})" in message
    summary = mws.repartition_state(spark, checkpoint, 4)
    assert (summary.batch_id, summary.old_partitions, summary.new_partitions) == (last + 1, 2, 4)
    # The query continues as this session's run without any repartition does.
    build, _ = QUERIES.QUERIES["memory_event_time"]
    result = build(spark, read_inputs(RELEASE))
    outputs = run_batches(spark, result, checkpoint, QUERIES.PART2_BATCHES, str(tmp_path / "o"))
    reference, _ = fixture("memory_event_time", tmp_path / "reference")
    assert outputs == run_batches(spark, result, reference, QUERIES.PART2_BATCHES,
                                  str(tmp_path / "reference" / "o"))


@pytest.mark.connect_only
@pytest.mark.parametrize("step", ["state", "offsets", "state-abandoned"])
def test_an_interrupted_repartition_leaves_the_checkpoint_usable(
        testing_server, tmp_path, step):
    spark = testing_server
    checkpoint, expected = fixture("two_operators", tmp_path)
    build, _ = QUERIES.QUERIES["two_operators"]
    result = build(spark, read_inputs(RELEASE))
    before = offset_entries(checkpoint)
    abandoned = step == "state-abandoned"
    step = step.split("-")[0]
    spark.conf.set(INTERRUPT, step)
    try:
        message = error_of(lambda: mws.repartition_state(spark, checkpoint, 5))
    finally:
        spark.conf.unset(INTERRUPT)
    assert f"injected interruption ({INTERRUPT}) after the {step} step" in message
    planned = max(before) + 1
    assert (planned in offset_entries(checkpoint)) == (step == "offsets")
    # A restart of the query is refused until the repartition is finished: by the state's
    # mark, or, once the offset log has the repartition's entry, by Spark itself...
    message = error_of(lambda: run_batches(spark, result, checkpoint, 1, str(tmp_path / "x")))
    assert ("STREAMING_UNFINISHED_REPARTITION_DETECTED" if step == "offsets" else
            "the repartition did not finish: run mapwithstate.repartition_state") in message
    if step == "offsets":
        # ... with the count it was started with.
        message = error_of(lambda: mws.repartition_state(spark, checkpoint, 3))
        assert f"unfinished repartition into 5 partitions (batch {planned})" in message
    if abandoned:
        # Given up: back to the count the checkpoint has, which undoes what was written.
        summary = mws.repartition_state(spark, checkpoint, 2)
        assert (summary.keys, summary.old_partitions, summary.new_partitions) == (None, 2, 2)
        outputs = run_batches(spark, result, checkpoint, 3, str(tmp_path / "out"))
        assert_continues_exactly(spark, "two_operators", checkpoint, outputs, [], expected)
        return
    summary = mws.repartition_state(spark, checkpoint, 5)
    assert (summary.batch_id, summary.old_partitions, summary.new_partitions) == (planned, 2, 5)
    outputs = run_batches(spark, result, checkpoint, 1, str(tmp_path / "out-0"))
    summaries = [summary, mws.repartition_state(spark, checkpoint, 2)]
    outputs += run_batches(spark, result, checkpoint, 2, str(tmp_path / "out-1"))
    assert_continues_exactly(spark, "two_operators", checkpoint, outputs, summaries, expected)
