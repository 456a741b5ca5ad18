"""mapwithstate.testing's runner against the real server: each case is a Column spec and the
Python function that does the same, side by side; the server runs the spec, the runner the
function, over the same batches, and every batch's output must be the same.

The emitted rows carry their batch's time (``bt``), so the server's output splits into the
batches the runner returns.
"""
import os
from collections import defaultdict
from datetime import datetime, timedelta

import pytest
from hypothesis import strategies as st
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from mapwithstate.testing import Tester, replay
from specs import latest_event_spec
from streams import Stream, run_memory

T0 = datetime(2026, 1, 1)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def server_batches(df, time_column="bt"):
    """The server's rows, as tuples, per batch time (the column ``time_column``)."""
    batches = defaultdict(list)
    for row in df.collect():
        batches[row[time_column]].append(tuple(row))
    return {t: sorted(rows, key=repr) for t, rows in batches.items()}


def runner_batches(results, what="emitted"):
    """The runner's rows, as tuples, per batch time (batches without rows left out)."""
    return {r.batch_time: sorted((tuple(d.values()) for d in getattr(r, what)), key=repr)
            for r in results if getattr(r, what)}


# --- an idle timeout, per record: DStream's mapWithState ------------------------------------

def idle_count_spec():
    count = F.coalesce(S.state("n"), F.lit(0)) + 1
    return StateSpec.function(
        "n BIGINT",
        update=F.struct(count.alias("n")),
        remove=F.col("v") < 0,
        emit=F.struct(F.col("word"),
                      F.when(S.is_timing_out(), -S.state("n")).otherwise(S.new_state("n"))
                      .alias("n"),
                      S.batch_time().alias("bt")))


def idle_count(word, v, state):
    if state.timing_out:
        return {"word": word, "n": -state.n, "bt": state.batch_time}
    if v < 0:
        state.remove()
    else:
        state.update(n=(state.n or 0) + 1)
    return {"word": word, "n": state.n, "bt": state.batch_time}


IDLE_RECORDS = [("a", 1, 0), ("b", 1, 0), ("a", 1, 1), ("c", 1, 2), ("c", -1, 3), ("b", 1, 9),
                ("d", 1, 12), ("a", 1, 13), ("e", 1, 13), ("d", 1, 21), ("c", 1, 21)]


@pytest.mark.parametrize("interval", [1, 3])
def test_an_idle_timeout_fires_on_checkpoint_batches_only(spark, interval):
    records = [{"word": w, "v": v, "t": at(t)} for w, v, t in IDLE_RECORDS]
    initial = [{"word": "z", "n": 10}, {"word": "a", "n": 100}]
    df = spark.createDataFrame([(r["word"], r["v"], r["t"]) for r in records],
                               "word STRING, v INT, t TIMESTAMP")
    spec = idle_count_spec().timeout("4 seconds").checkpoint_interval(interval) \
        .initial_state(spark.createDataFrame([(r["word"], r["n"]) for r in initial],
                                             "word STRING, n BIGINT"))
    on_server = map_with_state(df, key="word", value="v", spec=spec, batch_time="t",
                               batch_interval="1 second")
    ours = replay(idle_count, records, key="word", batch_time="t", batch_interval="1 second",
                  state_schema="n BIGINT", timeout="4 seconds", checkpoint_interval=interval,
                  initial_state=initial)
    assert runner_batches(ours) == server_batches(on_server)
    snapshots = map_with_state(df, key="word", value="v", spec=spec, batch_time="t",
                               batch_interval="1 second", output="snapshots")
    assert runner_batches(ours, "snapshots") == server_batches(snapshots, "batch_time")


# --- processing-time timers, per record ----------------------------------------------------

def timer_spec():
    timing_out = S.is_timing_out()
    v = F.col("v")
    due = S.batch_time() + F.make_dt_interval(F.lit(0), F.lit(0), F.lit(0), v.cast("double"))
    none = F.lit(None).cast("timestamp")
    timer_after = F.when(v > 0, due).when(v == 0, none).otherwise(S.timeout_at())
    # A timer the call keeps that is already due is spent (a Python function's rule).
    kept = F.when(S.timeout_at() <= S.batch_time(), none).otherwise(S.timeout_at())
    return StateSpec.function(
        "n BIGINT",
        update=F.when(~timing_out, F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n"))),
        remove=F.when(timing_out, F.coalesce(S.state("n") > 2, F.lit(False))).otherwise(v < 0),
        emit=F.when(timing_out, F.struct(
            F.col("word"), S.state("n").alias("n"), S.state_exists().alias("exists"),
            S.timeout_at().alias("timer"), S.batch_time().alias("bt")))
        .otherwise(F.struct(
            F.col("word"), S.new_state("n").alias("n"), (v >= 0).alias("exists"),
            timer_after.alias("timer"), S.batch_time().alias("bt"))),
        timeout_at=F.when(~timing_out, F.when(v > 0, due).when(v == 0, none).otherwise(kept)))


def timers(word, v, state):
    if state.timing_out:
        yield {"word": word, "n": state.n, "exists": state.exists, "timer": state.timer,
               "bt": state.batch_time}
        if state.exists and state.n > 2:
            state.remove()
        return
    state.update(n=(state.n or 0) + 1)
    if v > 0:
        state.set_timer(state.batch_time + timedelta(seconds=v))
    elif v == 0:
        state.clear_timer()
    else:
        state.remove()  # the key keeps its timer, without a state
    yield {"word": word, "n": state.n, "exists": state.exists, "timer": state.timer,
           "bt": state.batch_time}


TIMER_RECORDS = [("a", 2, 0), ("b", 5, 0), ("c", 3, 0), ("a", 1, 1), ("c", -1, 1), ("d", 4, 2),
                 ("d", 0, 3), ("a", 9, 4), ("e", 1, 4), ("b", 2, 5), ("a", 2, 14), ("a", 3, 14),
                 ("f", 1, 20)]


def test_processing_time_timers_fire_kept_and_cleared(spark):
    records = [{"word": w, "v": v, "t": at(t)} for w, v, t in TIMER_RECORDS]
    df = spark.createDataFrame([(r["word"], r["v"], r["t"]) for r in records],
                               "word STRING, v INT, t TIMESTAMP")
    on_server = map_with_state(df, key="word", value="v", spec=timer_spec(), batch_time="t",
                               batch_interval="1 second")
    ours = replay(timers, records, key="word", batch_time="t", batch_interval="1 second",
                  state_schema="n BIGINT", timeout_domain="processing_time")
    assert runner_batches(ours) == server_batches(on_server)
    fired = [r for b in ours for r in b.emitted if r["bt"] != r["timer"] and r["timer"]
             and r["timer"] < r["bt"]]
    assert fired, "the case fires no timer"


def test_a_data_call_keeping_a_passed_timer_spends_it_both_ways(spark):
    # b's timer (1 s) has passed when b's record of batch 2 s keeps it (v < 0): the call sees
    # it, and it is spent (as the Column twin's timeout_at says); a timeout_at that keeps
    # it as it is fails the query, as Spark's GroupState refuses a timer already due.
    records = [{"word": "b", "v": 1, "t": at(0)}, {"word": "b", "v": -1, "t": at(2)}]
    df = spark.createDataFrame([(r["word"], r["v"], r["t"]) for r in records],
                               "word STRING, v INT, t TIMESTAMP")
    ours = replay(timers, records, key="word", batch_time="t", state_schema="n BIGINT",
                  until=at(5))
    on_server = map_with_state(df, key="word", value="v", spec=timer_spec(), batch_time="t",
                               until=at(5))
    assert runner_batches(ours) == server_batches(on_server)
    assert [r["timer"] for b in ours for r in b.emitted] == [at(1), at(1)]
    keeping = timer_spec()
    keeping = StateSpec.function("n BIGINT", update=keeping.update, remove=keeping.remove,
                                 emit=keeping.emit, timeout_at=F.when(
                                     ~S.is_timing_out(), F.when(F.col("v") > 0, at(1))
                                     .otherwise(S.timeout_at())))
    with pytest.raises(Exception, match="Timeout duration must be positive"):
        map_with_state(df, key="word", value="v", spec=keeping, batch_time="t").collect()


# --- event-time timers, per record, replayed and streamed ----------------------------------

def latest_event(word, event, state):
    if state.timing_out:
        state.remove()
        return {"word": word, "n": -1, "wm": state.watermark, "bt": state.batch_time}
    latest = event if state.latest is None else max(state.latest, event)
    state.update(latest=latest)
    state.set_timer(latest + timedelta(seconds=5))
    return {"word": word, "n": 1, "wm": state.watermark, "bt": state.batch_time}


EVENT_BATCHES = [[("a", 11), ("a", 13), ("a", 15)], [("a", 4)], [("a", 10), ("b", 12)],
                 [("a", 21)], [], [("b", 31)], [("c", 40)], [("d", 41), ("a", 5)]]


def event_replays(spark, **until):
    """EVENT_BATCHES replayed by the server and by the runner (``until`` passed to both)."""
    records = [{"word": w, "event": at(e), "bt": at(i)}
               for i, b in enumerate(EVENT_BATCHES) for w, e in b]
    df = spark.createDataFrame([(r["word"], r["event"], r["bt"]) for r in records],
                               "word STRING, event TIMESTAMP, bt TIMESTAMP") \
        .withWatermark("event", "10 seconds")
    on_server = map_with_state(df, key="word", value="event", spec=latest_event_spec(),
                               batch_time="bt", batch_interval="1 second", **until)
    ours = replay(latest_event, records, key="word", batch_time="bt", batch_interval="1 second",
                  state_schema="latest TIMESTAMP", timeout_domain="event_time",
                  event_time="event", watermark_delay="10 seconds", **until)
    return on_server, ours


def test_event_time_timers_watermarks_and_late_rows_in_a_replay(spark):
    on_server, ours = event_replays(spark)
    assert runner_batches(ours) == server_batches(on_server)
    assert sum(b.late_rows for b in ours) == 2
    assert any(r["n"] == -1 for b in ours for r in b.emitted)


def test_event_time_timers_in_a_stream(spark, tmp_path):
    stream = Stream(str(tmp_path))
    for batch in EVENT_BATCHES:
        stream.add_events(*[(w, (at(e) - datetime(1970, 1, 1)) // timedelta(seconds=1))
                            for w, e in batch])
    df = stream.read_events(spark, delay="10 seconds")
    result = map_with_state(df, key="word", value="event", spec=latest_event_spec())
    run_memory(result, "runner_event_stream", stream.checkpoint)
    on_server = server_batches(spark.table("runner_event_stream"))

    tester = Tester(latest_event, key="word", state_schema="latest TIMESTAMP",
                    timeout_domain="event_time", event_time="event",
                    watermark_delay="10 seconds", stream=True)
    ours = []
    for batch_id, (batch_time, watermark, files) in sorted(stream_batches(stream).items()):
        records = [{"word": w, "event": at(e)} for f in files for w, e in EVENT_BATCHES[f]]
        result = tester.batch(records, batch_time)
        assert result.watermark == watermark, f"batch {batch_id}"
        ours.append(result)
    assert runner_batches(ours) == on_server
    assert len(ours) > len(EVENT_BATCHES), "no no-data batch ran"


def stream_batches(stream):
    """Batch id -> (batch time, watermark, the indexes of the files it read) from the
    checkpoint's offset log: the file source's offset is the index of its last file."""
    import glob
    import json

    batches, previous = {}, -1
    paths = glob.glob(os.path.join(stream.checkpoint, "offsets", "[0-9]*"))
    for path in sorted(paths, key=lambda p: int(os.path.basename(p))):
        with open(path) as f:
            lines = f.read().splitlines()
        metadata, offset = json.loads(lines[1]), json.loads(lines[2])["logOffset"]
        epoch = datetime(1970, 1, 1)
        batches[int(os.path.basename(path))] = (
            epoch + timedelta(milliseconds=metadata["batchTimestampMs"]),
            epoch + timedelta(milliseconds=metadata["batchWatermarkMs"]),
            list(range(previous + 1, offset + 1)))
        previous = offset
    return batches


# --- a group function with initial state and timers ----------------------------------------

def group_spec(initial):
    timing_out = S.is_timing_out()
    total = F.coalesce(S.state("total"), F.lit(0)) + F.coalesce(F.sum("v"), F.lit(0))
    return StateSpec.function(
        "total BIGINT",
        update=F.when(~timing_out, F.struct(total.alias("total"))),
        emit=F.struct(F.col("k"), F.when(timing_out, F.lit(-1)).otherwise(F.count("*"))
                      .alias("n"), S.new_state("total").alias("total"),
                      S.batch_time().alias("bt")),
        timeout_at=F.when(~timing_out, S.batch_time() + F.expr("INTERVAL 3 SECONDS")),
    ).initial_state(initial)


def group_totals(k, rows, state):
    if state.timing_out:
        return {"k": k, "n": -1, "total": state.total, "bt": state.batch_time}
    state.update(total=(state.total or 0) + sum(r.v for r in rows))
    state.set_timer(state.batch_time + timedelta(seconds=3))
    return {"k": k, "n": len(rows), "total": state.total, "bt": state.batch_time}


def test_a_group_function_calls_initial_keys_and_times_out(spark):
    rows = [("a", 1, 0), ("a", 2, 0), ("b", 5, 0), ("a", 3, 2), ("c", 7, 4), ("b", 1, 9)]
    records = [{"k": k, "v": v, "t": at(t)} for k, v, t in rows]
    initial = [{"k": "a", "total": 100}, {"k": "z", "total": 50}]
    df = spark.createDataFrame(rows, "k STRING, v BIGINT, t INT") \
        .select("k", "v", (F.lit(T0).cast("long") + F.col("t")).cast("timestamp").alias("t"))
    spec = group_spec(spark.createDataFrame([(r["k"], r["total"]) for r in initial],
                                            "k STRING, total BIGINT"))
    on_server = map_groups_with_state(df, key="k", spec=spec, batch_time="t",
                                      batch_interval="1 second")
    ours = replay(group_totals, records, key="k", batch_time="t", batch_interval="1 second",
                  state_schema="total BIGINT", timeout_domain="processing_time",
                  initial_state=initial)
    assert runner_batches(ours) == server_batches(on_server)


# --- until: the timeline goes on after the last record ------------------------------------

@pytest.mark.parametrize("interval", [None, "1 second"])
def test_until_closes_idle_keys_as_the_server_does(spark, interval):
    records = [{"word": w, "v": v, "t": at(t)} for w, v, t in IDLE_RECORDS]
    df = spark.createDataFrame([(r["word"], r["v"], r["t"]) for r in records],
                               "word STRING, v INT, t TIMESTAMP")
    spec = idle_count_spec().timeout("4 seconds").checkpoint_interval(3)
    until = at(40)
    ours = replay(idle_count, records, key="word", batch_time="t", batch_interval=interval,
                  state_schema="n BIGINT", timeout="4 seconds", checkpoint_interval=3,
                  until=until)
    assert ours[-1].batch_time == until
    for output, time_column in (("emitted", "bt"), ("snapshots", "batch_time")):
        on_server = map_with_state(df, key="word", value="v", spec=spec, batch_time="t",
                                   batch_interval=interval, until=until, output=output)
        assert runner_batches(ours, output) == server_batches(on_server, time_column)
    closed_after = [r for b in ours if b.batch_time > at(21) for r in b.emitted]
    assert closed_after and all(r["n"] < 0 for r in closed_after)


def test_until_fires_processing_time_timers_as_the_server_does(spark):
    records = [{"word": w, "v": v, "t": at(t)} for w, v, t in TIMER_RECORDS]
    df = spark.createDataFrame([(r["word"], r["v"], r["t"]) for r in records],
                               "word STRING, v INT, t TIMESTAMP")
    on_server = map_with_state(df, key="word", value="v", spec=timer_spec(), batch_time="t",
                               batch_interval="1 second", until=at(30))
    ours = replay(timers, records, key="word", batch_time="t", batch_interval="1 second",
                  state_schema="n BIGINT", timeout_domain="processing_time", until=at(30))
    assert runner_batches(ours) == server_batches(on_server)
    assert any(b.emitted for b in ours if b.batch_time > at(20)), "no timer fires after 20 s"


def test_until_moves_the_watermark_on_as_the_server_does(spark):
    on_server, ours = event_replays(spark, until=at(60))
    assert runner_batches(ours) == server_batches(on_server)
    assert ours[-1].watermark == at(50) and ours[-1].emitted


def test_until_runs_a_group_function_as_the_server_does(spark):
    rows = [("a", 1, 0), ("a", 2, 0), ("b", 5, 0), ("a", 3, 2), ("c", 7, 4), ("b", 1, 9)]
    records = [{"k": k, "v": v, "t": at(t)} for k, v, t in rows]
    initial = [{"k": "z", "total": 50}]
    df = spark.createDataFrame(rows, "k STRING, v BIGINT, t INT") \
        .select("k", "v", (F.lit(T0).cast("long") + F.col("t")).cast("timestamp").alias("t"))
    spec = group_spec(spark.createDataFrame([(r["k"], r["total"]) for r in initial],
                                            "k STRING, total BIGINT"))
    on_server = map_groups_with_state(df, key="k", spec=spec, batch_time="t", until=at(20))
    ours = replay(group_totals, records, key="k", batch_time="t", state_schema="total BIGINT",
                  timeout_domain="processing_time", initial_state=initial, until=at(20))
    assert runner_batches(ours) == server_batches(on_server)
    assert [r["k"] for r in ours[-1].emitted] == ["b"]  # b's timer (12 s), due by 20 s


def test_the_runner_refuses_an_until_before_the_last_batch():
    with pytest.raises(ValueError, match="is before the replay's last batch time"):
        replay(idle_count, [{"word": "a", "v": 1, "t": at(5)}], key="word", batch_time="t",
               state_schema="n BIGINT", until=at(4))


# --- random cases, through the differential harness ----------------------------------------

def column_function(name, function, spec, columns, state_schema, settings, **watermark):
    from differential import Function

    return Function(name, function, lambda spark, initial: spec, "word", columns,
                    state_schema, settings, **watermark)


RANDOM_FUNCTIONS = {
    "timers": lambda: (column_function("timers", timers, timer_spec(), {"v": "INT"},
                                       "n BIGINT", {"timeout_domain": "processing_time"}),
                       {"v": st.integers(-3, 6)}),
    "latest_event": lambda: (column_function(
        "latest_event", latest_event, latest_event_spec(), {"event": "TIMESTAMP"},
        "latest TIMESTAMP", {"timeout_domain": "event_time"}, event_time="event",
        delay="10 seconds"), {"event": st.integers(0, 60).map(at)}),
}


@pytest.mark.parametrize("name", sorted(RANDOM_FUNCTIONS))
def test_random_cases_replayed_and_streamed(spark, tmp_path, name):
    from differential import (ParquetStream, canonical, differences, draw_cases, prefixed,
                              python_outcome, run_replay_in_python, run_stream_in_python,
                              server_outcome, server_replay, server_stream, split_raising)

    function, values = RANDOM_FUNCTIONS[name]()
    strategy = st.lists(st.lists(st.fixed_dictionaries(
        {"word": st.sampled_from(["a", "b", "é"]), **values}), max_size=4), min_size=1,
        max_size=6)
    passing, raising = split_raising(function, draw_cases(strategy, 30, 7))
    assert len(passing) > 20, raising[:3]
    ours = python_outcome(run_replay_in_python(function, passing))
    theirs = server_outcome(server_replay(spark, function, passing),
                            server_replay(spark, function, passing, "snapshots"))
    assert ours.emitted == theirs.emitted, differences(ours.emitted, theirs.emitted)
    assert ours.snapshots == theirs.snapshots

    stream = ParquetStream(str(tmp_path))
    for batch in prefixed(function, passing):
        stream.add(spark, function, batch)
    rows, batches = server_stream(spark, function, stream, [n for n, _ in passing],
                                  "emitted", f"random_{name}")
    ours = python_outcome(run_stream_in_python(function, passing, batches))
    assert ours.emitted == canonical(rows), differences(ours.emitted, canonical(rows))
