"""A batch replay with ``until=``: the timeline goes on after the last record, with an empty
batch every ``batch_interval`` (or one batch at ``until``), so sessions close and timers fire
as they would live; the batch at ``until`` moves an event-time watermark on to ``until`` minus
the delay. The same cases through ``mapwithstate.testing``'s replay are in
``test_testing_runner.py``."""
from datetime import datetime, timedelta

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from specs import latest_event_spec
from streams import Stream

pytestmark = pytest.mark.sessions("connect", "classic")

T0 = datetime(2026, 1, 1)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def sessions_spec():
    """Counts a user's clicks; a session that times out emits its count (negated)."""
    timing_out = S.is_timing_out()
    return StateSpec.function(
        "clicks BIGINT",
        update=F.struct((F.coalesce(S.state("clicks"), F.lit(0)) + 1).alias("clicks")),
        emit=F.when(timing_out, F.struct(F.col("user"), (-S.state("clicks")).alias("clicks"),
                                         S.batch_time().alias("bt"))),
    ).timeout("3 seconds").checkpoint_interval(1)


def clicks(spark):
    return spark.createDataFrame([("u1", at(0)), ("u2", at(1)), ("u1", at(1))],
                                 "user STRING, ts TIMESTAMP")


def closed(df):
    return sorted((r.user, r.clicks, r.bt) for r in df.collect() if r is not None and r.user)


def test_without_until_open_sessions_never_close(spark):
    out = map_with_state(clicks(spark), key="user", spec=sessions_spec(), batch_time="ts",
                         batch_interval="1 second")
    assert closed(out) == []


def test_sessions_close_on_the_empty_batches_up_to_until(spark):
    out = map_with_state(clicks(spark), key="user", spec=sessions_spec(), batch_time="ts",
                         batch_interval="1 second", until=at(10))
    # Both last clicked at 1 s: idle past 3 s (strictly) from the batch at 5 s on.
    assert closed(out) == [("u1", -2, at(5)), ("u2", -1, at(5))]
    snapshots = map_with_state(clicks(spark), key="user", spec=sessions_spec(),
                               batch_time="ts", batch_interval="1 second", until=at(10),
                               output="snapshots").collect()
    batches = sorted({r.batch_time for r in snapshots})
    assert batches == [at(0), at(1), at(2), at(3), at(4)]  # no state left from 5 s on
    assert sorted((r.user, r.clicks) for r in snapshots if r.batch_time == at(4)) == \
        [("u1", 2), ("u2", 1)]


def test_without_batch_interval_one_batch_at_until_closes_them(spark):
    # A string is cast to TIMESTAMP by Spark (in the session's time zone, here the client's).
    out = map_with_state(clicks(spark), key="user", spec=sessions_spec(), batch_time="ts",
                         until="2026-01-01 00:00:10")
    assert closed(out) == [("u1", -2, at(10)), ("u2", -1, at(10))]


def test_until_at_the_last_batch_changes_nothing(spark):
    out = map_with_state(clicks(spark), key="user", spec=sessions_spec(), batch_time="ts",
                         until=at(1), output="snapshots")
    assert sorted({r.batch_time for r in out.collect()}) == [at(0), at(1)]


def test_a_replay_without_records_runs_its_initial_state_to_until(spark):
    initial = spark.createDataFrame([("u9", 4)], "user STRING, clicks BIGINT")
    spec = sessions_spec().initial_state(initial)
    empty = clicks(spark).where("false")
    out = map_with_state(empty, key="user", spec=spec, batch_time="ts", until=at(10))
    assert closed(out) == []  # loaded at 10 s, its only batch: not idle yet
    snapshots = map_with_state(empty, key="user", spec=spec, batch_time="ts", until=at(10),
                               output="snapshots")
    assert [(r.batch_time, r.user, r.clicks) for r in snapshots.collect()] == [(at(10), "u9", 4)]


def group_timer_spec():
    """Sums a key's values per batch; a timer 4 s after its last batch emits the total."""
    timing_out = S.is_timing_out()
    total = F.coalesce(S.state("total"), F.lit(0)) + F.coalesce(F.sum("v"), F.lit(0))
    return StateSpec.function(
        "total BIGINT",
        update=F.when(~timing_out, F.struct(total.alias("total"))),
        remove=timing_out,
        emit=F.when(timing_out, F.struct(F.col("k"), S.state("total").alias("total"),
                                         S.timeout_at().alias("timer"),
                                         S.batch_time().alias("bt"))),
        timeout_at=F.when(~timing_out, S.batch_time() + F.expr("INTERVAL 4 SECONDS")))


def test_a_group_functions_timers_fire_on_the_empty_batches(spark):
    df = spark.createDataFrame([("a", 1, at(0)), ("a", 2, at(0)), ("b", 5, at(2))],
                               "k STRING, v BIGINT, t TIMESTAMP")
    out = map_groups_with_state(df, key="k", spec=group_timer_spec(), batch_time="t",
                                batch_interval="2 seconds", until=at(9))
    rows = sorted((r.k, r.total, r.timer, r.bt) for r in out.collect() if r.k)
    # A processing-time timer fires in the first batch strictly after it: a's (4 s) at 6 s,
    # b's (6 s) at 8 s; the batches run every 2 s, then at until (9 s).
    assert rows == [("a", 3, at(4), at(6)), ("b", 5, at(6), at(8))]
    snapshots = map_groups_with_state(df, key="k", spec=group_timer_spec(), batch_time="t",
                                      batch_interval="2 seconds", until=at(9),
                                      output="snapshots")
    times = sorted({r.batch_time for r in snapshots.collect()})
    assert times == [at(0), at(2), at(4), at(6)]


def timed_out(df):
    """(word, watermark, batch time) of the keys latest_event_spec times out."""
    return sorted((r.word, r.wm, r.bt) for r in df.collect() if r.n == -1)


def test_the_batch_at_until_moves_the_watermark_to_until_minus_the_delay(spark):
    df = spark.createDataFrame([("a", at(1), at(1)), ("b", at(20), at(2))],
                               "word STRING, event TIMESTAMP, bt TIMESTAMP") \
        .withWatermark("event", "10 seconds")
    out = map_with_state(df, key="word", value="event", spec=latest_event_spec(),
                         batch_time="bt", batch_interval="1 second", until=at(40))
        # The records leave the watermark at 20 - 10 = 10 s from the batch at 3 s on, past a's
    # timer (6 s) in that batch; the empty batches keep it there, as a live stream without
    # records would; the batch at until has 40 - 10 = 30 s, past b's timer (25 s).
    assert timed_out(out) == [("a", at(10), at(3)), ("b", at(30), at(40))]


def test_the_watermark_at_until_never_moves_back(spark):
    df = spark.createDataFrame([("a", at(50), at(1)), ("b", at(20), at(1))],
                               "word STRING, event TIMESTAMP, bt TIMESTAMP") \
        .withWatermark("event", "10 seconds")
    out = map_with_state(df, key="word", value="event", spec=latest_event_spec(),
                         batch_time="bt", until=at(5))
    # The batch at until keeps the records' 50 - 10 = 40 s (until - delay is -5 s): past b's
    # timer (25 s), not a's (55 s).
    assert timed_out(out) == [("b", at(40), at(5))]


# --- refusals --------------------------------------------------------------------------------

def condition_of(build):
    with pytest.raises(PySparkException) as info:
        build().collect()
    return info.value.getCondition(), str(info.value)


def test_an_until_before_the_last_batch_time_is_refused(spark):
    condition, message = condition_of(lambda: map_with_state(
        clicks(spark), key="user", spec=sessions_spec(), batch_time="ts",
        batch_interval="1 second", until=at(0.5)))
    assert condition == "MAPWITHSTATE_UNTIL_BEFORE_LAST_BATCH", message
    assert "until (2026-01-01T00:00:00.500Z) is before the replay's last batch time " \
           "(2026-01-01T00:00:01Z, aligned to batch_interval)" in message


def test_until_without_batch_time_is_refused(spark):
    condition, message = condition_of(lambda: map_with_state(
        clicks(spark), key="user", spec=sessions_spec(), until=at(5)))
    assert condition == "MAPWITHSTATE_CONFLICTING_ARGUMENTS", message
    assert "until needs batch_time" in message


def test_an_until_that_is_not_a_timestamp_is_refused(spark):
    condition, message = condition_of(lambda: map_with_state(
        clicks(spark), key="user", spec=sessions_spec(), batch_time="ts", until="soon"))
    assert condition == "MAPWITHSTATE_INVALID_ARGUMENT", message
    assert "until: 'soon' is not a timestamp" in message
    with pytest.raises(TypeError, match="until must be a datetime or a string"):
        map_with_state(clicks(spark), key="user", spec=sessions_spec(), batch_time="ts",
                       until=10)


def test_until_on_a_stream_is_refused(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a")
    words = spark.readStream.schema("word STRING").json(stream.input)
    spec = StateSpec.function(
        "n BIGINT", update=F.struct(F.lit(1).cast("bigint").alias("n")),
        emit=F.struct(F.col("word")))

    def start():
        query = map_with_state(words, key="word", spec=spec, until=at(5)) \
            .writeStream.format("memory").queryName("until_stream") \
            .option("checkpointLocation", stream.checkpoint).start()
        query.stop()

    with pytest.raises(PySparkException) as info:
        start()
    assert info.value.getCondition() == "MAPWITHSTATE_CONFLICTING_ARGUMENTS", str(info.value)
    assert "until is for batch replays" in str(info.value)
