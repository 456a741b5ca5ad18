"""Spark's FlatMapGroupsWithStateSuite, GroupStateSuite and
FlatMapGroupsWithStateDistributionSuite cases that the other modules do not cover, ported
through the public API: the same inputs and the answers, state-row counts and metrics Spark's
tests assert (each case names its original)."""
import time
from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from replay import replay_input
from specs import flat_running_count, group_count, map_running_count
from streams import Stream, write_json

T0 = datetime(2026, 1, 1)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def rows(df):
    return sorted((tuple(r) for r in df.collect()), key=repr)


def run_available_now(result, out, ck, fmt="json"):
    q = result.writeStream.format(fmt).option("path", out) \
        .option("checkpointLocation", ck).trigger(availableNow=True).start()
    q.awaitTermination()
    return q


def op(p):
    return p.stateOperators[0]


STREAM_BATCHES = [["a"], ["a", "b"], ["a", "b"], ["a", "c"]]


def run_with_restarts_and_metrics(spark, tmp_path, spec):
    """The new rows after each restarted run, and its state rows: (total, updated, removed,
    dropped by the watermark)."""
    answers, queries = Stream(str(tmp_path)).run_each_batch(
        spark, STREAM_BATCHES, lambda source: map_groups_with_state(source, "word", spec))
    metrics = []
    for q in queries:
        progs = [p for p in q.recentProgress if p.stateOperators]
        metrics.append((op(progs[-1]).numRowsTotal,
                        sum(op(p).numRowsUpdated for p in progs),
                        sum(op(p).numRowsRemoved for p in progs),
                        sum(op(p).numRowsDroppedByWatermark for p in progs)))
    return answers, metrics


# FlatMapGroupsWithStateSuite "flatMapGroupsWithState - streaming": assertNumStateRows per batch
def test_fmgws_streaming_state_row_metrics(spark, tmp_path):
    answers, metrics = run_with_restarts_and_metrics(spark, tmp_path, flat_running_count())
    assert answers == [[("a", "1")], [("a", "2"), ("b", "1")], [("b", "2")],
                       [("a", "1"), ("c", "1")]]
    # (total, updated, removed, droppedByWatermark)
    assert [m[:2] for m in metrics] == [(1, 1), (2, 2), (1, 1), (3, 2)]
    assert metrics[2] == (1, 1, 1, 0)


# "mapGroupsWithState - streaming"
def test_mgws_streaming_state_row_metrics(spark, tmp_path):
    answers, metrics = run_with_restarts_and_metrics(spark, tmp_path, map_running_count())
    assert answers == [[("a", "1")], [("a", "2"), ("b", "1")], [("a", "-1"), ("b", "2")],
                       [("a", "1"), ("c", "1")]]
    assert [m[:2] for m in metrics] == [(1, 1), (2, 2), (1, 1), (3, 2)]


def sample_event_spec(extra=()):
    """sampleTestFunction: state = max event time (s), timer = max + 5 s; -1 on timeout."""
    largest = F.greatest(F.coalesce(S.state("max_t"), F.max("event")), F.max("event"))
    return StateSpec.function(
        "max_t TIMESTAMP",
        update=F.when(~S.is_timing_out(), F.struct(largest.alias("max_t"))),
        remove=S.is_timing_out(),
        emit=F.struct(F.col("word"),
                      F.when(S.is_timing_out(), F.lit(-1))
                      .otherwise(F.unix_seconds(S.new_state("max_t"))
                                 - F.unix_seconds(F.lit(T0))).alias("n"), *extra),
        timeout_at=S.new_state("max_t") + F.expr("INTERVAL 5 SECONDS"),
    ).timeout_domain("event_time")


def event_source(spark, src):
    return spark.readStream.schema("word STRING, e BIGINT").option("maxFilesPerTrigger", 1) \
        .json(src).select("word", (F.lit(T0).cast("long") + F.col("e")).cast("timestamp")
                          .alias("event")).withWatermark("event", "10 seconds")


# "SPARK-35896: metrics in StateOperatorProgress are output correctly" (shuffle partitions 3)
def test_spark_35896_state_operator_progress_metrics(spark, tmp_path):
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    for i, b in enumerate([[("a", 11), ("a", 13), ("a", 15)], [("a", 4)], [("a", 10)],
                           [("b", 31)]]):
        write_json(src, i, [{"word": w, "e": e} for w, e in b])
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        q = run_available_now(map_groups_with_state(event_source(spark, src), "word",
                                                    sample_event_spec()), out, ck)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    got = sorted(tuple(r) for r in spark.read.schema("word STRING, n BIGINT").json(out).collect())
    assert got == [("a", -1), ("a", 15), ("a", 15), ("b", 31)]
    progs = [p for p in q.recentProgress if p.stateOperators]
    p0 = op(progs[0])
    assert (p0.numRowsTotal, p0.numRowsUpdated, p0.numRowsDroppedByWatermark,
            p0.numRowsRemoved) == (1, 1, 0, 0)
    assert {op(p).operatorName for p in progs} == {"flatMapGroupsWithState"}
    p1 = op(progs[1])
    # ("a", 4) is late: dropped before the function, and counted where Spark counts it.
    assert (p1.numShufflePartitions, p1.numStateStoreInstances) == (3, 3)
    assert p1.numRowsDroppedByWatermark == 1
    rest = progs[2:]
    assert op(rest[-1]).numRowsTotal == 1
    assert sum(op(p).numRowsUpdated for p in rest) == 2
    assert sum(op(p).numRowsDroppedByWatermark for p in rest) == 0
    assert sum(op(p).numRowsRemoved for p in rest) == 1


# GroupState getCurrentWatermarkMs in the first micro-batch: Spark's batchWatermarkMs is 0
def test_watermark_in_first_micro_batch_of_a_stream(spark, tmp_path):
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    write_json(src, 0, [{"word": "a", "e": 11}])
    write_json(src, 1, [{"word": "a", "e": 12}])
    run_available_now(map_groups_with_state(
        event_source(spark, src), "word",
        sample_event_spec(extra=(S.watermark().alias("wm"),))), out, ck)
    got = sorted(tuple(r) for r in
                 spark.read.schema("word STRING, n BIGINT, wm TIMESTAMP").json(out).collect())
    # Spark: 0 (1970-01-01) in the first batch, then 11 - 10 = 1 s after T0
    assert got == [("a", 11, datetime(1970, 1, 1)), ("a", 12, at(1))]


def proc_time_count(seconds=10):
    return StateSpec.function(
        "count BIGINT",
        update=F.when(~S.is_timing_out(), F.struct(group_count().alias("count"))),
        remove=S.is_timing_out(),
        emit=F.struct(F.col("word"),
                      F.when(S.is_timing_out(), F.lit("-1"))
                      .otherwise(S.new_state("count").cast("string")).alias("n"),
                      S.batch_time().alias("t")),
        timeout_at=F.when(~S.is_timing_out(),
                          S.batch_time() + F.expr(f"INTERVAL {seconds} SECONDS")))


# "flatMapGroupsWithState - streaming with processing time timeout" (answers, as a replay)
def test_processing_time_timeout_answers_as_a_replay(spark):
    df = spark.createDataFrame([("a", at(1)), ("b", at(2)), ("b", at(12)), ("c", at(23))],
                               "word STRING, ts TIMESTAMP")
    out = map_groups_with_state(df, "word", proc_time_count(), batch_time="ts",
                                batch_interval="1 second")
    assert rows(out) == sorted([
        ("a", "1", at(1)), ("b", "1", at(2)), ("a", "-1", at(12)), ("b", "2", at(12)),
        ("b", "-1", at(23)), ("c", "1", at(23))], key=repr)
    # Spark's last step (clock at 35 s, no data: ("c", "-1")) has no counterpart: a replay
    # ends with its last batch that has records.


# "flatMapGroupsWithState - streaming with processing time timeout": the timeout batch's
# metrics (total 0, updated 0, removed 1), live
def test_processing_time_timeout_metrics_in_a_stream(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a")
    name = "port_pt_metrics"
    q = map_groups_with_state(stream.read(spark), "word", proc_time_count(1)) \
        .writeStream.format("memory").queryName(name).outputMode("update") \
        .option("checkpointLocation", stream.checkpoint) \
        .trigger(processingTime="500 milliseconds").start()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            got = spark.sql(f"select word, n from {name}").collect()
            progs = [p for p in q.recentProgress if p.stateOperators]
            if any(r.n == "-1" for r in got) and progs and any(
                    op(p).numRowsRemoved for p in progs):
                break
            time.sleep(0.5)
    finally:
        q.stop()
    assert sorted(tuple(r) for r in got) == [("a", "-1"), ("a", "1")]
    first = op(progs[0])
    assert (first.numRowsTotal, first.numRowsUpdated) == (1, 1)
    timeout = [op(p) for p in progs if op(p).numRowsRemoved]
    assert [(o.numRowsTotal, o.numRowsUpdated, o.numRowsRemoved) for o in timeout] == [(0, 0, 1)]


# "mapGroupsWithState - batch" (SPARK-20792): EventTimeTimeout in a batch query, no watermark,
# setTimeoutTimestamp(0, "1 hour") does not throw
# same with processing-time timers in a batch query
def test_mgws_batch_with_processing_time_timeout(spark):
    df = spark.createDataFrame([("a",), ("a",), ("b",)], "word STRING")
    spec = StateSpec.function(
        "n INT",
        update=F.struct(F.lit(10).alias("n")),
        emit=F.struct(F.col("word"), F.count("*").alias("c"),
                      S.is_timing_out().alias("timing_out")),
        timeout_at=S.batch_time() + F.expr("INTERVAL 1 HOUR"))
    assert rows(map_groups_with_state(df, "word", spec)) == [("a", 2, False), ("b", 1, False)]


# "flatMapGroupsWithState - batch" + GroupState getCurrentProcessingTimeMs/Watermark/hasTimedOut
# for batch queries: state.exists false, processing time >= now, no watermark, not timed out
def test_fmgws_batch_group_state_accessors(spark):
    before = datetime.now()
    df = spark.createDataFrame([("a",), ("a",), ("b",)], "word STRING")
    spec = StateSpec.function(
        "count BIGINT",
        emit=F.struct(F.col("word"), F.count("*").alias("c"), S.state_exists().alias("exists"),
                      S.batch_time().alias("t"), S.watermark().alias("wm"),
                      S.is_timing_out().alias("timing_out")))
    got = rows(map_groups_with_state(df, "word", spec))
    assert [(r[0], r[1], r[2], r[4], r[5]) for r in got] == \
        [("a", 2, False, None, False), ("b", 1, False, None, False)]
    assert all(r[3] is not None and r[3] >= before - timedelta(seconds=5) for r in got)


# GroupState getCurrentWatermarkMs in a batch query with a watermark: Spark returns -1
# "SPARK-20714: watermark does not fail query when timeout = NoTimeout / ProcessingTimeTimeout"
@pytest.mark.parametrize("timers", [False, True])
def test_spark_20714_watermark_with_processing_time_or_no_timeout(spark, tmp_path, timers):
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    write_json(src, 0, [{"key": "a", "time": 1}])
    df = spark.readStream.schema("key STRING, time BIGINT").json(src) \
        .selectExpr("key", "timestamp_seconds(time) as timestamp") \
        .withWatermark("timestamp", "10 second")
    c = F.coalesce(S.state("count"), F.lit(0)) + F.count("*")
    spec = StateSpec.function(
        "count BIGINT",
        update=F.when(~S.is_timing_out(), F.struct(c.alias("count"))),
        remove=S.is_timing_out(),
        emit=F.struct(F.col("key"), F.when(S.is_timing_out(), F.lit("-1"))
                      .otherwise(S.new_state("count").cast("string")).alias("n")),
        timeout_at=(F.when(~S.is_timing_out(), S.batch_time() + F.expr("INTERVAL 10 SECONDS"))
                    if timers else None))
    run_available_now(map_groups_with_state(df, "key", spec), out, ck)
    assert sorted(tuple(r) for r in spark.read.schema("key STRING, n STRING").json(out)
                  .collect()) == [("a", "1")]


# "flatMapGroupsWithState - streaming + func returns iterator that updates state lazily":
# per value (map_with_state)
def test_state_updated_per_value(spark, tmp_path):
    stream = Stream(str(tmp_path))
    c = F.coalesce(S.state("count"), F.lit(0)) + 1
    spec = StateSpec.function(
        "count BIGINT", update=F.struct(c.alias("count")), remove=c == 3,
        emit=F.when(c != 3, F.struct(F.col("word"), c.cast("string").alias("n"))))
    answers, _ = stream.run_each_batch(spark, [["a", "a", "b"], ["a", "b"], ["a", "c"]],
                                       lambda source: map_with_state(source, "word", spec))
    assert answers == [[("a", "1"), ("a", "2"), ("b", "1")], [("b", "2")],
                       [("a", "1"), ("c", "1")]]


# "flatMapGroupsWithState - initial state - case class key": a two-field key
def test_initial_state_struct_key(spark, tmp_path):
    initial = spark.createDataFrame(
        [("keyInStateAndData", "1", 1), ("keyOnlyInState", "1", 1), ("keyNoUpdate", "2", 2)],
        "name STRING, id STRING, count BIGINT")
    c = F.coalesce(S.state("count"), F.lit(0)) + F.count("*")
    spec = StateSpec.function(
        "count BIGINT",
        update=F.when(~F.col("name").contains("NoUpdate"), F.struct(c.alias("count"))),
        emit=F.struct(F.col("name"), F.col("id"), F.collect_list("name").alias("vals"),
                      c.cast("string").alias("n"))).initial_state(initial)
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    write_json(src, 0, [{"name": "keyInStateAndData", "id": "1"},
                        {"name": "keyOnlyInData", "id": "1"}])

    def run():
        df = spark.readStream.schema("name STRING, id STRING").option("maxFilesPerTrigger", 1) \
            .json(src)
        return run_available_now(map_groups_with_state(df, ["name", "id"], spec), out, ck)

    q = run()
    schema = "name STRING, id STRING, vals ARRAY<STRING>, n STRING"
    got = sorted(tuple((r[0], r[1], tuple(r[2]), r[3]))
                 for r in spark.read.schema(schema).json(out).collect())
    assert got == sorted([("keyInStateAndData", "1", ("keyInStateAndData",), "2"),
                          ("keyOnlyInState", "1", (), "1"), ("keyNoUpdate", "2", (), "2"),
                          ("keyOnlyInData", "1", ("keyOnlyInData",), "1")])
    assert (op(q.lastProgress).numRowsTotal, op(q.lastProgress).numRowsUpdated) == (4, 3)
    write_json(src, 1, [{"name": "keyOnlyInData", "id": "1"}])
    q = run()
    got2 = sorted(tuple((r[0], r[1], tuple(r[2]), r[3]))
                  for r in spark.read.schema(schema).json(out).collect())
    assert [r for r in got2 if r not in got] == [("keyOnlyInData", "1", ("keyOnlyInData",), "2")]
    assert (op(q.lastProgress).numRowsTotal, op(q.lastProgress).numRowsUpdated) == (4, 1)


def initial_all_cases_func(timeout=None):
    """flatMapGroupsWithStateFunc: timers by key name (EventTime: 0 + 1 hour; ProcessingTime:
    1 hour), count = state + values, updated unless the key says NoUpdate."""
    c = F.coalesce(S.state("count"), F.lit(0)) + F.count("*")
    timer = None
    if timeout == "event_time":
        timer = F.when(F.col("word").contains("EventTime"),
                       F.timestamp_seconds(F.lit(0)) + F.expr("INTERVAL 1 HOUR"))
    elif timeout == "processing_time":
        timer = F.when(F.col("word").contains("ProcessingTime"),
                       S.batch_time() + F.expr("INTERVAL 1 HOUR"))
    spec = StateSpec.function(
        "count BIGINT",
        update=F.when(~F.col("word").contains("NoUpdate"), F.struct(c.alias("count"))),
        emit=F.struct(F.col("word"), F.collect_list("word").alias("vals"),
                      c.cast("string").alias("n"),
                      S.is_timing_out().alias("timing_out")),
        timeout_at=timer)
    return spec.timeout_domain(timeout) if timeout else spec


# "flatMapGroupsWithState - initial state - initial state has flatMapGroupsWithState"
def test_initial_state_made_by_a_group_function(spark, tmp_path):
    seed = spark.createDataFrame([("keyInStateAndData", 1)], "word STRING, c BIGINT")
    initial = map_groups_with_state(seed, "word", StateSpec.function(
        "flag BOOLEAN", emit=F.struct(F.col("word"), F.first("c").alias("count"))))
    stream = Stream(str(tmp_path))
    stream.add("keyInStateAndData")
    spec = initial_all_cases_func().initial_state(initial)
    stream.run_available_now(map_groups_with_state(stream.read(spark), "word", spec))
    got = [(r[0], tuple(r[1]), r[2]) for r in
           spark.read.schema("word STRING, vals ARRAY<STRING>, n STRING").json(stream.output)
           .collect()]
    assert got == [("keyInStateAndData", ("keyInStateAndData",), "2")]


# "mapGroupsWithState - initial state - null key"
def test_initial_state_null_key(spark, tmp_path):
    initial = spark.createDataFrame([("key", 5), (None, 2)], "word STRING, count BIGINT")
    c = F.coalesce(S.state("count"), F.lit(0)) + F.count("*")
    spec = StateSpec.function(
        "count BIGINT", update=F.struct(c.alias("count")),
        emit=F.struct(F.col("word"), S.new_state("count").cast("string").alias("n"))
    ).initial_state(initial)
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    write_json(src, 0, [{"word": "key"}, {"word": None}])
    df = spark.readStream.schema("word STRING").json(src)
    q = run_available_now(map_groups_with_state(df, "word", spec), out, ck)
    got = [tuple(r) for r in spark.read.schema("word STRING, n STRING").json(out).collect()]
    assert sorted(got, key=repr) == sorted([("key", "6"), (None, "3")], key=repr)
    assert (op(q.lastProgress).numRowsTotal, op(q.lastProgress).numRowsUpdated) == (2, 2)


# null key without initial state, in batch (GroupedIterator groups nulls together)
def test_null_key_in_batch(spark):
    df = spark.createDataFrame([("a",), (None,), (None,)], "word STRING")
    spec = StateSpec.function("count BIGINT", update=F.struct(group_count().alias("count")),
                              emit=F.struct(F.col("word"), F.count("*").alias("c")))
    assert rows(map_groups_with_state(df, "word", spec)) == sorted([("a", 1), (None, 2)],
                                                                   key=repr)


# "SPARK-38320 - flatMapGroupsWithState state with data should not timeout"
def test_spark_38320_key_with_data_does_not_time_out(spark, tmp_path):
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    write_json(src, 0, [{"t": 1}])
    write_json(src, 1, [{"t": 2}])
    df = spark.readStream.schema("t BIGINT").option("maxFilesPerTrigger", 1).json(src) \
        .select(F.timestamp_seconds("t").alias("value"), F.lit(0).alias("k")) \
        .withWatermark("value", "0 seconds")
    spec = StateSpec.function(
        "n INT",
        update=F.when(~S.state_exists(), F.struct(F.lit(0).alias("n"))),
        emit=F.struct(F.col("k"), S.is_timing_out().alias("timed_out")),
        timeout_at=F.when(~S.state_exists(), F.timestamp_millis(F.lit(500))),
    ).timeout_domain("event_time")
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        run_available_now(map_groups_with_state(df, "k", spec), out, ck)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    got = sorted(tuple(r) for r in spark.read.schema("k INT, timed_out BOOLEAN").json(out)
                 .collect())
    assert got == [(0, False), (0, False)]


def event_replay(spark, batches, spec):
    df = spark.createDataFrame(
        [(w, at(e), at(i)) for i, b in enumerate(batches) for w, e in b],
        "word STRING, event TIMESTAMP, bt TIMESTAMP").withWatermark("event", "10 seconds")
    return map_groups_with_state(df, "word", spec, batch_time="bt")


# InputProcessor "should not timeout": a timer equal to the threshold (watermark) does not fire;
# "process new data - ... - no update": a data call that sets no timer clears the prior one
def test_event_time_timer_equal_to_watermark_and_cleared_by_data(spark):
    spec = StateSpec.function(
        "n INT", update=F.when(~S.is_timing_out(), F.struct(F.lit(5).alias("n"))),
        emit=F.struct(F.col("word"), S.is_timing_out().alias("timing_out"),
                      S.timeout_at().alias("before"), S.batch_time().alias("t")),
        # a: timer at 10 s (first call); b: timer at 5 s, cleared by its second call
        timeout_at=F.when(~S.is_timing_out() & (F.col("word") == "a") & ~S.state_exists(),
                          F.lit(at(10)))
        .when(~S.is_timing_out() & (F.col("word") == "b") & ~S.state_exists(), F.lit(at(5))),
    ).timeout_domain("event_time")
    # watermarks: b0 none, b1 20-10 = 10 s (a's timer == wm: not due), b2 10 s, b3 21 s
    out = event_replay(spark, [[("a", 20), ("b", 1)], [("b", 12)], [("c", 21)], [("c", 31)]],
                       spec)
    got = rows(out)
    assert [r for r in got if r[1]] == [("a", True, at(10), at(3))], got
    assert not any(r[0] == "b" and r[1] for r in got)


# SPARK-29438 union with map_groups_with_state (the repo's test uses map_with_state)
def test_union_does_not_shift_group_state_partitions(spark, tmp_path):
    left, right = Stream(str(tmp_path / "left")), Stream(str(tmp_path / "right"))
    spec = StateSpec.function(
        "count BIGINT", update=F.struct(group_count().alias("count")),
        emit=F.struct(F.col("word"), S.new_state("count").cast("string").alias("n")))

    def run(parts):
        plain = left.read(spark).repartition(parts).select("word", F.col("word").alias("n"))
        left.run_available_now(plain.union(map_groups_with_state(right.read(spark), "word",
                                                                 spec)))
        return left.results(spark, "word STRING, n STRING")

    left.add("input1-a")
    right.add("input2-a")
    first = run(2)
    assert first == [("input1-a", "input1-a"), ("input2-a", "1")]
    left.add("input1-a")
    right.add("input2-a", "input2-b")
    new = run(3)
    for r in first:
        new.remove(r)
    assert new == [("input1-a", "input1-a"), ("input2-a", "2"), ("input2-b", "1")]


# FlatMapGroupsWithStateDistributionSuite SPARK-38204 (the answers): a two-column key, input
# repartitioned by one of them, initial state repartitioned by the other
@pytest.mark.parametrize("with_initial", [True, False])
def test_spark_38204_two_column_key_repartitioned(spark, tmp_path, with_initial):
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    write_json(src, 0, [{"key1": "a", "key2": "a", "time": 1}])
    df = spark.readStream.schema("key1 STRING, key2 STRING, time BIGINT").json(src) \
        .selectExpr("key1", "key2", "timestamp_seconds(time) as timestamp") \
        .withWatermark("timestamp", "10 second").repartition("key1")
    c = F.coalesce(S.state("count"), F.lit(0)) + F.count("*")
    spec = StateSpec.function(
        "count BIGINT",
        update=F.when(~S.is_timing_out(), F.struct(c.alias("count"))),
        remove=S.is_timing_out(),
        emit=F.struct(F.col("key1"), F.col("key2"),
                      F.when(S.is_timing_out(), F.lit("-1"))
                      .otherwise(S.new_state("count").cast("string")).alias("cnt")),
        timeout_at=F.when(~S.is_timing_out(), S.batch_time() + F.expr("INTERVAL 10 SECONDS")))
    if with_initial:
        spec = spec.initial_state(spark.createDataFrame(
            [("c", "c", 2)], "key1 STRING, key2 STRING, count BIGINT").repartition("key2"))
    run_available_now(map_groups_with_state(df, ["key1", "key2"], spec), out, ck)
    got = sorted(tuple(r) for r in
                 spark.read.schema("key1 STRING, key2 STRING, cnt STRING").json(out).collect())
    assert got == ([("a", "a", "1"), ("c", "c", "2")] if with_initial else [("a", "a", "1")])


# GroupState "get, exists, update, remove": a state whose fields are all null still exists
def test_state_with_null_fields_exists(spark):
    df = replay_input(spark, [["a"], ["a"]])
    spec = StateSpec.function(
        "n BIGINT", update=F.struct(F.lit(None).cast("bigint").alias("n")),
        emit=F.struct(F.col("word"), S.state_exists().alias("exists"),
                      S.batch_time().alias("t")))
    out = map_groups_with_state(df, "word", spec, batch_time="ts")
    assert [r[1] for r in sorted(out.collect(), key=lambda r: r.t)] == [False, True]
