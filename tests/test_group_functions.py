"""Spark's FlatMapGroupsWithStateSuite (its cases without timeouts), through
``map_groups_with_state``: in batch, as batch replays, and over streams restarted from their
checkpoints.

The suite's functions become Columns: ``values.size`` is ``F.count("*")``, the state's
``getOption`` is ``S.state(...)``, ``state.remove()`` is ``remove``, the returned iterator
is ``emit`` (an array of structs for several rows, null for none).
"""
import json
import os
from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state
from mapwithstate import functions as S
from replay import by_batch, expected_by_batch, replay_input
from specs import flat_running_count, group_count, map_running_count, running_sum
from streams import (WINDOWED_SUMS, Stream, run_memory, state_kept_by_sparks_provider,
                     windowed_counts)

pytestmark = [pytest.mark.sessions("connect", "classic"), pytest.mark.backends("rocksdb")]



def rows(df):
    return sorted(tuple(r) for r in df.collect())


STREAM_BATCHES = [["a"], ["a", "b"], ["a", "b"], ["a", "c"]]
FLAT_ANSWERS = [[("a", "1")], [("a", "2"), ("b", "1")], [("b", "2")], [("a", "1"), ("c", "1")]]
MAP_ANSWERS = [[("a", "1")], [("a", "2"), ("b", "1")], [("a", "-1"), ("b", "2")],
               [("a", "1"), ("c", "1")]]


def test_map_groups_with_state_batch(spark):
    df = spark.createDataFrame([("a",), ("a",), ("b",)], "word STRING")
    assert rows(map_groups_with_state(df, "word", map_running_count())) == \
        [("a", "2"), ("b", "1")]


def test_flat_map_groups_with_state_batch_replay(spark):
    df = replay_input(spark, STREAM_BATCHES)
    spec = StateSpec.function(
        "count BIGINT",
        update=F.struct(group_count().alias("count")),
        remove=group_count() == 3,
        emit=F.when(S.new_state().isNotNull(),
                    F.struct(S.batch_time().alias("t"), F.col("word"),
                             S.new_state("count").cast("string").alias("n"))))
    out = map_groups_with_state(df, "word", spec, batch_time="ts").collect()
    assert by_batch(out, "t", lambda r: (r.word, r.n)) == expected_by_batch(FLAT_ANSWERS)


def test_state_snapshots_after_each_batch(spark):
    df = replay_input(spark, STREAM_BATCHES)
    out = map_groups_with_state(df, "word", flat_running_count(), batch_time="ts",
                                output="snapshots").collect()
    states = [[("a", 1)], [("a", 2), ("b", 1)], [("b", 2)], [("a", 1), ("b", 2), ("c", 1)]]
    assert by_batch(out, "batch_time", lambda r: (r.word, r["count"])) == \
        expected_by_batch(states)


def run_stream_with_restarts(spark, tmp_path, spec):
    """Each batch of STREAM_BATCHES in its own run of the query, restarted from its
    checkpoint, into a JSON sink; returns the new rows after each run."""
    return Stream(str(tmp_path)).run_each_batch(
        spark, STREAM_BATCHES, lambda source: map_groups_with_state(source, "word", spec))[0]


def test_flat_map_groups_with_state_streaming_restarted_from_checkpoint(spark, tmp_path):
    assert run_stream_with_restarts(spark, tmp_path, flat_running_count()) == FLAT_ANSWERS


def test_map_groups_with_state_streaming_restarted_from_checkpoint(spark, tmp_path):
    assert run_stream_with_restarts(spark, tmp_path, map_running_count()) == MAP_ANSWERS


def test_update_mode_into_a_sink(spark, tmp_path):
    """outputMode("update") into a sink that requires it (memory serves both; file sinks only
    append): the same rows as append."""
    stream = Stream(str(tmp_path))
    for words in STREAM_BATCHES:
        stream.add(*words)
    query = map_groups_with_state(stream.read(spark), "word", map_running_count()) \
        .writeStream.format("memory").queryName("groups_update").outputMode("update") \
        .option("checkpointLocation", stream.checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    assert rows(spark.table("groups_update")) == sorted(r for b in MAP_ANSWERS for r in b)


def test_streaming_plus_aggregation_in_complete_mode(spark, tmp_path):
    """The suite's "streaming + aggregation": the group function's rows (appended), counted
    per key by a streaming aggregation whose whole result table each micro-batch writes
    (complete mode), the query restarted from its checkpoint before each batch."""
    stream = Stream(str(tmp_path))
    answers = []
    for i, words in enumerate(STREAM_BATCHES):
        stream.add(*words)
        counted = map_groups_with_state(stream.read(spark), "word", map_running_count()) \
            .groupBy("word").count()
        name = f"groups_then_count_{i}"
        counted.writeStream.format("memory").queryName(name).outputMode("complete") \
            .option("checkpointLocation", stream.checkpoint).trigger(availableNow=True) \
            .start().awaitTermination()
        answers.append(rows(spark.table(name)))
    # The rows emitted so far per key: a's "-1" on removal counts too.
    assert answers == [[("a", 1)], [("a", 2), ("b", 1)], [("a", 3), ("b", 2)],
                       [("a", 4), ("b", 2), ("c", 1)]]
    # The aggregation (operator 0) keeps its state in the session's provider, Spark's HDFS
    # one, not in the store map_groups_with_state chose for its own.
    assert state_kept_by_sparks_provider(stream.checkpoint)


def test_after_a_windowed_aggregation_in_append_mode(spark, tmp_path):
    """UnsupportedOperationsSuite's "flatMapGroupsWithState(Append) on streaming relation after
    aggregation in Append mode" (allowed since Spark 4): with a watermark the aggregation emits
    each window's count once, when final, so the group function may sum them."""
    stream = Stream(str(tmp_path))
    summed = map_groups_with_state(windowed_counts(spark, stream), "word",
                                   running_sum(F.sum("count")))
    run_memory(summed, "windows_then_groups", stream.checkpoint)
    assert rows(spark.table("windows_then_groups")) == WINDOWED_SUMS


def test_processing_time_timers_followed_by_an_aggregation(spark, tmp_path):
    """The suite's "multiple stateful ops - FlatMapGroupsWithState(process time) followed by
    agg": only event-time timers meet the global-watermark limit."""
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.add("a", "c")
    spec = StateSpec.function(
        "count BIGINT", update=F.struct(group_count().alias("count")),
        emit=F.struct(F.col("word"), S.new_state("count").alias("n")),
        timeout_at=S.batch_time() + F.expr("INTERVAL 1 HOUR"))
    counted = map_groups_with_state(stream.read(spark), "word", spec).groupBy("word").count()
    run_memory(counted, "timers_then_count", stream.checkpoint, "complete")
    assert rows(spark.table("timers_then_count")) == [("a", 2), ("b", 1), ("c", 1)]


def test_multiple_output_rows_per_group(spark):
    """flatMapGroupsWithState returning an iterator of several rows: one per value here, and
    a second row with the group's count."""
    df = spark.createDataFrame([("a", 1), ("a", 2), ("b", 3)], "word STRING, v INT")
    spec = StateSpec.function(
        "count BIGINT",
        update=F.struct(group_count().alias("count")),
        emit=F.concat(
            F.transform(F.array_sort(F.collect_list("v")),
                        lambda v: F.struct(F.col("word"), v.cast("bigint").alias("n"))),
            F.array(F.struct(F.col("word"), (-S.new_state("count")).alias("n")))))
    assert rows(map_groups_with_state(df, "word", spec)) == \
        [("a", -2), ("a", 1), ("a", 2), ("b", -1), ("b", 3)]


def test_empty_or_null_array_emits_nothing(spark):
    df = spark.createDataFrame([("a", 1), ("b", 2)], "word STRING, v INT")
    spec = StateSpec.function(
        "count BIGINT",
        update=F.struct(group_count().alias("count")),
        emit=F.when(F.col("word") == "a", F.array(F.struct(F.col("word"), F.sum("v").alias("s"))))
        .otherwise(F.filter(F.array(F.struct(F.col("word"), F.sum("v").alias("s"))),
                            lambda x: F.lit(False))))
    assert rows(map_groups_with_state(df, "word", spec)) == [("a", 1)]


def test_initial_state_with_groups(spark, tmp_path):
    """flatMapGroupsWithState with an initial state: keys start from it, in batch and in a
    stream's first batch, and a key of it with no records there is called with none."""
    initial = spark.createDataFrame([("a", 1), ("c", 1)], "word STRING, count BIGINT")
    spec = flat_running_count().initial_state(initial)
    df = spark.createDataFrame([("a",), ("b",), ("b",)], "word STRING")
    # a: 1 + 1 = 2; b: 2; c: 1 + 0 records
    assert rows(map_groups_with_state(df, "word", spec)) == \
        [("a", "2"), ("b", "2"), ("c", "1")]

    stream = Stream(str(tmp_path))
    stream.add("a", "b", "b")
    stream.add("a", "c")
    stream.run_available_now(map_groups_with_state(stream.read(spark), "word", spec))
    # batch 1: a→2, b→2, c→1; batch 2: a reaches 3 (removed, nothing), c → 2
    assert stream.results(spark, "word STRING, n STRING") == \
        [("a", "2"), ("b", "2"), ("c", "1"), ("c", "2")]


def initial_state_all_cases_spec(initial, timeout_at=None, domain="processing_time"):
    """FlatMapGroupsWithStateWithInitialStateSuite's function: the count (state, or 0, plus
    the values) is emitted, and kept as the state unless the key says "NoUpdate"."""
    return StateSpec.function(
        "count BIGINT",
        update=F.when(~F.col("word").contains("NoUpdate"), F.struct(group_count().alias("count"))),
        emit=F.struct(F.col("word"), group_count().cast("string").alias("n")),
        timeout_at=timeout_at,
    ).timeout_domain(domain).initial_state(initial)


INITIAL_STATE_ALL_CASES = [("keyInStateAndData-1", 1), ("keyInStateAndData-2", 2),
                           ("keyNoUpdate", 2), ("keyOnlyInState-1", 1)]
INITIAL_STATE_FIRST_ANSWER = [("keyInStateAndData-1", "1"), ("keyInStateAndData-2", "3"),
                              ("keyNoUpdate", "2"), ("keyOnlyInData", "1"),
                              ("keyOnlyInState-1", "1")]


def test_initial_state_all_cases_in_batch(spark):
    """The suite's "initial state - batch mode": every key of the initial state is called,
    with its records or with none."""
    initial = spark.createDataFrame(INITIAL_STATE_ALL_CASES, "word STRING, count BIGINT")
    df = spark.createDataFrame([("keyOnlyInData",), ("keyInStateAndData-2",)], "word STRING")
    spec = initial_state_all_cases_spec(initial)
    assert rows(map_groups_with_state(df, "word", spec)) == INITIAL_STATE_FIRST_ANSWER


@pytest.mark.parametrize("domain", ["processing_time", "event_time"])
def test_initial_state_all_cases_in_batch_with_timers(spark, domain):
    """The suite's "initial state - batch mode - timeout ProcessingTimeTimeout / EventTimeTimeout":
    over a batch, timers may be set in either domain, with no watermark for event time, and
    change no answer."""
    initial = spark.createDataFrame(INITIAL_STATE_ALL_CASES, "word STRING, count BIGINT")
    df = spark.createDataFrame([("keyOnlyInData",), ("keyInStateAndData-2",)], "word STRING")
    base = S.batch_time() if domain == "processing_time" else F.timestamp_seconds(F.lit(0))
    spec = initial_state_all_cases_spec(initial, base + F.expr("INTERVAL 1 HOUR"), domain)
    assert rows(map_groups_with_state(df, "word", spec)) == INITIAL_STATE_FIRST_ANSWER


def test_event_time_timers_over_a_batch_without_a_watermark(spark):
    """The suite's "mapGroupsWithState - batch" (SPARK-20792): an event-time timer set over a
    batch Dataset, which has no watermark, is no error; the state starts empty."""
    df = spark.createDataFrame([("a",), ("a",), ("b",)], "word STRING")
    spec = StateSpec.function(
        "n INT", update=F.struct(F.lit(10).alias("n")),
        emit=F.struct(F.col("word"), F.count("*").alias("size"), S.state_exists().alias("had")),
        timeout_at=F.timestamp_seconds(F.lit(0)) + F.expr("INTERVAL 1 HOUR"),
    ).timeout_domain("event_time")
    assert rows(map_groups_with_state(df, "word", spec)) == [("a", 2, False), ("b", 1, False)]


def test_initial_state_all_cases_in_a_stream(spark, tmp_path):
    """The suite's "initial state - all cases": in the first micro-batch every key of the
    initial state is called, with its records or none; later batches and a restart do not
    apply it again. State rows as Spark counts them (5 in all, 4 updated: not keyNoUpdate)."""
    initial = spark.createDataFrame(INITIAL_STATE_ALL_CASES, "word STRING, count BIGINT")
    spec = initial_state_all_cases_spec(initial)
    stream = Stream(str(tmp_path))
    stream.add("keyOnlyInData", "keyInStateAndData-2")
    stream.add("keyInStateAndData-1")
    query = stream.run_available_now(map_groups_with_state(stream.read(spark), "word", spec))
    first, second = query.recentProgress[0], query.recentProgress[1]
    # SPARK-35896: the operator is named as Spark names flatMapGroupsWithState's.
    assert first.stateOperators[0].operatorName == "flatMapGroupsWithState"
    assert (first.stateOperators[0].numRowsTotal, first.stateOperators[0].numRowsUpdated) == \
        (5, 4)
    assert (second.stateOperators[0].numRowsTotal, second.stateOperators[0].numRowsUpdated) == \
        (5, 1)
    stream.add("keyInStateAndData-1")
    stream.run_available_now(map_groups_with_state(stream.read(spark), "word", spec))
    assert stream.results(spark, "word STRING, n STRING") == sorted(
        INITIAL_STATE_FIRST_ANSWER + [("keyInStateAndData-1", "2"), ("keyInStateAndData-1", "3")])


def test_aggregates_of_many_kinds_with_the_state(spark):
    df = spark.createDataFrame(
        [("a", 3, "x"), ("a", 1, "y"), ("a", 2, "z"), ("b", 5, "w")], "k STRING, v INT, s STRING")
    spec = StateSpec.function(
        "total BIGINT",
        update=F.struct((F.coalesce(S.state("total"), F.lit(0)) + F.sum("v")).alias("total")),
        emit=F.struct(
            F.col("k"), F.count("*").alias("n"), F.min("v").alias("lo"), F.max("v").alias("hi"),
            F.avg("v").alias("mean"), F.max_by("s", "v").alias("top"),
            F.array_sort(F.collect_list("s")).alias("all"), S.new_state("total").alias("total"),
            S.state_exists().alias("existed")))
    assert [tuple(r) for r in map_groups_with_state(df, "k", spec).orderBy("k").collect()] == [
        ("a", 3, 1, 3, 2.0, "x", ["x", "y", "z"], 6, False),
        ("b", 1, 5, 5, 5.0, "w", ["w"], 5, False)]


def test_initial_state_with_processing_time_timers(spark):
    """The suite's "initial state - processing time timeout", replayed at 1 s and 12 s: the
    initial state's key c is called in the first batch (count 2, no records), arms its timer
    like a, and both time out at 12 s while b is called for its record."""
    t0 = datetime(2026, 1, 1)
    count = F.coalesce(S.state("count"), F.lit(0)) + F.count("*")
    spec = StateSpec.function(
        "count BIGINT",
        update=F.when(~S.is_timing_out(), F.struct(count.alias("count"))),
        remove=S.is_timing_out(),
        emit=F.struct(F.col("word"),
                      F.when(S.is_timing_out(), F.lit(-1)).otherwise(S.new_state("count"))
                      .alias("n"), S.batch_time().alias("t")),
        timeout_at=F.when(~S.is_timing_out(), S.batch_time() + F.expr("INTERVAL 10 SECONDS")),
    ).initial_state(spark.createDataFrame([("c", 2)], "word STRING, count BIGINT"))
    at = [t0 + timedelta(seconds=s) for s in (1, 12)]
    df = spark.createDataFrame([("a", at[0]), ("b", at[1])], "word STRING, ts TIMESTAMP")
    out = map_groups_with_state(df, "word", spec, batch_time="ts")
    assert sorted(tuple(r) for r in out.collect()) == sorted([
        ("a", 1, at[0]), ("c", 2, at[0]), ("a", -1, at[1]), ("b", 1, at[1]), ("c", -1, at[1])])


def test_timing_out_calls_see_aggregates_over_no_records(spark):
    df = replay_input(spark, [["a", "a"], [], [], ["b"]])
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct(F.count("*").alias("n")),
        emit=F.struct(F.col("word"), F.count("*").alias("n"), F.sum("value").alias("s"),
                      F.collect_list("value").alias("vs"), S.is_timing_out().alias("out"))
    ).timeout("2 seconds").checkpoint_interval(1)
    out = map_groups_with_state(df, "word", spec, batch_time="ts", batch_interval="1 second")
    assert rows(out) == [("a", 0, None, [], True), ("a", 2, 2, [1, 1], False),
                         ("b", 1, 1, [1], False)]


def test_stream_of_values(spark, tmp_path):
    """Aggregates over a value column of a stream (sum per key per micro-batch)."""
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "in"))
    for i, batch in enumerate([[("a", 1), ("a", 2)], [("a", 5), ("b", 1)]]):
        with open(os.path.join(root, "in", f"part-{i}.json"), "w") as f:
            f.writelines(json.dumps({"word": w, "v": v}) + "\n" for w, v in batch)
        # The file source takes files in modification-time order.
        os.utime(os.path.join(root, "in", f"part-{i}.json"), (1_000_000 + i, 1_000_000 + i))
    stream = Stream(os.path.join(root, "s"))
    source = spark.readStream.schema("word STRING, v INT").option("maxFilesPerTrigger", 1) \
        .json(os.path.join(root, "in"))
    spec = StateSpec.function(
        "total BIGINT",
        update=F.struct((F.coalesce(S.state("total"), F.lit(0)) + F.sum("v")).alias("total")),
        emit=F.struct(F.col("word"), S.new_state("total").alias("n")))
    stream.run_available_now(map_groups_with_state(source, "word", spec))
    assert stream.results(spark) == [("a", 3), ("a", 8), ("b", 1)]


def test_map_with_state_emits_an_array_too(spark):
    """The array emit is map_with_state's as well: per record, any number of rows."""
    from mapwithstate import map_with_state

    df = spark.createDataFrame([("a", 2), ("b", 0), ("a", 1)], "word STRING, v INT")
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.transform(F.sequence(F.lit(1), F.col("v")),
                         lambda i: F.struct(F.col("word"), i.cast("bigint").alias("i"))))
    # b's sequence(1, 0) is [1, 0]: two rows
    assert rows(map_with_state(df, "word", spec, order_by="v")) == \
        [("a", 1), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]


def test_group_function_with_processing_time_timers(spark):
    # Aggregates and timers together: each key re-arms a 1-second timer on every call; a key
    # whose timer passed gets one call with empty aggregates, emits -1 and is removed.
    t0 = datetime(2026, 1, 1)
    rows = [("a", t0), ("a", t0), ("b", t0 + timedelta(seconds=1)), ("b", t0 + timedelta(seconds=3))]
    df = spark.createDataFrame(rows, "word STRING, ts TIMESTAMP")
    spec = StateSpec.function(
        "n BIGINT",
        update=F.when(~S.is_timing_out(),
                      F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.count("*")).alias("n"))),
        remove=S.is_timing_out(),
        emit=F.struct(F.col("word"),
                      F.when(S.is_timing_out(), F.lit(-1)).otherwise(S.new_state("n")).alias("n"),
                      F.count("*").alias("rows"), S.batch_time().alias("t")),
        timeout_at=F.when(~S.is_timing_out(), S.batch_time() + F.expr("INTERVAL 1 SECOND")))
    out = map_groups_with_state(df, key="word", spec=spec, batch_time="ts",
                                batch_interval="1 second").collect()
    got = sorted((r.word, r.n, r.rows, int((r.t - t0).total_seconds())) for r in out)
    assert got == [("a", -1, 0, 2), ("a", 2, 2, 0), ("b", 1, 1, 1), ("b", 2, 1, 3)]
