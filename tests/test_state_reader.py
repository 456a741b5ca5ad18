"""read_state and read_state_changes: map_with_state's state read back from a checkpoint.

Every expectation comes from the stream itself: its ``output="snapshots"`` rows, or the words
fed to it; the checkpoints are written by real queries, with the state on the heap and (on
Connect) in RocksDB, and the same query on both backends reads back the same rows.
"""
import collections
import glob
import json
import os
import threading
import time

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from specs import running_count
from streams import Stream, corrupt

# Every test reads through both doors: a Spark Connect session and a classic one (the JVM API);
# on Connect, from a checkpoint of each backend too.
pytestmark = [pytest.mark.sessions("connect", "classic"), pytest.mark.backends("rocksdb")]

# A failed Spark job: Spark Connect raises it as a PySparkException, classic pyspark as py4j's
# error (it converts analysis errors only); the tests assert on its message either way.
JOB_FAILED = (PySparkException, Py4JJavaError)

# Six micro-batches; a key is removed by its third record, so batches delete keys too.
BATCHES = [["a", "b", "a"], ["c", "a"], ["b", "d"], ["a", "d", "d"], ["e"], ["b", "e"]]


def add_batches(stream, batches):
    """One input file per batch, with increasing modification times: the file source takes
    files in that order, and files written in the same instant could come in any order."""
    for words in batches:
        stream.add(*words)
    files = sorted(glob.glob(os.path.join(stream.input, "part-*")))
    start = time.time() - len(files)
    for i, path in enumerate(files):
        os.utime(path, (start + i, start + i))


def count_to_three() -> StateSpec:
    n = F.coalesce(S.state("n"), F.lit(0)) + 1
    return StateSpec.function("n BIGINT", update=F.struct(n.alias("n")), remove=n >= 3,
                              emit=F.struct(F.col("word"), n.alias("n")))


def files_of(checkpoint):
    """Every file of a checkpoint with its size and modification time."""
    return {os.path.join(d, n): (os.path.getsize(os.path.join(d, n)),
                                 os.path.getmtime(os.path.join(d, n)))
            for d, _, names in os.walk(checkpoint) for n in names}


def state_of(df):
    return dict((r.word, r.n) for r in df.select("word", "n").collect())


def backend_of(spark):
    return spark.conf.get("spark.mapwithstate.stateStore.backend", "memory")


# A state snapshot every 2 versions, on either backend.
SNAPSHOT_EVERY_2 = {"spark.mapwithstate.stateStore.snapshotInterval": "2",
                    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2"}


@pytest.fixture(scope="module")
def snapshots_streams(connect_spark, tmp_path_factory):
    """The six batches run with snapshots output on Connect, once per backend (made when a
    test first asks for that backend's)."""
    made = {}

    def of(backend):
        if backend not in made:
            made[backend] = run_snapshots_stream(connect_spark, backend,
                                                 str(tmp_path_factory.mktemp(backend)))
        return made[backend]
    return of


def run_snapshots_stream(spark, backend, root, conf=None):
    """The six batches with snapshots output, the session set with `conf` too while it runs."""
    stream = Stream(root)
    add_batches(stream, BATCHES)
    settings = {**SNAPSHOT_EVERY_2, **(conf or {})}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        stream.run_available_now(map_with_state(
            stream.read(spark), "word", count_to_three().backend(backend), output="snapshots"))
    finally:
        for key in settings:
            spark.conf.unset(key)
    rows = spark.read.schema("batch_time TIMESTAMP, word STRING, n BIGINT").json(stream.output) \
        .selectExpr("unix_micros(batch_time) AS t", "word", "n").collect()
    by_time = collections.defaultdict(dict)
    for r in rows:
        by_time[r.t][r.word] = r.n
    times = stream.batch_times()
    assert sorted(times) == list(range(len(BATCHES)))
    snapshots = {b: by_time.get(ms * 1000, {}) for b, ms in times.items()}
    return stream, snapshots, times


@pytest.fixture
def snapshots_stream(spark, snapshots_streams):
    """The six batches' stream of the test's backend: (stream, snapshots by batch, times)."""
    return snapshots_streams(backend_of(spark))


def test_read_state_at_every_batch_equals_the_streams_snapshots(spark, snapshots_stream):
    stream, snapshots, times = snapshots_stream
    before = files_of(stream.checkpoint)
    for batch in range(len(BATCHES)):
        df = mws.read_state(spark, stream.checkpoint, batch_id=batch)
        assert state_of(df) == snapshots[batch], f"batch {batch}"
    assert state_of(mws.read_state(spark, stream.checkpoint)) == snapshots[len(BATCHES) - 1]
    # Nothing the readers do changes the checkpoint.
    assert files_of(stream.checkpoint) == before


def test_read_state_columns_come_from_the_checkpoint(spark, snapshots_stream):
    stream, _, times = snapshots_stream
    df = mws.read_state(spark, stream.checkpoint, batch_id=3)
    assert df.columns == ["word", "n", "last_updated", "timeout_at", "partition"]
    assert [f.dataType.simpleString() for f in df.schema.fields] == \
        ["string", "bigint", "timestamp", "timestamp", "int"]
    rows = {r.word: r for r in df.selectExpr(
        "word", "unix_micros(last_updated) AS updated", "timeout_at", "partition").collect()}
    # a: removed in batch 1, back in batch 3; b: batches 0 and 2; d: removed in batch 3.
    assert rows["a"].updated == times[3] * 1000
    assert rows["b"].updated == times[2] * 1000
    assert rows["c"].updated == times[1] * 1000
    assert "d" not in rows
    assert all(r.timeout_at is None and 0 <= r.partition < 4 for r in rows.values())


def test_state_changes_replayed_over_a_snapshot_give_the_later_snapshot(spark, snapshots_stream):
    stream, snapshots, _ = snapshots_stream
    changes = mws.read_state_changes(spark, stream.checkpoint, start_batch=0)
    assert changes.columns == ["batch_id", "change", "word", "n"]
    rows = sorted(changes.collect(), key=lambda r: (r.batch_id, r.word))
    assert [tuple(r) for r in rows if r.batch_id == 1] == [(1, "delete", "a", None),
                                                          (1, "update", "c", 1)]
    for k in range(-1, len(BATCHES) - 1):
        for m in range(k + 1, len(BATCHES)):
            state = dict(snapshots[k]) if k >= 0 else {}
            for r in mws.read_state_changes(spark, stream.checkpoint, start_batch=k + 1,
                                            end_batch=m).orderBy("batch_id").collect():
                if r.change == "delete":
                    del state[r.word]
                else:
                    state[r.word] = r.n
            assert state == snapshots[m], f"changes of batches {k + 1}..{m}"


def expected_counts(files):
    counts = collections.Counter()
    for words in files:
        counts.update(words)
    return dict(counts)


@pytest.mark.connect_only  # a second session of the same server
def test_reading_a_running_query_then_stopped_restarted_and_from_another_session(
        spark, server, tmp_path):
    stream = Stream(str(tmp_path))
    # Batch i has i + 1 records, so the sum of the counts tells which batch a read saw.
    files = [[f"w{j % 3}" for j in range(i + 1)] for i in range(8)]
    stream.add(*files[0])
    result = map_with_state(stream.read(spark), "word", running_count())
    query = result.writeStream.format("json").option("path", stream.output) \
        .option("checkpointLocation", stream.checkpoint).trigger(processingTime="200 milliseconds") \
        .start()

    def feed():
        for words in files[1:]:
            time.sleep(0.4)
            stream.add(*words)

    feeder = threading.Thread(target=feed)
    feeder.start()
    seen = set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(seen) < len(files):
            try:
                state = state_of(mws.read_state(spark, stream.checkpoint))
            except PySparkException:
                if seen:
                    raise
                continue  # the query has not committed its first batch yet
            total = sum(state.values())
            batch = next(b for b in range(len(files)) if sum(range(b + 2)) == total)
            assert state == expected_counts(files[:batch + 1]), f"read while running: {batch}"
            seen.add(batch)
            if batch == len(files) - 1:
                break
    finally:
        feeder.join()
        query.stop()
    assert len(seen) >= 2, f"reads saw only batches {seen}"
    final = expected_counts(files)
    assert state_of(mws.read_state(spark, stream.checkpoint)) == final
    # Restarted: it continues from the checkpoint, the reader sees the new batch.
    stream.add("w0", "new")
    stream.run_available_now(result)
    final = expected_counts(files + [["w0", "new"]])
    assert state_of(mws.read_state(spark, stream.checkpoint)) == final
    other = server.session()
    try:
        assert state_of(mws.read_state(other, stream.checkpoint)) == final
        assert mws.read_state_changes(other, stream.checkpoint, start_batch=len(files)) \
            .select("word", "n").collect() != []
    finally:
        other.stop()


@pytest.fixture
def small_stream(spark, tmp_path):
    """Three batches, a snapshot every 2 versions: files 1-3 .delta and 2.snapshot."""
    stream = Stream(str(tmp_path))
    add_batches(stream, [["a"], ["b"], ["a", "c"]])
    spark.conf.set("spark.mapwithstate.stateStore.snapshotInterval", "2")
    try:
        stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    finally:
        spark.conf.unset("spark.mapwithstate.stateStore.snapshotInterval")
    return stream


def state_files(stream, name):
    return sorted(glob.glob(os.path.join(stream.checkpoint, "state", "1000", "*", name)))


def test_a_path_that_is_not_a_checkpoint_is_refused(spark, tmp_path):
    with pytest.raises(PySparkException, match=r"is not a streaming query's checkpoint: it has "
                                               r"no commits/ or offsets/ \(found nothing\)"):
        mws.read_state(spark, str(tmp_path)).schema


def test_a_checkpoint_of_another_operator_is_refused(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(stream.read(spark).dropDuplicates(["word"]))
    with pytest.raises(PySparkException, match=r"is not a map_with_state checkpoint: it holds "
                                               r"the state of stateful operators 0, not of "
                                               r"map_with_state \(operator 1000\)"):
        mws.read_state(spark, stream.checkpoint).schema


def assert_same_state_and_changes(spark, checkpoints, starts=None):
    """Every batch's state, and the changes from each of `starts` (default: every batch) to the
    last batch, read back alike from each of `checkpoints`, checkpoints of the same query (only
    the times differ: each query's batches ran at their own times)."""
    def rows(df):
        return sorted(tuple(r) for r in df.drop("partition").collect())
    first, *others = checkpoints
    for batch in range(len(BATCHES)):
        read = [rows(mws.read_state(spark, c, batch_id=batch)
                     .select("word", "n", F.col("last_updated").isNotNull(), "timeout_at"))
                for c in checkpoints]
        assert all(r == read[0] for r in read[1:]), f"batch {batch}: {read}"
    for start in range(len(BATCHES)) if starts is None else starts:
        read = [rows(mws.read_state_changes(spark, c, start_batch=start)) for c in checkpoints]
        assert all(r == read[0] for r in read[1:]), f"changes from batch {start}: {read}"


@pytest.mark.backend_only("rocksdb")  # it reads both backends' checkpoints
def test_the_same_query_on_both_backends_reads_back_the_same_state_and_changes(
        spark, snapshots_streams):
    assert_same_state_and_changes(
        spark, [snapshots_streams(b)[0].checkpoint for b in ("memory", "rocksdb")])


# Spark's state checkpoint format v2, which Real-Time Mode runs on: each commit's files are
# named by a unique id that the batch's commit-log entry records. A micro-batch query runs on
# it with this setting, which makes such checkpoints without a broker.
FORMAT_V2 = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}


def assert_has_checkpoint_ids(checkpoint, backend, partitions):
    """Every commit of the state is in files named by version and checkpoint id, and each
    commit-log entry records one id per state partition."""
    suffix = ".delta" if backend == "memory" else ".changelog"
    names = [n for p in range(partitions)
             for n in os.listdir(os.path.join(checkpoint, "state", "1000", str(p)))]
    commits = [n for n in names if n.endswith(suffix)]
    assert commits and all("_" in n for n in commits), names
    for path in glob.glob(os.path.join(checkpoint, "commits", "[0-9]*")):
        with open(path) as f:
            entry = json.loads(f.readlines()[1])
        assert len(entry["stateUniqueIds"]["1000"]) == partitions, (path, entry)


@pytest.mark.slow  # two more streams of six batches
@pytest.mark.backend_only("rocksdb")  # it writes and reads both backends' checkpoints
def test_checkpoints_of_format_v2_read_back_as_the_same_query_without_ids(
        spark, snapshots_streams, tmp_path):
    # The heap's state and changes without checkpoint ids are the reference (the stream's own
    # snapshots, as the tests above check); each backend's with ids (as Real-Time Mode writes
    # them) reads back the same, each version opened by the id its commit names, snapshots
    # and changelogs of that lineage: the changes from the first batch and from one after a
    # snapshot (every 2 versions).
    streams = {b: run_snapshots_stream(spark, b, str(tmp_path / b), FORMAT_V2)[0]
               for b in ("memory", "rocksdb")}
    for backend, stream in streams.items():
        assert_has_checkpoint_ids(stream.checkpoint, backend, 4)
    assert_same_state_and_changes(spark, [snapshots_streams("memory")[0].checkpoint] +
                                  [s.checkpoint for s in streams.values()], starts=(0, 3))


@pytest.mark.connect_only
def test_a_key_added_and_removed_in_one_batch_is_no_change_on_either_backend(spark, tmp_path):
    # RocksDB's changelog holds the key's writes and its removal; the heap's delta holds
    # nothing of it. The feed shows nothing, as the state before and after has nothing.
    stream = Stream(str(tmp_path))
    add_batches(stream, [["a"], ["x", "x", "x", "a"], ["a"]])
    stream.run_available_now(map_with_state(stream.read(spark), "word", count_to_three()))
    changes = mws.read_state_changes(spark, stream.checkpoint, start_batch=0).collect()
    assert sorted(tuple(r) for r in changes) == [(0, "update", "a", 1), (1, "update", "a", 2),
                                                 (2, "delete", "a", None)]


@pytest.mark.backend_only("rocksdb")
def test_a_rocksdb_checkpoint_without_changelogs_reads_its_state_but_not_its_changes(
        spark, tmp_path):
    stream = Stream(str(tmp_path))
    add_batches(stream, [["a", "b"], ["a"]])
    off = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
    spark.conf.set(off, "false")
    try:
        stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    finally:
        spark.conf.unset(off)
    assert state_of(mws.read_state(spark, stream.checkpoint, batch_id=0)) == {"a": 1, "b": 1}
    assert state_of(mws.read_state(spark, stream.checkpoint)) == {"a": 2, "b": 1}
    with pytest.raises(PySparkException, match=r"has no changelog files \(its query ran with "
                                               r"spark\.sql\.streaming\.stateStore\.rocksdb\."
                                               r"changelogCheckpointing\.enabled=false\)"):
        mws.read_state_changes(spark, stream.checkpoint, start_batch=0).schema


def test_a_batch_beyond_the_last_committed_is_refused(spark, small_stream):
    with pytest.raises(PySparkException, match=r"batch_id 3 is beyond the last committed "
                                               r"batch \(2\) of "):
        mws.read_state(spark, small_stream.checkpoint, batch_id=3).schema
    with pytest.raises(PySparkException, match=r"end_batch 7 is beyond the last committed"):
        mws.read_state_changes(spark, small_stream.checkpoint, start_batch=0, end_batch=7).schema
    with pytest.raises(ValueError, match=r"batch_id must be >= 0, got -1"):
        mws.read_state(spark, small_stream.checkpoint, batch_id=-1)


@pytest.mark.memory_only  # the heap backend's files
def test_a_cleaned_up_version_names_the_oldest_readable_batch(spark, small_stream):
    # What maintenance leaves when it keeps versions 2 and later: the files before the
    # snapshot of version 2 are gone.
    for path in state_files(small_stream, "1.delta") + state_files(small_stream, "2.delta"):
        os.remove(path)
    with pytest.raises(PySparkException, match=r"batch_id: the state after batch 0 of .* has "
                                               r"been cleaned up by state maintenance; the "
                                               r"oldest batch still readable is 1"):
        mws.read_state(spark, small_stream.checkpoint, batch_id=0).schema
    assert state_of(mws.read_state(spark, small_stream.checkpoint, batch_id=1)) == \
        {"a": 1, "b": 1}
    with pytest.raises(PySparkException, match=r"the oldest batch whose changes are still "
                                               r"readable is 2"):
        mws.read_state_changes(spark, small_stream.checkpoint, start_batch=1).schema


@pytest.mark.memory_only  # the heap backend's files
def test_a_damaged_state_file_fails_the_read_naming_the_file(spark, small_stream):
    delta = max(state_files(small_stream, "3.delta"), key=os.path.getsize)  # one with records
    corrupt(delta, "flip")
    with pytest.raises(JOB_FAILED) as failure:
        mws.read_state(spark, small_stream.checkpoint).collect()
    assert f"cannot load mapWithState state file file:{delta}" in str(failure.value)
    assert "corrupt" in str(failure.value)
    with pytest.raises(JOB_FAILED) as failure:
        mws.read_state_changes(spark, small_stream.checkpoint, start_batch=2).collect()
    assert f"cannot load mapWithState state file file:{delta}" in str(failure.value)


def test_a_timer_query_shows_its_pending_timers_as_timeout_at(spark, tmp_path):
    # With timeout_at timers the one time the state keeps per key is the timer: the reader
    # shows it as timeout_at (and has no last_updated to show).
    stream = Stream(str(tmp_path))
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")),
        timeout_at=S.batch_time() + F.expr("INTERVAL 1 HOUR"))
    stream.add("a", "b", "a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", spec))
    rows = mws.read_state(spark, stream.checkpoint).collect()
    assert sorted((r.word, r.n) for r in rows) == [("a", 2), ("b", 1)]
    assert all(r.last_updated is None and r.timeout_at is not None for r in rows)
    # Spark plans with the column's nullability: a filter on the null sees every key.
    assert mws.read_state(spark, stream.checkpoint).where("last_updated IS NULL").count() == 2
    plain = Stream(str(tmp_path / "plain"))
    plain.add("a")
    plain.run_available_now(map_with_state(plain.read(spark), "word", running_count()))
    (row,) = mws.read_state(spark, plain.checkpoint).collect()
    assert row.last_updated is not None and row.timeout_at is None
