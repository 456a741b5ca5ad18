"""Spark's own suite cases written as Python state functions (issue #41's API), as a user
porting them would write them: FlatMapGroupsWithStateSuite (group functions, both timer
domains, state removal, per-value updates) and the DStream MapWithStateSuite (running counts,
removal, idle timeouts, initial state).

Each case is checked twice: ``mapwithstate.testing`` against the Scala test's expected rows
(batch by batch, as its ``CheckNewAnswer`` steps or its collected outputs and state
snapshots), and the real server against ``mapwithstate.testing`` over the same batches. A
case about a stream runs as one (its micro-batches read back from the offset log, the
runner given the same ones); the others are batch replays.
"""
from datetime import datetime, timedelta

import pytest

import mapwithstate as mws
from mapwithstate import map_groups_with_state, map_with_state
from mapwithstate.testing import Tester, replay
from streams import micro_batches, write_json

EPOCH = datetime(1970, 1, 1)
T0 = datetime(2026, 1, 1)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def emitted_per_batch(results):
    """The runner's emitted rows per batch, each batch's sorted, as (values...) tuples."""
    return [sorted(tuple(r.values()) for r in b.emitted) for b in results]


def all_rows(per_batch):
    return sorted(r for batch in per_batch for r in batch)


def server_rows(df):
    return sorted(tuple(r) for r in df.collect())


def snapshots_per_batch(results):
    """The runner's state after each batch: {batch time: sorted (key, fields...) tuples}."""
    return {b.batch_time: sorted(tuple(r.values())[1:] for r in b.snapshots)
            for b in results if b.snapshots}


def server_snapshots(df):
    out = {}
    for r in df.collect():
        out.setdefault(r["batch_time"], []).append(tuple(r)[1:])
    return {t: sorted(rows) for t, rows in out.items()}


# --- FlatMapGroupsWithStateSuite: "streaming w/ event time timeout + watermark" -------------

@mws.state_function("max_event_time_sec BIGINT")
def max_event_time(key, rows, state):
    """The suite's stateFunc: the state is the key's largest event time (s), the timer 5 s
    after it; a timed-out key emits -1 and is removed."""
    timeout_delay_sec = 5
    if state.timing_out:
        state.remove()
        return {"key": key, "value": -1}
    max_event_time_sec = max(max(r.time for r in rows), state.max_event_time_sec or 0)
    timeout_timestamp_sec = max_event_time_sec + timeout_delay_sec
    state.update(max_event_time_sec=max_event_time_sec)
    state.set_timer(datetime(1970, 1, 1) + timedelta(seconds=timeout_timestamp_sec))
    return {"key": key, "value": max_event_time_sec}


EVENT_TIME_SPEC = max_event_time.timeout_domain("event_time")
# The suite's AddData steps and the new answer after each: ("a", 4) is late (watermark
# 15 - 10 = 5 s); ("b", 31) moves the watermark to 21 s, past a's timer (20 s), and the
# no-data batch Spark runs then times a out.
EVENT_TIME_STEPS = [[("a", 11), ("a", 13), ("a", 15)], [("a", 4)], [("a", 10)], [("b", 31)]]
EVENT_TIME_ANSWERS = [[("a", 15)], [], [("a", 15)], [("a", -1), ("b", 31)]]


def event_records(step):
    """The suite's input as the function sees it: key, time (s) and eventTime, the
    watermarked column (timestamp_seconds(time))."""
    return [{"key": k, "time": s, "eventTime": EPOCH + timedelta(seconds=s)} for k, s in step]


def new_answers_per_step(results, batches, steps):
    """The runner's new rows after each AddData step, as CheckNewAnswer sees them: those of the
    micro-batch that read its file and of the no-data batches after it."""
    answers = [[] for _ in range(steps)]
    step = -1
    for result, batch in zip(results, batches, strict=True):
        if batch.files:
            step = batch.files[-1]
        answers[step] += [tuple(r.values()) for r in result.emitted]
    return [sorted(a) for a in answers]


def test_event_time_timeout_with_watermark_in_a_stream(spark, tmp_path):
    from pyspark.sql import functions as F

    src, ck = str(tmp_path / "in"), str(tmp_path / "ck")
    for i, step in enumerate(EVENT_TIME_STEPS):
        write_json(src, i, [{"key": k, "time": s} for k, s in step])
    df = spark.readStream.schema("key STRING, time BIGINT").option("maxFilesPerTrigger", 1) \
        .json(src).select("key", "time", F.timestamp_seconds("time").alias("eventTime")) \
        .withWatermark("eventTime", "10 seconds")
    query = map_groups_with_state(df, "key", EVENT_TIME_SPEC).writeStream.format("memory") \
        .queryName("spark_suite_event_time").outputMode("update") \
        .option("checkpointLocation", ck).trigger(availableNow=True).start()
    query.awaitTermination()
    server = sorted(tuple(r) for r in spark.table("spark_suite_event_time").collect())

    batches = micro_batches(ck)
    tester = Tester(EVENT_TIME_SPEC, key="key", event_time="eventTime",
                    watermark_delay="10 seconds", stream=True)
    results = []
    for b in batches:
        result = tester.batch([r for i in b.files for r in event_records(EVENT_TIME_STEPS[i])],
                              EPOCH + timedelta(milliseconds=b.time_ms))
        assert result.watermark == EPOCH + timedelta(milliseconds=b.watermark_ms)
        results.append(result)
    python = new_answers_per_step(results, batches, len(EVENT_TIME_STEPS))
    assert python == EVENT_TIME_ANSWERS
    assert server == all_rows(python)


def event_time_replay(spark, steps):
    records = [dict(r, bt=at(i)) for i, step in enumerate(steps) for r in event_records(step)]
    python = emitted_per_batch(replay(EVENT_TIME_SPEC, records, key="key", batch_time="bt",
                                      event_time="eventTime", watermark_delay="10 seconds"))
    df = spark.createDataFrame([tuple(r.values()) for r in records],
                               "key STRING, time BIGINT, eventTime TIMESTAMP, bt TIMESTAMP") \
        .withWatermark("eventTime", "10 seconds")
    server = server_rows(map_groups_with_state(df, "key", EVENT_TIME_SPEC, batch_time="bt"))
    return python, server


def test_event_time_timeout_with_watermark_in_a_replay_ending_with_late_rows(spark):
    """A replay has no no-data batch: its last step here holds only a late row, ("a", 5).
    That batch still runs at the 21 s watermark, so a's timer fires in it, as a stream's
    micro-batch of late rows does (and as a per-record function's replay did): the operator
    had taken its batches from the rows left after the late ones were dropped, so the batch
    was lost and a never timed out."""
    python, server = event_time_replay(spark, EVENT_TIME_STEPS + [[("a", 5)]])
    assert python == [[("a", 15)], [], [("a", 15)], [("b", 31)], [("a", -1)]]
    assert server == all_rows(python)


# --- FlatMapGroupsWithStateSuite: "streaming with processing time timeout" -------------------

@mws.state_function("count BIGINT")
def count_with_processing_timeout(key, rows, state):
    """The suite's stateFunc: the count as state, a timer 10 s after the batch
    (setTimeoutDuration("10 seconds")); "-1" when the state is removed by its timeout."""
    if state.timing_out:
        state.remove()
        return {"key": key, "count": "-1"}
    count = (state.count or 0) + len(rows)
    state.update(count=count)
    state.set_timer(state.batch_time + timedelta(seconds=10))
    return {"key": key, "count": str(count)}


def test_processing_time_timeout_with_a_manual_clock_replay(spark):
    """The suite's manual clock as batch times: a at 1 s, b at 2 s, b at 12 s, c at 23 s, then
    the clock at 35 s with no data (the replay's until)."""
    spec = count_with_processing_timeout.timeout_domain("processing_time")
    steps = {1: ["a"], 2: ["b"], 12: ["b"], 23: ["c"]}
    records = [{"key": k, "bt": at(t)} for t, keys in steps.items() for k in keys]
    python = emitted_per_batch(replay(spec, records, key="key", batch_time="bt", until=at(35)))
    assert python == [[("a", "1")], [("b", "1")], [("a", "-1"), ("b", "2")],
                      [("b", "-1"), ("c", "1")], [("c", "-1")]]
    df = spark.createDataFrame([(r["key"], r["bt"]) for r in records], "key STRING, bt TIMESTAMP")
    server = server_rows(map_groups_with_state(df, "key", spec, batch_time="bt", until=at(35)))
    assert server == all_rows(python)


# --- FlatMapGroupsWithStateSuite: running counts up to 2, then removed -----------------------

@mws.state_function("count BIGINT")
def flat_running_count(key, rows, state):
    """"flatMapGroupsWithState - streaming": the count up to 2; at 3 the state is removed and
    nothing returned."""
    count = (state.count or 0) + len(rows)
    if count == 3:
        state.remove()
        return None
    state.update(count=count)
    return {"key": key, "count": str(count)}


@mws.state_function("count BIGINT")
def map_running_count(key, rows, state):
    """"mapGroupsWithState - streaming": the same, returning (key, "-1") on removal."""
    count = (state.count or 0) + len(rows)
    if count == 3:
        state.remove()
        return {"key": key, "count": "-1"}
    state.update(count=count)
    return {"key": key, "count": str(count)}


COUNT_STEPS = [["a"], ["a", "b"], ["a", "b"], ["a", "c"]]


@pytest.mark.parametrize("function, answers", [
    (flat_running_count, [[("a", "1")], [("a", "2"), ("b", "1")], [("b", "2")],
                          [("a", "1"), ("c", "1")]]),
    (map_running_count, [[("a", "1")], [("a", "2"), ("b", "1")], [("a", "-1"), ("b", "2")],
                         [("a", "1"), ("c", "1")]]),
], ids=["flatMapGroupsWithState", "mapGroupsWithState"])
def test_running_count_removed_at_three(spark, function, answers):
    records = [{"key": k, "bt": at(i)} for i, keys in enumerate(COUNT_STEPS) for k in keys]
    python = emitted_per_batch(replay(function, records, key="key", batch_time="bt"))
    assert python == answers
    df = spark.createDataFrame([(r["key"], r["bt"]) for r in records], "key STRING, bt TIMESTAMP")
    assert server_rows(map_groups_with_state(df, "key", function, batch_time="bt")) == \
        all_rows(python)


@mws.state_function("count BIGINT")
def count_per_value(key, state):
    """"streaming + func returns iterator that updates state lazily": the state updated per
    value (a per-record function), removed at 3 with nothing returned."""
    count = (state.count or 0) + 1
    if count == 3:
        state.remove()
        return None
    state.update(count=count)
    return {"key": key, "count": str(count)}


def test_state_updated_per_value(spark):
    steps = [["a", "a", "b"], ["a", "b"], ["a", "c"]]
    records = [{"key": k, "bt": at(i), "seq": n}
               for i, keys in enumerate(steps) for n, k in enumerate(keys)]
    python = emitted_per_batch(replay(count_per_value, records, key="key", batch_time="bt",
                                      order_by="seq"))
    assert python == [[("a", "1"), ("a", "2"), ("b", "1")], [("b", "2")],
                      [("a", "1"), ("c", "1")]]
    df = spark.createDataFrame([(r["key"], r["bt"], r["seq"]) for r in records],
                               "key STRING, bt TIMESTAMP, seq INT")
    out = map_with_state(df, "key", count_per_value, batch_time="bt", order_by="seq")
    assert server_rows(out.select("key", "count")) == all_rows(python)


# --- MapWithStateSuite (DStream mapWithState) --------------------------------------------------

# The suite's batches: one a second, the first and last empty (a replay starts and ends with
# records, so those are left out; the empty one in the middle runs with batch_interval).
DSTREAM_BATCHES = [["a"], ["a", "b"], ["a", "b", "c"], ["a", "b"], ["a"]]


def dstream_records(batches):
    return [{"word": w, "value": 1, "ts": at(i), "seq": n}
            for i, words in enumerate(batches) for n, w in enumerate(words)]


def dstream_frame(spark, records):
    return spark.createDataFrame([tuple(r.values()) for r in records],
                                 "word STRING, value INT, ts TIMESTAMP, seq INT")


def run_dstream(spark, spec, batches, **settings):
    """The runner's batches, and the server's emitted rows and snapshots, of a replay one
    batch a second, records in order."""
    records = dstream_records(batches)
    common = dict(batch_time="ts", batch_interval="1 second", order_by="seq")
    results = replay(spec, records, key="word", **common, **settings)
    df = dstream_frame(spark, records)
    emitted = server_rows(map_with_state(df, "word", spec, **common))
    snapshots = server_snapshots(map_with_state(df, "word", spec, output="snapshots", **common))
    return results, emitted, snapshots


def by_time(expected):
    return {at(i): sorted(items) for i, items in enumerate(expected) if items}


@mws.state_function("count INT")
def running_count(word, value, state):
    """"basic operations with simple API": sum = value.getOrElse(0) + state.getOption.getOrElse(0);
    state.update(sum); the sum returned."""
    total = (value or 0) + (state.count or 0)
    state.update(count=total)
    return {"word": word, "count": total}


def test_dstream_running_count_and_state_snapshots(spark):
    """"basic operations with simple API" and "states as mapped data": the outputs and the
    state snapshots after each batch."""
    results, emitted, snapshots = run_dstream(spark, running_count, DSTREAM_BATCHES)
    python = emitted_per_batch(results)
    assert python == [[("a", 1)], [("a", 2), ("b", 1)], [("a", 3), ("b", 2), ("c", 1)],
                      [("a", 4), ("b", 3)], [("a", 5)]]
    states = snapshots_per_batch(results)
    assert states == by_time([[("a", 1)], [("a", 2), ("b", 1)],
                              [("a", 3), ("b", 2), ("c", 1)], [("a", 4), ("b", 3), ("c", 1)],
                              [("a", 5), ("b", 3), ("c", 1)]])
    assert emitted == all_rows(python)
    assert snapshots == states


@mws.state_function("count INT")
def remove_when_seen(word, value, state):
    """"state removing": if (state.exists) { state.remove(); Some(key) } else
    { state.update(value.get); None }."""
    if state.exists:
        state.remove()
        return {"word": word}
    state.update(count=value)
    return None


def test_dstream_state_removing(spark):
    batches = [["a"], ["a", "b"], ["a", "b", "c"], ["a", "b", "c"], ["a", "b"], ["a"]]
    results, emitted, snapshots = run_dstream(spark, remove_when_seen.num_partitions(1), batches)
    python = emitted_per_batch(results)
    assert python == [[], [("a",)], [("b",)], [("a",), ("c",)], [("b",)], [("a",)]]
    states = snapshots_per_batch(results)
    assert states == by_time([[("a", 1)], [("b", 1)], [("a", 1), ("c", 1)], [("b", 1)],
                              [("a", 1)], []])
    assert emitted == all_rows(python)
    assert snapshots == states


@mws.state_function("count INT")
def report_timing_out(word, value, state):
    """"state timing out": if (value.isDefined) state.update(1);
    if (state.isTimingOut) Some(key) else None."""
    if value is not None:
        state.update(count=1)
    if state.timing_out:
        return {"word": word}
    return None


def test_dstream_state_timing_out(spark):
    """b and c are returned once each when they time out (3 s idle), on the first full scan
    of the state (every 10th batch, as Spark checkpoints); a stays active."""
    batches = [["a", "b", "c"], ["a", "b"], ["a"], [], [], ["a"]] + [["a"]] * 20
    results, emitted, snapshots = run_dstream(spark, report_timing_out.timeout("3 seconds"),
                                              batches)
    python = emitted_per_batch(results)
    assert all_rows(python) == [("b",), ("c",)]
    assert [i for i, rows in enumerate(python) if rows] == [9]
    states = snapshots_per_batch(results)
    assert any(set(s) == {("a", 1), ("b", 1), ("c", 1)} for s in states.values())
    assert states[max(states)] == [("a", 1)]
    assert emitted == all_rows(python)
    assert snapshots == states


@mws.state_function("count INT")
def running_count_returning_nothing(word, value, state):
    """"initial states, with nothing returned as from mapping function"."""
    total = (value or 0) + (state.count or 0)
    state.update(count=total)
    return None


def test_dstream_initial_state(spark):
    initial = [("a", 5), ("b", 10), ("c", -20), ("d", 0)]
    frame = spark.createDataFrame(initial, "word STRING, count INT")
    spec = running_count_returning_nothing.initial_state(frame)
    results, emitted, snapshots = run_dstream(spark, spec, DSTREAM_BATCHES)
    assert emitted == [] and all(b.emitted == [] for b in results)
    states = snapshots_per_batch(results)
    assert states == by_time([
        [("a", 6), ("b", 10), ("c", -20), ("d", 0)],
        [("a", 7), ("b", 11), ("c", -20), ("d", 0)],
        [("a", 8), ("b", 12), ("c", -19), ("d", 0)],
        [("a", 9), ("b", 13), ("c", -19), ("d", 0)],
        [("a", 10), ("b", 13), ("c", -19), ("d", 0)]])
    assert snapshots == states


# --- FlatMapGroupsWithStateSuite: "SPARK-38320 - state with data should not timeout" -----------

@mws.state_function("n INT")
def timer_set_once(key, rows, state):
    """The suite's stateFunc: a state and a 500 ms event-time timer on the key's first call
    only; returns whether the call is timing out."""
    if not state.exists:
        state.update(n=0)
        state.set_timer(datetime(1970, 1, 1) + timedelta(milliseconds=500))
    return {"key": key, "timed_out": state.timing_out}


def test_spark_38320_key_with_data_does_not_time_out(spark):
    """The second batch's watermark (1 s) has passed the 500 ms timer, but the key has data
    in it: it is called for its data, not timed out, and the timer it kept, already due, is
    spent (Spark resets a timer a call does not set), so no batch times it out."""
    spec = timer_set_once.timeout_domain("event_time")
    records = [{"key": 0, "eventTime": EPOCH + timedelta(seconds=s), "bt": at(s)}
               for s in (1, 2)]
    results = replay(spec, records, key="key", batch_time="bt", event_time="eventTime",
                     watermark_delay="0 seconds", until=at(10))
    python = emitted_per_batch(results)
    assert python == [[(0, False)], [(0, False)], []]  # and nothing at until
    df = spark.createDataFrame([(r["key"], r["eventTime"], r["bt"]) for r in records],
                               "key INT, eventTime TIMESTAMP, bt TIMESTAMP") \
        .withWatermark("eventTime", "0 seconds")
    server = server_rows(map_groups_with_state(df, "key", spec, batch_time="bt",
                                               until=at(10)))
    assert server == all_rows(python)


@mws.state_function("n INT")
def deadline_once(key, rows, state):
    """A processing-time deadline set on the key's first call only, 5 s after its batch."""
    if state.timing_out:
        return {"key": key, "event": "deadline"}
    if not state.exists:
        state.update(n=0)
        state.set_timer(state.batch_time + timedelta(seconds=5))
    state.update(n=state.n + len(rows))
    return {"key": key, "event": f"data {state.n}"}


def test_a_processing_time_timer_due_in_a_batch_with_the_keys_data_is_spent(spark):
    """a's deadline (6 s) is due in the batch at 6 s, where a has data: that batch calls it
    for its data, and the deadline is spent, not fired later; b's fires in the batch at 7 s."""
    spec = deadline_once.timeout_domain("processing_time")
    records = [{"key": k, "bt": at(t)} for t, k in ((1, "a"), (2, "b"), (6, "a"))]
    python = emitted_per_batch(replay(spec, records, key="key", batch_time="bt", until=at(12)))
    assert all_rows(python) == sorted([("a", "data 1"), ("b", "data 1"), ("a", "data 2"),
                                       ("b", "deadline")])
    df = spark.createDataFrame([(r["key"], r["bt"]) for r in records], "key STRING, bt TIMESTAMP")
    server = server_rows(map_groups_with_state(df, "key", spec, batch_time="bt", until=at(12)))
    assert server == all_rows(python)
