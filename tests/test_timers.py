"""Timers (`timeout_at`): FlatMapGroupsWithStateSuite's timeout cases through the public API,
as batch replays (batch_time) and as streams.

The state function is called per record (mapWithState's model), so where Spark's group
function sees a group's values at once, these functions fold them one record at a time.
"""
import json
import os
import time
from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state, read_state, read_state_changes
from mapwithstate import functions as S
from specs import max_event_time

pytestmark = [pytest.mark.sessions("connect", "classic"), pytest.mark.backends("rocksdb")]

T0 = datetime(2026, 1, 1)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def rows_of(df):
    return sorted((tuple(r) for r in df.collect()), key=repr)


def count_with_duration(seconds=10, remove_on_timeout=True):
    """Spark's processing-time test function: counts a key's records, re-arms its timer to
    `seconds` after the batch on every record; on timeout emits -1 and removes the state
    (or keeps it, clearing the timer)."""
    count = F.coalesce(S.state("n"), F.lit(0)) + 1
    return StateSpec.function(
        "n BIGINT",
        update=F.when(~S.is_timing_out(), F.struct(count.alias("n"))),
        remove=S.is_timing_out() if remove_on_timeout else None,
        emit=F.struct(F.col("word"),
                      F.when(S.is_timing_out(), F.lit(-1)).otherwise(S.new_state("n")).alias("n"),
                      S.batch_time().alias("t")),
        timeout_at=F.when(~S.is_timing_out(),
                          S.batch_time() + F.expr(f"INTERVAL {seconds} SECONDS")),
    )


def replay(spark, records, spec, **kwargs):
    df = spark.createDataFrame([(w, at(t)) for w, t in records], "word STRING, ts TIMESTAMP")
    return map_with_state(df, key="word", spec=spec, batch_time="ts", **kwargs)


def test_processing_time_timeouts_with_durations_set_per_key(spark):
    # Spark's "streaming with processing time timeout": batches at 1 s, 2 s, 12 s, 23 s.
    result = replay(spark, [("a", 1), ("b", 2), ("b", 12), ("c", 23)], count_with_duration())
    assert rows_of(result) == sorted([
        ("a", 1, at(1)), ("b", 1, at(2)),
        ("b", 2, at(12)), ("a", -1, at(12)),   # a's timer (11 s) passed; b re-armed to 22 s
        ("c", 1, at(23)), ("b", -1, at(23)),
    ], key=repr)


def test_timer_strictly_passed_and_data_beats_the_timer(spark):
    # a's timer is 10 s after 1 s = 11 s: not due at 11 s (strictly after), due at 12 s.
    result = replay(spark, [("a", 1), ("x", 11), ("x", 12)], count_with_duration())
    assert ("a", -1, at(12)) in rows_of(result)
    assert not any(r[0] == "a" and r[2] == at(11) for r in rows_of(result))
    # A key with data in the batch where its timer is due gets its data call only.
    result = replay(spark, [("a", 1), ("a", 12)], count_with_duration())
    assert rows_of(result) == [("a", 1, at(1)), ("a", 2, at(12))]


def test_timed_out_state_is_kept_unless_removed(spark):
    spec = count_with_duration(remove_on_timeout=False)
    snapshots = replay(spark, [("a", 1), ("b", 12), ("b", 30)], spec, output="snapshots")
    by_time = {}
    for r in snapshots.collect():
        by_time.setdefault(r["batch_time"], set()).add((r["word"], r["n"]))
    assert by_time[at(12)] == {("a", 1), ("b", 1)}       # a timed out at 12 s, kept
    assert by_time[at(30)] == {("a", 1), ("b", 2)}       # its timer was cleared: no more calls
    emitted = rows_of(replay(spark, [("a", 1), ("b", 12), ("b", 30)], spec))
    assert [r for r in emitted if r[0] == "a"] == [("a", -1, at(12)), ("a", 1, at(1))]


def test_timers_rearmed_cleared_and_seen_by_timeout_at(spark):
    # "stop" clears the key's timer; other records re-arm it 5 s after their batch. The timing
    # out call re-arms it too (1 s later), so the key keeps timing out until data clears it.
    df = spark.createDataFrame(
        [("k", "go", at(0)), ("k", "go", at(2)), ("x", "go", at(8)), ("x", "go", at(9)),
         ("k", "stop", at(10)), ("x", "go", at(20))],
        "word STRING, cmd STRING, ts TIMESTAMP")
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.when(F.col("word") == "k", F.struct(
            F.col("cmd"), S.is_timing_out().alias("timing_out"), S.timeout_at().alias("before"),
            S.batch_time().alias("t"))),
        timeout_at=F.when(S.is_timing_out(), S.batch_time() + F.expr("INTERVAL 1 SECOND"))
        .when(F.col("cmd") == "go", S.batch_time() + F.expr("INTERVAL 5 SECONDS")),
    )
    result = rows_of(map_with_state(df, key="word", spec=spec, batch_time="ts"))
    assert result == sorted([
        ("go", False, None, at(0)),
        ("go", False, at(5), at(2)),          # re-armed to 7 s
        (None, True, at(7), at(8)),           # 7 < 8: fires; re-armed to 9 s (not due at 9 s)
        ("stop", False, at(9), at(10)),       # due at 10 s, but data: its call only; cleared
    ], key=repr)


def test_is_timing_out_only_on_timer_calls(spark):
    spec = count_with_duration()
    result = replay(spark, [("a", 1), ("a", 3), ("b", 20)], spec)
    calls = rows_of(result)
    assert [r for r in calls if r[1] == -1] == [("a", -1, at(20))]


def test_initial_state_with_timers(spark):
    init = spark.createDataFrame([("z", 5, at(1.5)), ("y", 7, None)],
                                 "word STRING, n BIGINT, due TIMESTAMP")
    spec = count_with_duration().initial_state(init, timeout_at="due")
    result = rows_of(replay(spark, [("a", 1), ("a", 2), ("a", 3)], spec))
    assert ("z", -1, at(2)) in result
    assert not any(r[0] == "y" for r in result)


def event_spec():
    """Spark's "event time timeout + watermark" function, per record; emits the watermark."""
    return max_event_time(F.col("event"), S.watermark().alias("wm"), T0)


def test_event_time_timeouts_driven_by_the_watermark_and_late_rows_dropped(spark):
    batches = [[("a", 11), ("a", 13), ("a", 15)], [("a", 4)], [("a", 10)], [("a", 21)],
               [("b", 31)], [("c", 40)], [("d", 41)]]
    df = spark.createDataFrame(
        [(w, at(e), at(i)) for i, b in enumerate(batches) for w, e in b],
        "word STRING, event TIMESTAMP, bt TIMESTAMP").withWatermark("event", "10 seconds")
    result = rows_of(map_with_state(df, key="word", value="event", spec=event_spec(),
                                    batch_time="bt"))
    assert result == sorted([
        ("a", 11, None), ("a", 13, None), ("a", 15, None),   # no watermark yet
        # ("a", 4) is late: 4 s <= watermark 5 s; dropped before the function
        ("a", 15, at(5)),                                    # 10 s is not late
        ("a", 21, at(5)),                                    # a's timer now 26 s
        ("b", 31, at(11)),
        ("c", 40, at(21)),                                   # 26 s not passed by 21 s
        ("d", 41, at(30)), ("a", -1, at(30)),                # 30 s > 26 s: a times out
    ], key=repr)


def write_json(directory, name, rows):
    path = os.path.join(directory, name)
    with open(path + ".tmp", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    os.rename(path + ".tmp", path)
    # The file source takes files in modification-time order: make it the order written.
    stamp = time.time() + len(os.listdir(directory))
    os.utime(path, (stamp, stamp))


def event_stream(spark, directory):
    source = spark.readStream.schema("word STRING, e BIGINT").option("maxFilesPerTrigger", 1) \
        .json(directory)
    df = source.select("word", (F.lit(T0).cast("long") + F.col("e")).cast("timestamp")
                       .alias("event")).withWatermark("event", "10 seconds")
    return map_with_state(df, key="word", value="event", spec=event_spec())


def run_available_now(result, out, checkpoint):
    query = result.writeStream.format("json").option("path", out) \
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    return query


def test_event_time_timers_in_a_stream_across_a_restart(spark, tmp_path):
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    os.makedirs(src)
    write_json(src, "0.json", [{"word": "a", "e": 11}, {"word": "a", "e": 15}])
    write_json(src, "1.json", [{"word": "a", "e": 4}, {"word": "b", "e": 18}])
    query = run_available_now(event_stream(spark, src), out, ck)
    schema = "word STRING, n BIGINT, wm TIMESTAMP"
    first = sorted(tuple(r)[:2] for r in spark.read.schema(schema).json(out).collect())
    # a@4 is late (watermark 5 s); a's timer (20 s) is not passed by 8 s.
    assert first == [("a", 11), ("a", 15), ("b", 18)]
    # Counted where Spark counts them, in the batch that dropped a@4 (then a no-data batch).
    assert [o.numRowsDroppedByWatermark for p in query.recentProgress
            for o in p.stateOperators] == [0, 1, 0]
    # Restart: the timers come back from the checkpoint; b@40 moves the watermark to 30 s,
    # past a's 20 s and b's 23 s, and a no-data batch fires both.
    write_json(src, "2.json", [{"word": "c", "e": 40}])
    run_available_now(event_stream(spark, src), out, ck)
    rows = sorted(tuple(r)[:2] for r in spark.read.schema(schema).json(out).collect())
    assert rows == sorted(first + [("c", 40), ("a", -1), ("b", -1)])


def test_processing_time_timers_in_a_stream_fire_in_no_data_batches(spark, tmp_path):
    src, ck = str(tmp_path / "in"), str(tmp_path / "ck")
    os.makedirs(src)
    write_json(src, "0.json", [{"word": "a"}, {"word": "b"}])
    spec = count_with_duration(seconds=1)
    df = spark.readStream.schema("word STRING").json(src)
    name = "mws_timers_pt"
    query = map_with_state(df, "word", spec).writeStream.format("memory").queryName(name) \
        .option("checkpointLocation", ck).trigger(processingTime="300 milliseconds").start()
    try:
        deadline = time.monotonic() + 120
        rows = []
        while time.monotonic() < deadline:
            rows = spark.sql(f"select word, n from {name}").collect()
            if sum(1 for r in rows if r.n == -1) == 2:
                break
            time.sleep(0.3)
    finally:
        query.stop()
    assert sorted(tuple(r) for r in rows) == [("a", -1), ("a", 1), ("b", -1), ("b", 1)]


# A key without state can hold a timer (Spark's FlatMapGroupsWithStateExec keeps the row of a
# key whose function removed the state but set a timeout, or set one without ever a state).

def test_timeout_removes_the_state_and_sets_a_new_timer(spark):
    # Spark's suite: on timeout the function removes the state and sets a new timeout; the next
    # timeout call sees hasTimedOut true and exists false.
    spec = StateSpec.function(
        "n BIGINT",
        update=F.when(~S.is_timing_out(), F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1)
                                                   .alias("n"))),
        remove=S.is_timing_out(),
        emit=F.struct(F.col("word"), S.is_timing_out().alias("timing_out"),
                      S.state_exists().alias("exists"), S.state("n").alias("before"),
                      S.new_state("n").alias("after"), S.batch_time().alias("t")),
        timeout_at=F.when(~S.is_timing_out(), S.batch_time() + F.expr("INTERVAL 10 SECONDS"))
        .when(S.state_exists(), S.batch_time() + F.expr("INTERVAL 5 SECONDS")),
    )
    records = [("a", 1), ("x", 12), ("x", 18), ("y", 40)]
    assert rows_of(replay(spark, records, spec)) == sorted([
        ("a", False, False, None, 1, at(1)),
        ("x", False, False, None, 1, at(12)),
        ("a", True, True, 1, None, at(12)),      # 11 s passed: removed, re-armed to 17 s
        ("x", False, True, 1, 2, at(18)),
        ("a", True, False, None, None, at(18)),  # its timer fires without a state; no new one
        ("y", False, False, None, 1, at(40)),
        ("x", True, True, 2, None, at(40)),      # x removed, re-armed to 45 s (never reached)
    ], key=repr)
    # The key holding only a timer has no state to show.
    snapshots = replay(spark, records, spec, output="snapshots")
    by_time = {}
    for r in snapshots.collect():
        by_time.setdefault(r["batch_time"], set()).add((r["word"], r["n"]))
    assert by_time == {at(1): {("a", 1)}, at(12): {("x", 1)}, at(18): {("x", 2)},
                       at(40): {("y", 1)}}


def timer_without_state():
    """A function that never makes a state, only sets a timer 5 s after each data call."""
    return StateSpec.function(
        "n BIGINT",
        emit=F.struct(F.col("word"), S.is_timing_out().alias("timing_out"),
                      S.state_exists().alias("exists"), S.timeout_at().alias("timer")),
        timeout_at=F.when(~S.is_timing_out(), S.batch_time() + F.expr("INTERVAL 5 SECONDS")),
    )


def test_a_timer_set_without_ever_a_state(spark):
    result = rows_of(replay(spark, [("a", 1), ("a", 3), ("x", 10)], timer_without_state()))
    assert result == sorted([
        ("a", False, False, None),
        ("a", False, False, at(6)),
        ("x", False, False, None),
        ("a", True, False, at(8)),               # re-armed to 8 s at 3 s; fires at 10 s
    ], key=repr)
    snapshots = replay(spark, [("a", 1), ("x", 10)], timer_without_state(), output="snapshots")
    assert snapshots.count() == 0


def test_timers_of_keys_without_state_in_a_stream_across_a_restart(spark, tmp_path):
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    os.makedirs(src)

    def stream():
        source = spark.readStream.schema("word STRING, e BIGINT") \
            .option("maxFilesPerTrigger", 1).json(src)
        df = source.select("word", (F.lit(T0).cast("long") + F.col("e")).cast("timestamp")
                           .alias("event")).withWatermark("event", "10 seconds")
        spec = StateSpec.function(
            "n BIGINT",
            emit=F.struct(F.col("word"), F.when(S.is_timing_out(), F.lit(-1))
                          .otherwise(F.unix_seconds("event") - F.unix_seconds(F.lit(T0)))
                          .alias("n"), S.state_exists().alias("exists")),
            timeout_at=F.when(~S.is_timing_out(), F.col("event") + F.expr("INTERVAL 5 SECONDS")),
        ).timeout_domain("event_time")
        return map_with_state(df, key="word", value="event", spec=spec)

    write_json(src, "0.json", [{"word": "a", "e": 11}, {"word": "b", "e": 14}])
    query = run_available_now(stream(), out, ck)
    # Both keys are held for their timers (16 s, 19 s), as Spark's store holds their rows.
    assert query.lastProgress["stateOperators"][0]["numRowsTotal"] == 2
    if spark.conf.get("spark.mapwithstate.stateStore.backend", "memory") == "memory" and \
            type(spark).__module__.startswith("pyspark.sql.connect"):
        # No state to show; in the change feed, a key without a state after its batch is a
        # delete (the reader cannot tell whether it had one before).
        assert read_state(spark, ck).count() == 0
        changes = read_state_changes(spark, ck, start_batch=0).select("change", "word")
        assert sorted(tuple(r) for r in changes.collect()) == [("delete", "a"), ("delete", "b")]
    # Restart: c@40 moves the watermark to 30 s; a no-data batch fires both stateless timers.
    write_json(src, "1.json", [{"word": "c", "e": 40}])
    run_available_now(stream(), out, ck)
    rows = sorted(tuple(r) for r in
                  spark.read.schema("word STRING, n BIGINT, exists BOOLEAN").json(out).collect())
    assert rows == [("a", -1, False), ("a", 11, False), ("b", -1, False), ("b", 14, False),
                    ("c", 40, False)]
