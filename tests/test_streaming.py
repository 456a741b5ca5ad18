"""map_with_state over Structured Streaming: micro-batches as batches, state in the checkpoint.

Each test feeds its micro-batches through a :class:`streams.Stream` (one input file per
micro-batch) and reads exactly-once results from its JSON sink.
"""
import glob
import os
import time

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from specs import running_count, running_sum
from streams import (WINDOWED_SUMS, Stream, corrupt, counts, run_memory,
                     state_kept_by_sparks_provider, windowed_counts)

pytestmark = [pytest.mark.sessions("connect", "classic"), pytest.mark.backends("rocksdb")]


def test_running_count_over_micro_batches(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.add("a", "c")
    query = stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    assert stream.results(spark) == counts(
        ("a", 1), ("a", 2), ("a", 3), ("b", 1), ("c", 1))
    progress = query.lastProgress["stateOperators"][0]
    assert progress["operatorName"] == "mapWithState"
    assert progress["numRowsTotal"] == 3


def test_restart_on_the_same_checkpoint_continues_exactly(spark, tmp_path):
    stream = Stream(str(tmp_path))
    result = map_with_state(stream.read(spark), "word", running_count())
    stream.add("a", "b")
    stream.run_available_now(result)
    stream.add("a", "c")
    stream.add("b")
    stream.run_available_now(result)
    # No record is counted twice (the sink would hold a duplicate) or lost (a gap in n).
    assert stream.results(spark) == counts(
        ("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2))


def test_snapshots_hold_the_whole_state_after_each_micro_batch(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.add("c")
    result = map_with_state(stream.read(spark), "word", running_count(), output="snapshots")
    assert result.columns == ["batch_time", "word", "n"]
    stream.run_available_now(result)
    rows = stream.results(spark, "batch_time TIMESTAMP, word STRING, n BIGINT")
    by_batch = {}
    for batch_time, word, n in rows:
        by_batch.setdefault(batch_time, []).append((word, n))
    assert sorted(sorted(v) for v in by_batch.values()) == [
        [("a", 2), ("b", 1)],
        [("a", 2), ("b", 1), ("c", 1)],
    ]


def test_initial_state_applies_only_to_the_first_batch(spark, tmp_path):
    stream = Stream(str(tmp_path))
    initial = spark.createDataFrame([("a", 10), ("z", 5)], "word STRING, n BIGINT")
    result = map_with_state(stream.read(spark), "word", running_count().initial_state(initial))
    stream.add("a")
    stream.run_available_now(result)
    stream.add("a", "z")
    stream.run_available_now(result)
    assert stream.results(spark) == counts(("a", 11), ("a", 12), ("z", 6))


def test_two_queries_with_different_checkpoints_keep_their_own_state(spark, tmp_path):
    first, second = Stream(str(tmp_path / "first")), Stream(str(tmp_path / "second"))
    first.add("a", "a")
    second.add("a")
    q1 = first.run_available_now(map_with_state(first.read(spark), "word", running_count()))
    q2 = second.run_available_now(map_with_state(second.read(spark), "word", running_count()))
    first.add("a")
    second.add("a")
    first.run_available_now(map_with_state(first.read(spark), "word", running_count()))
    second.run_available_now(map_with_state(second.read(spark), "word", running_count()))
    assert q1.id != q2.id
    assert first.results(spark) == counts(("a", 1), ("a", 2), ("a", 3))
    assert second.results(spark) == counts(("a", 1), ("a", 2))


def test_timeouts_fire_on_checkpoint_micro_batches_including_no_data_ones(spark, tmp_path):
    stream = Stream(str(tmp_path))
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n"),
                      S.is_timing_out().alias("timed_out")),
    ).timeout("300 milliseconds").checkpoint_interval(2)
    stream.add("a", "b")
    name = "mws_timeouts"
    query = map_with_state(stream.read(spark), "word", spec).writeStream.format("memory") \
        .queryName(name).option("checkpointLocation", stream.checkpoint) \
        .trigger(processingTime="400 milliseconds").start()
    try:
        deadline = time.monotonic() + 120
        rows = []
        while time.monotonic() < deadline:
            rows = spark.sql(f"select * from {name}").collect()
            if sum(1 for r in rows if r.timed_out) == 2:
                break
            time.sleep(0.5)
        # The sink has a batch's rows before the query reports the batch's progress.
        progress = query.recentProgress
        while time.monotonic() < deadline and not any(
                p["stateOperators"] and p["stateOperators"][0]["customMetrics"]["numTimedOutKeys"]
                for p in progress):
            time.sleep(0.5)
            progress = query.recentProgress
    finally:
        query.stop()
    assert sorted((tuple(r) for r in rows), key=repr) == sorted([
        ("a", 1, False), ("a", None, True), ("b", 1, False), ("b", None, True)], key=repr)
    # The keys timed out in a no-data micro-batch that Spark ran only because keys were
    # waiting: the first checkpoint batch (odd batch id) whose batch time is more than 300 ms
    # after the first batch's — usually batch 1, but a first batch that ends just before a
    # trigger boundary is followed by a batch 1 only moments later — and with the keys gone,
    # no more batches ran.
    times = stream.batch_times()
    due = min(b for b, t in times.items() if b % 2 == 1 and t - times[0] > 300)
    timeout_batches = [p for p in progress if p["stateOperators"]
                       and p["stateOperators"][0]["customMetrics"]["numTimedOutKeys"] > 0]
    assert [p["batchId"] for p in timeout_batches] == [due]
    assert sum(s["numInputRows"] for s in timeout_batches[0]["sources"]) == 0
    assert timeout_batches[0]["stateOperators"][0]["numRowsTotal"] == 0
    assert max(p["batchId"] for p in progress) == due


def test_update_mode_gives_the_append_rows(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    result = map_with_state(stream.read(spark), "word", running_count())
    result.writeStream.format("memory").queryName("mws_update").outputMode("update") \
        .option("checkpointLocation", stream.checkpoint).trigger(availableNow=True).start() \
        .awaitTermination()
    assert sorted(tuple(r) for r in spark.table("mws_update").collect()) == \
        [("a", 1), ("a", 2), ("b", 1)]


def test_complete_mode_is_refused_at_start(spark, tmp_path):
    stream = Stream(str(tmp_path))
    result = map_with_state(stream.read(spark), "word", running_count())
    # Spark's own check refuses complete mode first, as clearly, for any query without an
    # aggregation; ours would refuse it after one.
    with pytest.raises(PySparkException, match=r"Invalid streaming output mode: complete"):
        result.writeStream.format("memory").queryName("mws_complete").outputMode("complete") \
            .option("checkpointLocation", stream.checkpoint).start()


def test_an_aggregation_over_its_rows_may_write_complete_mode(spark, tmp_path):
    """A streaming aggregation after map_with_state owns the result table, so the query may
    write it whole each micro-batch, as Spark lets flatMapGroupsWithState (append) feed one;
    one query run over three micro-batches."""
    stream = Stream(str(tmp_path))
    for words in (["a", "b", "a"], ["a"], ["c", "b"]):
        stream.add(*words)
    # How many times each word's count reached each n: every n once per word up to its count.
    result = map_with_state(stream.read(spark), "word", running_count()).groupBy("n").count()
    result.writeStream.format("memory").queryName("mws_agg_complete").outputMode("complete") \
        .option("checkpointLocation", stream.checkpoint).trigger(availableNow=True).start() \
        .awaitTermination()
    assert sorted(tuple(r) for r in spark.table("mws_agg_complete").collect()) == \
        [(1, 3), (2, 2), (3, 1)]
    # The aggregation keeps its state in the session's provider, not in the operator's store.
    assert state_kept_by_sparks_provider(stream.checkpoint)


def test_complete_mode_is_refused_with_an_aggregation_only_before_it(spark, tmp_path):
    stream = Stream(str(tmp_path))
    counted = stream.read(spark).groupBy("word").count()
    result = map_with_state(counted, "word", running_count())
    with pytest.raises(PySparkException, match=r"supports outputMode\('append'\) and "
                                               r"outputMode\('update'\) \(the same rows\), not 'complete'"):
        result.writeStream.format("memory").queryName("mws_agg").outputMode("complete") \
            .option("checkpointLocation", stream.checkpoint).start()


def test_an_aggregation_before_it_is_refused_in_update_mode(spark, tmp_path):
    # The aggregation emits a's count again in each micro-batch that changes it (2, then 3),
    # which map_with_state would take as new records, as Spark refuses flatMapGroupsWithState
    # in update mode after one.
    stream = Stream(str(tmp_path))
    result = map_with_state(stream.read(spark).groupBy("word").count(), "word",
                            running_sum(F.col("count")))
    with pytest.raises(PySparkException,
                       match=r"map_with_state reads the rows of a streaming aggregation in "
                             r"outputMode\('update'\), which emits a key's row again .* write "
                             r"the query in outputMode\('append'\) with a watermark on the "
                             r"aggregation's grouping"):
        run_memory(result, "mws_agg_update", stream.checkpoint, "update")


def test_an_aggregation_with_a_watermark_before_it_in_append_mode(spark, tmp_path):
    """In append mode a windowed aggregation emits each window's count once, when the
    watermark passes its end, so map_with_state may sum them (Spark 4 allows
    flatMapGroupsWithState after such an aggregation)."""
    stream = Stream(str(tmp_path))
    windowed = windowed_counts(spark, stream)
    run_memory(map_with_state(windowed, "word", running_sum(F.col("count"))),
               "mws_windows_append", stream.checkpoint)
    assert sorted(tuple(r) for r in spark.table("mws_windows_append").collect()) == \
        WINDOWED_SUMS


def event_time_count():
    """running_count with an event-time timer 1 s after each key's last record."""
    return StateSpec.function(
        "n BIGINT", update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")),
        timeout_at=F.when(~S.is_timing_out(), F.col("event") + F.expr("INTERVAL 1 SECOND")),
    ).timeout_domain("event_time")


def followed_by(kind, spark, stream, result):
    """`result` followed by the stateful operator `kind`, and the output mode to write it in."""
    if kind == "join":
        other = stream.read(spark).withColumnRenamed("word", "w2")
        return result.join(other, F.col("word") == F.col("w2")), "append"
    return result.groupBy("word").count(), kind


@pytest.mark.parametrize("kind,operator", [("update", "a streaming aggregation"),
                                           ("complete", "a streaming aggregation"),
                                           ("join", "a stream-stream join")])
def test_event_time_timers_followed_by_a_stateful_operator_are_refused(
        spark, tmp_path, kind, operator):
    # Spark's global-watermark limit: the rows a timer emits can be older than the watermark
    # that fired it, late rows to the stateful operator after it.
    stream = Stream(str(tmp_path))
    result = map_with_state(stream.read_events(spark), "word", event_time_count())
    result, mode = followed_by(kind, spark, stream, result)
    with pytest.raises(PySparkException) as info:
        run_memory(result, f"mws_event_time_{kind}", stream.checkpoint, mode)
    message = str(info.value)
    assert f"map_with_state with event-time timers (timeout_domain('event_time')) is " \
           f"followed by {operator}" in message and "use processing-time timers" in message
    assert "Detected pattern of possible 'correctness' issue due to global watermark" in \
        message and "spark.sql.streaming.statefulOperator.checkCorrectness.enabled" in message


def test_processing_time_timers_may_be_followed_by_an_aggregation(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.add("a")
    spec = StateSpec.function(
        "n BIGINT", update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")),
        timeout_at=S.batch_time() + F.expr("INTERVAL 1 HOUR"))
    result = map_with_state(stream.read(spark), "word", spec).groupBy("word").count()
    run_memory(result, "mws_timers_then_count", stream.checkpoint, "complete")
    assert sorted(tuple(r) for r in spark.table("mws_timers_then_count").collect()) == \
        [("a", 3), ("b", 1)]


@pytest.fixture
def correctness_check_off(spark):
    key = "spark.sql.streaming.statefulOperator.checkCorrectness.enabled"
    spark.conf.set(key, "false")
    yield
    spark.conf.unset(key)


def test_the_correctness_check_switched_off_lets_timers_feed_an_aggregation(
        spark, tmp_path, correctness_check_off):
    """As Spark only warns then; an aggregation re-read in update mode is still refused, as
    Spark refuses flatMapGroupsWithState in update mode with one whatever the switch."""
    stream = Stream(str(tmp_path))
    stream.add_events(("a", 1), ("b", 2), ("a", 3))
    counted = map_with_state(stream.read_events(spark), "word", event_time_count()) \
        .groupBy("word").count()
    run_memory(counted, "mws_unchecked", stream.checkpoint, "update")
    assert sorted(tuple(r) for r in spark.table("mws_unchecked").collect()) == \
        [("a", 2), ("b", 1)]
    reread = map_with_state(stream.read(spark).groupBy("word").count(), "word", running_count())
    with pytest.raises(PySparkException, match="reads the rows of a streaming aggregation"):
        run_memory(reread, "mws_unchecked_reread", str(tmp_path / "ck2"), "update")


def test_num_partitions_of_a_stream_must_be_its_shuffle_partitions(spark, tmp_path):
    stream = Stream(str(tmp_path))
    # the test server runs with spark.sql.shuffle.partitions=4
    with pytest.raises(PySparkException, match=r"num_partitions\(3\) differs from "
                                               r"spark.sql.shuffle.partitions \(4\)"):
        map_with_state(stream.read(spark), "word", running_count().num_partitions(3)).schema
    result = map_with_state(stream.read(spark), "word", running_count().num_partitions(4))
    assert result.isStreaming and result.columns == ["word", "n"]


def state_files(stream, pattern):
    return sorted(glob.glob(os.path.join(stream.checkpoint, "state", "1000", "*", pattern)))


@pytest.mark.memory_only  # the heap backend's delta and snapshot files
@pytest.mark.parametrize("kind,how", [("delta", "flip"), ("snapshot", "truncate")])
def test_damaged_state_file_fails_the_query_naming_the_file(spark, tmp_path, kind, how):
    stream = Stream(str(tmp_path))
    result = map_with_state(stream.read(spark), "word", running_count())
    stream.add(*[f"w{i}" for i in range(40)])
    # A snapshot every version, so that loading version 1 reads the snapshot.
    spark.conf.set("spark.mapwithstate.stateStore.snapshotInterval", "1" if kind == "snapshot" else "10")
    try:
        stream.run_available_now(result)
    finally:
        spark.conf.unset("spark.mapwithstate.stateStore.snapshotInterval")
    # Snapshots are written in the background after the commit: wait for one to damage.
    deadline = time.monotonic() + 60
    while not state_files(stream, f"1.{kind}") and time.monotonic() < deadline:
        time.sleep(0.2)
    damaged = state_files(stream, f"1.{kind}")[0]
    corrupt(damaged, how)
    stream.add(*[f"w{i}" for i in range(40)])
    with pytest.raises(PySparkException) as failure:
        stream.run_available_now(result)
    message = str(failure.value)
    assert f"cannot load mapWithState state file file:{damaged}" in message
    assert ("truncated" if how == "truncate" else "corrupt") in message


MIN_DELTAS = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
AUTO_REPAIR = "spark.sql.streaming.stateStore.autoSnapshotRepair.enabled"


def rocksdb_files_after_two_batches(spark, stream, min_deltas):
    """Runs two micro-batches of 40 keys on RocksDB; returns the query's result and a function
    listing partition 0's files of a kind ("changelog", "zip"), by version."""
    result = map_with_state(stream.read(spark), "word", running_count().backend("rocksdb"))
    stream.add(*[f"w{i}" for i in range(40)])
    stream.add(*[f"w{i}" for i in range(40)])
    spark.conf.set(MIN_DELTAS, min_deltas)
    try:
        stream.run_available_now(result)
    finally:
        spark.conf.unset(MIN_DELTAS)

    def files(kind):
        found = glob.glob(os.path.join(stream.checkpoint, "state", "1000", "0", f"*.{kind}"))
        return sorted(found, key=lambda f: int(os.path.basename(f).split(".")[0]))
    return result, files


def wait_until_state_files_settle(stream, quiet_seconds=3, limit_seconds=60):
    """Waits until no file of the checkpoint's state has changed for ``quiet_seconds``: the
    stopped run's stores are closed by the testing server's maintenance, which may still upload
    a snapshot; under load that takes longer than a fixed pause."""
    def listing():
        return {(d, n, os.path.getmtime(os.path.join(d, n)))
                for d, _, names in os.walk(os.path.join(stream.checkpoint, "state"))
                for n in names}
    deadline = time.monotonic() + limit_seconds
    last, since = listing(), time.monotonic()
    while time.monotonic() - since < quiet_seconds and time.monotonic() < deadline:
        time.sleep(0.5)
        now = listing()
        if now != last:
            last, since = now, time.monotonic()


@pytest.mark.slow  # the testing server: maintenance every second uploads RocksDB's snapshots
def test_rocksdb_damaged_snapshot_falls_back_to_an_older_one_and_the_changelogs(
        testing_server, tmp_path):
    stream = Stream(str(tmp_path))
    result, files = rocksdb_files_after_two_batches(testing_server, stream, "1")
    deadline = time.monotonic() + 60
    while not any(f.endswith("/2.zip") for f in files("zip")) and time.monotonic() < deadline:
        time.sleep(0.2)
    wait_until_state_files_settle(stream)
    corrupt(files("zip")[-1], "truncate")
    stream.add(*[f"w{i}" for i in range(40)])
    # Spark's default, which its testing mode (the testing server's) turns off.
    testing_server.conf.set(AUTO_REPAIR, "true")
    try:
        query = stream.run_available_now(result)  # a new run: its stores load from the files
    finally:
        testing_server.conf.unset(AUTO_REPAIR)
    # Spark's RocksDB provider skips the damaged snapshot: the state is exactly right.
    assert stream.results(testing_server) == counts(
        *[(f"w{i}", n) for i in range(40) for n in (1, 2, 3)])
    repaired = query.lastProgress["stateOperators"][0]["customMetrics"]
    assert repaired["rocksdbNumSnapshotsAutoRepaired"] >= 1


@pytest.mark.slow  # the testing server's maintenance closes the stopped run's stores promptly
@pytest.mark.parametrize("how", ["truncate", "flip_middle"])
def test_rocksdb_damaged_changelog_fails_the_query(testing_server, tmp_path, how):
    stream = Stream(str(tmp_path))
    # No snapshot after the first version: loading version 2 replays 2.changelog.
    result, files = rocksdb_files_after_two_batches(testing_server, stream, "100")
    wait_until_state_files_settle(stream)
    damaged = files("changelog")[-1]
    assert damaged.endswith("/2.changelog") and "2.zip" not in str(files("zip"))
    corrupt(damaged, how)
    stream.add(*[f"w{i}" for i in range(40)])
    with pytest.raises(PySparkException) as failure:
        stream.run_available_now(result)
    # Spark's error, which does not name the file; nothing is written from a wrong state.
    assert "CANNOT_LOAD_STATE_STORE" in str(failure.value)
    assert stream.results(testing_server) == counts(
        *[(f"w{i}", n) for i in range(40) for n in (1, 2)])


@pytest.mark.slow
@pytest.mark.connect_only  # a second Connect server process
@pytest.mark.memory_only  # the spec names its backend: the testing server has the default one
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_restart_in_a_fresh_server_process_continues_exactly(
        spark, testing_server, tmp_path, backend):
    stream = Stream(str(tmp_path))
    spec = running_count().backend(backend).timeout("1 hour")  # the timer index comes back too
    stream.add("a", "b", "a")
    stream.add("c")
    stream.run_available_now(map_with_state(stream.read(spark), "word", spec))
    stream.add("a", "b")
    stream.add("c", "d")
    stream.run_available_now(map_with_state(stream.read(testing_server), "word", spec))
    assert stream.results(testing_server) == counts(
        ("a", 1), ("a", 2), ("b", 1), ("c", 1), ("a", 3), ("b", 2), ("c", 2), ("d", 1))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_task_failing_mid_partition_is_retried_with_exactly_the_old_state(
        testing_server, tmp_path, backend):
    marker = str(tmp_path / "failed-once")
    stream = Stream(str(tmp_path / "stream"))
    words = [f"w{i % 8}" for i in range(64)]
    stream.add(*words)
    result = map_with_state(stream.read(testing_server), "word", running_count().backend(backend))
    stream.run_available_now(result)
    testing_server.conf.set("spark.mapwithstate.test.failTaskOnceMarker", marker)
    try:
        stream.add(*words)
        stream.run_available_now(result)
    finally:
        testing_server.conf.unset("spark.mapwithstate.test.failTaskOnceMarker")
    assert os.path.exists(marker), "no task failed: the fault was not injected"
    assert stream.results(testing_server) == counts(
        *[(f"w{k}", n) for k in range(8) for n in range(1, 17)])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_a_task_serving_several_partitions_retries_those_it_had_committed(
        testing_server, tmp_path, backend):
    # In local mode a task serves a run of state partitions (local[2], 4 partitions: [0, 1] and
    # [2, 3]). Only partitions 0 (one record) and 1 (three) get words here, so the injected
    # failure (the first task to reach a partition's second record) comes in partition 1, after
    # the same task committed partition 0's new version: the retry must make it again from
    # the old one, neither lost nor counted twice.
    marker = str(tmp_path / "failed-once")
    candidates = testing_server.createDataFrame([(f"w{i}",) for i in range(64)], "word STRING") \
        .select("word", F.expr("pmod(hash(word), 4)").alias("p")).collect()
    first = next(r.word for r in candidates if r.p == 0)
    second = next(r.word for r in candidates if r.p == 1)
    stream = Stream(str(tmp_path / "stream"))
    stream.add(first, second, second, second)
    result = map_with_state(stream.read(testing_server), "word", running_count().backend(backend))
    testing_server.conf.set("spark.mapwithstate.test.failTaskOnceMarker", marker)
    try:
        stream.run_available_now(result)
    finally:
        testing_server.conf.unset("spark.mapwithstate.test.failTaskOnceMarker")
    assert os.path.exists(marker), "no task failed: the fault was not injected"
    stream.add(first, second)
    stream.run_available_now(result)
    assert stream.results(testing_server) == counts(
        (first, 1), (first, 2), *[(second, n) for n in range(1, 5)])


def test_a_foreach_batch_sink_gets_each_micro_batch_with_the_state_committed(spark, tmp_path):
    # Spark checks, for a foreachBatch sink, that every state store of a micro-batch committed
    # (spark.sql.streaming.stateStore.commitValidation.enabled); each partition's commit is
    # reported to it, whatever the backend and however many partitions a task serves.
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.add("a", "c")
    out = str(tmp_path / "batches")

    def write(batch, batch_id):
        batch.withColumn("batch", F.lit(batch_id)).write.mode("append").json(out)

    query = map_with_state(stream.read(spark), "word", running_count()).writeStream \
        .foreachBatch(write).option("checkpointLocation", stream.checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    rows = spark.read.schema("word STRING, n BIGINT, batch BIGINT").json(out).collect()
    assert sorted(tuple(r) for r in rows) == sorted(
        [("a", 1, 0), ("a", 2, 0), ("b", 1, 0), ("a", 3, 1), ("c", 1, 1)])


def test_a_bad_coalesce_local_tasks_setting_names_the_setting(spark, tmp_path):
    setting = "spark.mapwithstate.stateStore.coalesceLocalTasks"
    stream = Stream(str(tmp_path))
    stream.add("a")
    spark.conf.set(setting, "sometimes")
    try:
        with pytest.raises(PySparkException) as failure:
            stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    finally:
        spark.conf.unset(setting)
    assert f"{setting} must be true or false, got 'sometimes'" in str(failure.value)
    spark.conf.set(setting, "false")  # a task per partition: the same answer
    try:
        stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    finally:
        spark.conf.unset(setting)
    assert stream.results(spark) == [("a", 1)]


def test_the_failure_injector_is_inert_outside_testing_mode(spark, tmp_path):
    # Any client may set any conf: outside Spark's testing mode, no executor may act on it.
    marker = str(tmp_path / "must-not-exist")
    stream = Stream(str(tmp_path / "stream"))
    stream.add(*[f"w{i % 4}" for i in range(16)])
    spark.conf.set("spark.mapwithstate.test.failTaskOnceMarker", marker)
    try:
        stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    finally:
        spark.conf.unset("spark.mapwithstate.test.failTaskOnceMarker")
    assert not os.path.exists(marker)
    assert stream.results(spark) == counts(*[(f"w{k}", n) for k in range(4) for n in range(1, 5)])


def test_a_changed_state_schema_is_refused_on_restart(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    # A narrowing (BIGINT to INT), which the schema-evolution rules cannot carry over
    # (tests/test_state_evolution.py has every allowed and refused change).
    changed = StateSpec.function(
        "n INT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).cast("int").alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").cast("bigint").alias("n")))
    stream.add("a")
    with pytest.raises(PySparkException) as failure:
        stream.run_available_now(map_with_state(stream.read(spark), "word", changed))
    assert "the key columns or the state schema differ from those this query's checkpoint" \
        in str(failure.value)
    assert stream.results(spark) == [("a", 1)]


@pytest.mark.memory_only  # the heap backend's delta files
@pytest.mark.connect_only  # server_conf() sets the query logs' manager; a classic session does not
def test_checkpoint_files_are_written_without_hadoop_crc_files(spark, tmp_path):
    # server_conf() sets the plugin's fork-free checkpoint file manager for the query's logs
    # (loaded from the plugin jar), and state files always use it: no `.crc` side files.
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    written = [os.path.relpath(os.path.join(d, f), stream.checkpoint)
               for d, _, files in os.walk(stream.checkpoint) for f in files]
    assert "offsets/0" in written and "commits/0" in written
    assert any(name.endswith("1.delta") for name in written)
    assert [name for name in written if name.endswith(".crc")] == []


def test_a_union_beside_it_does_not_shift_its_state_partitions(spark, tmp_path):
    """Spark's SPARK-29438 case: map_with_state on the right of a union whose left side has
    another number of partitions after a restart, so the union's task numbers for the right
    side move; each key's state must stay with its state partition."""
    left, right = Stream(str(tmp_path / "left")), Stream(str(tmp_path / "right"))

    def run(left_partitions):
        plain = left.read(spark).repartition(left_partitions) \
            .select("word", F.lit(0).cast("bigint").alias("n"))
        left.run_available_now(
            plain.union(map_with_state(right.read(spark), "word", running_count())))
        return left.results(spark)

    left.add("input1-a")
    right.add("input2-a")
    first = run(2)
    assert first == [("input1-a", 0), ("input2-a", 1)]
    left.add("input1-a")
    right.add("input2-a", "input2-b")
    new = run(3)
    for row in first:
        new.remove(row)
    assert new == [("input1-a", 0), ("input2-a", 2), ("input2-b", 1)]
