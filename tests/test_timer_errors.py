"""Bad timer arguments get a clear error naming the argument, and the server keeps serving.

Timers Spark's GroupStateImpl refuses fail the query as they fail Spark's (an
IllegalArgumentException from setTimeoutTimestamp / setTimeoutDuration), with Spark's words and
the key, the timer and what it was compared with."""
import re
from datetime import datetime, timedelta

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from errors import assert_still_serving, error_of, words
from streams import Stream


def spec(**kwargs):
    return StateSpec.function(
        "n BIGINT", update=F.struct(F.lit(1).cast("bigint").alias("n")),
        emit=F.struct(F.col("word")), **kwargs)


def test_timeout_at_must_be_a_timestamp(spark):
    message = error_of(map_with_state(words(spark), key="word", spec=spec(timeout_at=F.lit(5))))
    assert "timeout_at must be a TIMESTAMP" in message and "INT" in message
    assert_still_serving(spark)


def test_timeout_at_with_timeout_is_refused(spark):
    both = spec(timeout_at=S.batch_time()).timeout("10 seconds")
    message = error_of(map_with_state(words(spark), key="word", spec=both))
    assert "timeout and timeout_at cannot be used together" in message
    assert_still_serving(spark)


def test_event_time_without_a_watermark_is_refused_over_a_stream(spark, tmp_path):
    event = spec(timeout_at=S.batch_time()).timeout_domain("event_time")
    stream = spark.readStream.schema("word STRING").json(str(tmp_path))
    with pytest.raises(PySparkException) as info:
        map_with_state(stream, key="word", spec=event).writeStream.format("noop") \
            .option("checkpointLocation", str(tmp_path / "ck")).start().stop()
    message = str(info.value)
    assert "timeout_domain('event_time')" in message and "withWatermark" in message
    assert_still_serving(spark)


def test_unknown_timeout_domain_is_refused(spark):
    bad = spec(timeout_at=S.batch_time()).timeout_domain("wall_clock")
    message = error_of(map_with_state(words(spark), key="word", spec=bad))
    assert "timeout_domain" in message and "wall_clock" in message and "event_time" in message
    assert_still_serving(spark)


def test_initial_state_timer_column_needs_timeout_at(spark):
    init = spark.createDataFrame([("a", 1, None)], "word STRING, n BIGINT, due TIMESTAMP")
    bad = spec().initial_state(init, timeout_at="due")
    message = error_of(map_with_state(words(spark), key="word", spec=bad))
    assert "timeout_at" in message
    assert_still_serving(spark)


# Timers already due when set: FlatMapGroupsWithStateSuite's InputProcessor case "EventTimeTimeout
# - timeout timestamp updated to before watermark" and GroupStateSuite's "illegal params to
# setTimeout", for both operators.

T0 = datetime(2026, 1, 1)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def timer_spec(timeout_at, domain="processing_time"):
    """Keeps a state and sets `timeout_at` on a key's calls for data (none on timing out)."""
    return StateSpec.function(
        "n INT", update=F.struct(F.lit(5).alias("n")),
        emit=F.struct(F.col("word"), S.is_timing_out().alias("timing_out")),
        timeout_at=F.when(~S.is_timing_out(), timeout_at),
    ).timeout_domain(domain)


def event_replay(spark, operator, batches, spec):
    """Batch i at i s; each record's event time, with a 10 s watermark delay."""
    df = spark.createDataFrame(
        [(w, at(e), at(i)) for i, b in enumerate(batches) for w, e in b],
        "word STRING, event TIMESTAMP, bt TIMESTAMP").withWatermark("event", "10 seconds")
    if operator is map_with_state:
        return map_with_state(df, "word", spec, value="event", batch_time="bt")
    return map_groups_with_state(df, "word", spec, batch_time="bt")


operators = pytest.mark.parametrize("operator", [map_with_state, map_groups_with_state],
                                    ids=["map_with_state", "map_groups_with_state"])


@operators
def test_event_time_timer_before_the_watermark_fails_the_query(spark, operator):
    # One millisecond before the batch's watermark. The first batch has none (nothing is
    # checked but positivity: the timer is null there); in the second it is 15 - 10 = 5 s.
    spec = timer_spec(F.when(S.watermark().isNotNull(),
                             F.timestamp_micros(F.unix_micros(S.watermark()) - 1000)), "event_time")
    message = error_of(event_replay(spark, operator, [[("x", 15)], [("a", 16)]], spec))
    # Spark's words, in milliseconds as Spark prints them
    spark_words = re.search(r"Timeout timestamp \((\d+)\) cannot be earlier than the current "
                            r"watermark \((\d+)\)", message)
    assert spark_words, message
    assert int(spark_words[2]) - int(spark_words[1]) == 1
    # ours: the key, the timer, the watermark, the batch, and what to do
    assert "timeout_at of the key (a) is " in message
    assert re.search(r"\.999Z \(set by its call in the batch at [-\dT:.]+Z\), earlier than the "
                     r"batch's watermark [-\dT:]+Z: it would already be due", message), message
    assert "Set timeout_at to watermark() or later, or to null to clear the timer" in message
    assert_still_serving(spark)


def test_event_time_timer_at_the_watermark_is_allowed(spark):
    # Equal is not earlier: Spark takes it, and it fires once the watermark passes it.
    spec = timer_spec(S.watermark(), "event_time")
    out = event_replay(spark, map_groups_with_state,
                       [[("x", 15)], [("a", 16)], [("x", 20)], [("y", 30)]], spec)
    # watermarks: none, 5 s (a's timer: not due), 6 s (x's timer; a times out), 10 s (x does)
    assert sorted(tuple(r) for r in out.collect()) == [
        ("a", False), ("a", True), ("x", False), ("x", False), ("x", True), ("y", False)]


@operators
@pytest.mark.parametrize("interval", ["0 SECONDS", "-2 SECONDS"])
def test_processing_time_timer_not_after_the_batch_time_fails_the_query(spark, operator,
                                                                        interval):
    # setTimeoutDuration(0) and a negative duration; each batch of the replay at its own time
    spec = timer_spec(S.batch_time() + F.expr(f"INTERVAL {interval}"))
    df = spark.createDataFrame([("a", at(1)), ("b", at(2))], "word STRING, ts TIMESTAMP")
    message = error_of(operator(df, "word", spec, batch_time="ts"))
    assert "as Spark says: Timeout duration must be positive" in message
    assert re.search(r"timeout_at of the key \([ab]\) is [-\dT:]+Z \(set by its call in the batch "
                     r"at [-\dT:]+Z\), not after that batch time", message), message
    assert "Set timeout_at to batch_time() plus a positive interval, or to null" in message
    assert_still_serving(spark)


@operators
def test_event_time_timer_before_the_epoch_fails_the_query(spark, operator):
    # setTimeoutTimestamp(-10000): refused with or without a watermark (here, the first batch's
    # none)
    spec = timer_spec(F.timestamp_millis(F.lit(-10000)), "event_time")
    message = error_of(event_replay(spark, operator, [[("a", 15)], [("b", 16)]], spec))
    assert "as Spark says: Timeout timestamp must be positive" in message
    # each key's partition fails on its own first call: whichever comes first
    assert re.search(r"timeout_at of the key \([ab]\) is 1969-12-31T23:59:50Z", message), message
    assert "not after 1970-01-01T00:00:00Z" in message
    assert_still_serving(spark)


def test_a_stream_with_a_timer_already_due_fails_with_the_key(spark, tmp_path):
    # The first micro-batch: the timer is its batch time, not after it.
    stream = Stream(str(tmp_path))
    stream.add("a")
    result = map_with_state(stream.read(spark), "word", timer_spec(S.batch_time()))
    with pytest.raises(PySparkException) as info:
        stream.run_available_now(result)
    message = str(info.value)
    assert "timeout_at of the key (a)" in message and "Timeout duration must be positive" in message
    assert_still_serving(spark)
