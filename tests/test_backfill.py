"""Backfill, then go live: a batch replay's ``output="final_state"`` (every key's state after
its last batch, as ``read_state`` shows it) resumed by ``initial_state(..., last_updated=)``,
with its keys holding only a timer (``include_timer_only_keys``, resumed by ``has_state=``)
and its event-time watermark (``output="final_watermark"``, resumed by ``watermark=``).

The guarantee: a run started from a replay's final state goes on exactly as one long run over
history-then-live would, idle timeouts, timers, late rows and watermarks included. Checked on
seeded random input, for both operators and every model of expiry (idle, processing-time and
event-time timers): one replay over every batch against a replay of the history
(``final_state``) then a replay of the live batches (resuming it), and against a real stream
over files started from the final state, on both backends — its reference replay has the
stream's own micro-batches, read from its offset log (their times, and the no-data batches
Spark runs when the watermark moves), so the comparison is exact whatever the wall clock did.
"""
import random
from datetime import datetime, timedelta

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from mapwithstate.testing import replay as python_replay
from streams import Stream, micro_batches

pytestmark = pytest.mark.sessions("connect", "classic")

T0 = datetime(2026, 1, 1)
SCHEMA = "user STRING, amount BIGINT, ts TIMESTAMP"
# With event time: each record's event time, up to 6 s before its batch time.
EVENT_SCHEMA = SCHEMA + ", et TIMESTAMP"
DELAY = "2 seconds"
STATE_COLUMNS = ["user", "n", "total", "last_updated", "timeout_at"]  # read_state's
WITH_HAS_STATE = STATE_COLUMNS + ["has_state"]  # with include_timer_only_keys
OPERATORS = {"map_with_state": map_with_state, "map_groups_with_state": map_groups_with_state}


def spec(groups, expiry, idle="3 seconds"):
    """Counts and sums a user's amounts; emits after every call, and on a timing-out call (the
    key's state is then removed). ``expiry``: ``"idle"`` (``timeout``, scanned every batch),
    ``"timers"`` (a processing-time timer ``idle`` after each batch that saw the key) or
    ``"event_time"`` (an event-time timer ``idle`` after the key's latest record's event time;
    the input has a watermark on ``et``). With timers, a key timing out with a state keeps a
    timer ten seconds later without one — a key holding only a timer — whose call emits null
    counts and lets the key go; with event time every call also emits its watermark."""
    timing_out = S.is_timing_out()
    n = F.coalesce(S.state("n"), F.lit(0)) + (F.count("*") if groups else F.lit(1))
    total = F.coalesce(S.state("total"), F.lit(0)) + (F.sum("amount") if groups
                                                       else F.col("amount"))
    emit = F.struct(
        F.col("user"),
        F.coalesce(S.new_state("n"), S.state("n")).alias("n"),
        F.coalesce(S.new_state("total"), S.state("total")).alias("total"),
        timing_out.alias("timing_out"),
        S.batch_time().alias("bt"),
        *([S.watermark().alias("wm")] if expiry == "event_time" else []))
    # A timing-out call sees no records: its event time is null, the watermark its clock.
    clock = (S.batch_time() if expiry == "timers" else
             F.coalesce(F.max("et") if groups else F.col("et"), S.watermark()))
    timer = F.when(~timing_out, clock + F.expr(f"INTERVAL {idle}")) \
        .when(S.state_exists(), clock + F.expr("INTERVAL 10 seconds"))
    built = StateSpec.function(
        "n BIGINT, total BIGINT",
        update=F.struct(n.alias("n"), total.alias("total")),
        remove=timing_out,
        emit=emit,
        timeout_at=timer if expiry != "idle" else None)
    if expiry == "event_time":
        return built.timeout_domain("event_time")
    return built.timeout(idle).checkpoint_interval(1) if expiry == "idle" else built


def events(seed, batches, start=T0, step=timedelta(seconds=1), users=12):
    """Seeded random records: each batch time ``start + i * step`` has one to five records of
    random users (so every batch has records), amounts 1 to 9."""
    rng = random.Random(seed)
    rows = []
    for i in range(batches):
        t = start + i * step
        for _ in range(rng.randint(1, 5)):
            rows.append((f"u{rng.randrange(users)}", rng.randint(1, 9), t))
    return rows


def with_event_times(seed, rows):
    """``rows`` with an event time each, zero to six seconds before its batch time."""
    rng = random.Random(seed)
    return [(u, a, t, t - timedelta(seconds=rng.randint(0, 6))) for u, a, t in rows]


def frame(spark, records, event_time):
    """``records`` as a DataFrame: (user, amount, ts), with ``event_time`` also ``et`` under a
    watermark of ``DELAY``."""
    df = spark.createDataFrame(records, EVENT_SCHEMA if event_time else SCHEMA)
    return df.withWatermark("et", DELAY) if event_time else df


def nulls_first(row):
    """A sort key for rows with nulls (a timer-only key's call emits null counts)."""
    return [(v is not None, v) for v in row]


def emitted(df):
    return sorted((tuple(r) for r in df.collect() if r is not None and r.user is not None),
                  key=nulls_first)


def states(df, columns=STATE_COLUMNS):
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=nulls_first)


def resume(built, final, expiry, watermark=None):
    """``built`` resuming the state ``final`` (read_state's or final_state's rows, as they are;
    with ``has_state`` when they have it) from the event-time ``watermark``, if any."""
    return built.initial_state(final, timeout_at="timeout_at" if expiry != "idle" else None,
                               last_updated="last_updated",
                               has_state="has_state" if "has_state" in final.columns else None,
                               watermark=watermark)


@pytest.mark.parametrize(("seed", "expiry"), [
    (7, "idle"), (42, "idle"), (7, "timers"), (42, "timers"),
    # Event time: late rows, watermarks and event-time timers across the boundary.
    (7, "event_time")])
@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_history_then_live_equals_one_replay(spark, operator, expiry, seed):
    run = OPERATORS[operator]
    groups = operator == "map_groups_with_state"
    rows = events(seed, batches=40)
    event_time = expiry == "event_time"
    if event_time:
        rows = with_event_times(seed, rows)
    cut = T0 + timedelta(seconds=25)
    history = [r for r in rows if r[2] < cut]
    live = [r for r in rows if r[2] >= cut]
    replay = dict(batch_time="ts", batch_interval="1 second")
    everything = frame(spark, rows, event_time)
    whole = run(everything, key="user", spec=spec(groups, expiry), **replay)
    whole_final = run(everything, key="user", spec=spec(groups, expiry), output="final_state",
                      include_timer_only_keys=True, **replay)

    # The history's timeline ends where the live one starts (until=: its last empty batches).
    history_df = frame(spark, history, event_time)
    until = cut - timedelta(seconds=1)
    final = run(history_df, key="user", spec=spec(groups, expiry), output="final_state",
                include_timer_only_keys=True, until=until, **replay)
    assert final.columns == WITH_HAS_STATE
    if expiry == "timers":
        # By default the same keys with a state and the same columns, as read_state's.
        default = run(history_df, key="user", spec=spec(groups, expiry), output="final_state",
                      until=until, **replay)
        assert default.columns == STATE_COLUMNS
        assert states(default) == states(final.where("has_state"))
    watermark = None
    if event_time:
        (row,) = run(history_df, key="user", spec=spec(groups, expiry),
                     output="final_watermark", until=until, **replay).collect()
        watermark = row.watermark
        # The largest event time of the history less the delay, as Spark's tracker leaves it.
        assert watermark == max(r[3] for r in history) - timedelta(seconds=2)
    resumed = resume(spec(groups, expiry), final, expiry, watermark)
    live_df = frame(spark, live, event_time)
    go_live = run(live_df, key="user", spec=resumed, **replay)

    expected = [r for r in emitted(whole) if r[4] >= cut]
    assert emitted(go_live) == expected
    # Not vacuous: keys time out in the live batches before any live record of theirs, on the
    # clock and state the history left them.
    first_live = {}
    for r in live:
        first_live.setdefault(r[0], r[2])
    assert any(r[3] and first_live.get(r[0], r[4]) >= r[4] for r in expected)
    if expiry != "idle":
        # Keys holding only a timer at the cut are in the final state, and their timers fire
        # in the live run (a timing-out call with no state: null counts).
        timer_only = [r for r in final.collect() if not r.has_state]
        assert timer_only
        assert all(r.n is None and r.total is None and r.timeout_at is not None
                   for r in timer_only)
        assert any(r[0] in {t.user for t in timer_only} and r[1] is None and r[3]
                   for r in expected)
    if event_time:
        # The first live batch runs with the history's watermark: its records at or before it
        # are late (dropped: they emit nothing), and timers it passes fire there.
        late = [r for r in live if r[2] == cut and r[3] <= watermark]
        assert late
        assert not any(r[4] == cut and r[5] != watermark for r in expected)
        assert any(r[4] == cut and r[3] for r in expected)
    assert states(run(live_df, key="user", spec=resumed, output="final_state",
                      include_timer_only_keys=True, **replay), WITH_HAS_STATE) == \
        states(whole_final, WITH_HAS_STATE)


@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_final_state_has_read_states_columns_and_values(spark, operator, tmp_path):
    """The same state read two ways: a replay's final_state, and read_state of a stream that
    ran the same records, one file per micro-batch (no expiry: batch times do not matter)."""
    run = OPERATORS[operator]
    groups = operator == "map_groups_with_state"
    rows = events(3, batches=5)
    counted = spec(groups, "idle").timeout("3650 days")
    final = run(spark.createDataFrame(rows, SCHEMA), key="user", spec=counted,
                batch_time="ts", output="final_state")
    stream = Stream(str(tmp_path))
    for t in sorted({r[2] for r in rows}):
        stream.add_records({"user": u, "amount": a} for u, a, ts in rows if ts == t)
    source = spark.readStream.schema("user STRING, amount BIGINT") \
        .option("maxFilesPerTrigger", 1).json(stream.input)
    stream.run_available_now(run(source, key="user", spec=counted))
    read = mws.read_state(spark, stream.checkpoint)
    assert read.columns == final.columns + ["partition"]
    assert [f.dataType for f in read.schema.fields[:-1]] == \
        [f.dataType for f in final.schema.fields]
    # Equal but for last_updated: the replay's batch times are the data's, the stream's its
    # own; each key's is the time of the batch that last saw it in either.
    assert states(final.drop("last_updated").withColumn("last_updated", F.lit(None))) == \
        states(read.drop("last_updated").withColumn("last_updated", F.lit(None)))
    last_seen = {}
    for u, _, t in rows:
        last_seen[u] = max(t, last_seen.get(u, t))
    assert {r.user: r.last_updated for r in final.collect()} == last_seen
    assert all(r.timeout_at is None for r in final.collect())


# The reference replay's stand-in for a no-data micro-batch: a record of a key of its own, with
# no event time, at the batch's time. It makes the batch (a replay's batches are its records'
# times) without moving the watermark or touching another key; its own rows are left out.
TICK = "tick"


@pytest.mark.connect_only
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
@pytest.mark.parametrize("expiry", ["idle", "timers", "event_time"])
@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_a_stream_started_from_the_final_state_continues_one_replay(
        spark, operator, expiry, backend, tmp_path):
    """A file stream started from a replay's final state emits what one replay of the history
    and the stream's records emits, its live batches the stream's micro-batches as its offset
    log records them: at their wall-clock times, and with event-time timers its no-data
    micro-batches too. Spark runs one after a batch that moved the watermark
    (``spark.sql.streaming.noDataMicroBatches.enabled``, on by default, as here): no records,
    the new watermark, and the event-time timers it passes fire; the reference has a batch at
    its time (a ``TICK`` record). With event time the stream runs twice (a restart between),
    so a no-data batch comes between data batches too. The state after equals the reference's,
    read back on either backend, keys holding only a timer included."""
    run = OPERATORS[operator]
    groups = operator == "map_groups_with_state"
    event_time = expiry == "event_time"
    # The history ends 45 minutes before now, a batch every five minutes: against a one-hour
    # idle time, some of its keys expire in the stream's first batch and others go on. With
    # event time each record's is up to six seconds before its batch time, and the live
    # records' go on from the history's last batch time, two seconds a file, up to six seconds
    # before that too: against three seconds of event-time idleness and two of delay, timers
    # set late in the history fire live, and some live records are late by its watermark.
    now = datetime.now().replace(microsecond=0)
    seed = 8 if event_time else 11  # with event time, one leaving keys holding only a timer
    history = events(seed, batches=12, start=now - timedelta(minutes=100),
                     step=timedelta(minutes=5), users=8)
    live_rng = random.Random(12)
    live_files = [[(f"u{live_rng.randrange(10)}", live_rng.randint(1, 9)) for _ in range(3)]
                  for _ in range(4)]
    watermark = None
    if event_time:
        history = with_event_times(seed, history)
        last = history[-1][2]
        live_files = [[(u, a, last + timedelta(seconds=2 * i - live_rng.randint(0, 6)))
                       for u, a in records] for i, records in enumerate(live_files)]

    def built():
        return spec(groups, expiry, idle="3 seconds" if event_time else "1 hour") \
            .backend(backend)

    history_df = frame(spark, history, event_time)
    final = run(history_df, key="user", spec=built(), batch_time="ts", output="final_state",
                include_timer_only_keys=True)
    if event_time:
        (row,) = run(history_df, key="user", spec=built(), batch_time="ts",
                     output="final_watermark").collect()
        watermark = row.watermark
    stream = Stream(str(tmp_path))

    def live():
        if not event_time:
            source = spark.readStream.schema("user STRING, amount BIGINT") \
                .option("maxFilesPerTrigger", 1).json(stream.input)
        else:
            source = spark.readStream.schema("user STRING, amount BIGINT, e BIGINT") \
                .option("maxFilesPerTrigger", 1).json(stream.input) \
                .select("user", "amount", F.timestamp_millis("e").alias("et")) \
                .withWatermark("et", DELAY)
        return run(source, key="user", spec=resume(built(), final, expiry, watermark))

    queries = []
    for files in [live_files[:2], live_files[2:]] if event_time else [live_files]:
        for records in files:
            stream.add_records({"user": r[0], "amount": r[1],
                                **({"e": round(r[2].timestamp() * 1000)} if event_time else {})}
                               for r in records)
        queries.append(stream.run_available_now(live()))

    # The reference: one replay of the history and the live records, each live file at the
    # time of the micro-batch that read it, and a batch at each no-data micro-batch's time.
    batches = micro_batches(stream.checkpoint)
    assert [i for b in batches for i in b.files] == list(range(len(live_files)))
    no_data = {datetime.fromtimestamp(b.time_ms / 1000) for b in batches if not b.files}
    if event_time:
        assert no_data
    else:  # A terminating trigger runs the batches its data needs and no more.
        assert all(len(b.files) == 1 for b in batches)
    stamped = [(u, a, datetime.fromtimestamp(b.time_ms / 1000), *et)
               for b in batches for i in b.files for u, a, *et in live_files[i]]
    whole = frame(spark, history + stamped + [(TICK, 0, t, None) for t in no_data], event_time)
    reference = run(whole, key="user", spec=built(), batch_time="ts")
    live_start = datetime.fromtimestamp(batches[0].time_ms / 1000)
    expected = [r for r in emitted(reference) if r[4] >= live_start and r[0] != TICK]
    schema = "user STRING, n BIGINT, total BIGINT, timing_out BOOLEAN, bt TIMESTAMP" + \
        (", wm TIMESTAMP" if event_time else "")
    got = sorted((tuple(r) for r in spark.read.schema(schema).json(stream.output).collect()),
                 key=nulls_first)
    assert got == expected
    # Not vacuous: history keys both expired in the stream and went on in it (a count above
    # the key's live records so far carries the history's).
    history_users = {r[0] for r in history}
    assert any(r[3] and r[0] in history_users for r in got)
    assert any(not r[3] and r[1] > sum(s[0] == r[0] and s[2] <= r[4] for s in stamped)
               for r in got)
    if event_time:
        # The first live batch runs with the history's watermark (Spark's own is 0 there).
        assert batches[0].watermark_ms == 0
        first = [r for r in got if r[4] == live_start]
        assert first and all(r[5] == watermark for r in first)
        # Some live records are late: at or before their batch's watermark, the later of the
        # history's and the stream's own; they emit nothing (as in the reference) and count
        # as dropped by the watermark.
        late = [r for b in batches for i in b.files for r in live_files[i]
                if r[2] <= max(watermark, datetime.fromtimestamp(b.watermark_ms / 1000))]
        assert late
        assert sum(o.numRowsDroppedByWatermark for q in queries for p in q.recentProgress
                   for o in p.stateOperators) == len(late)
        # Timers fire live, in no-data batches too, and so do the history's timer-only keys'
        # (a timing-out call with no state: null counts).
        assert any(r[3] and r[4] in no_data for r in got)
        timer_only = {r.user for r in final.collect() if not r.has_state}
        assert timer_only
        assert any(r[3] and r[1] is None and r[0] in timer_only for r in got)
    reference_final = run(whole, key="user", spec=built(), batch_time="ts",
                          output="final_state", include_timer_only_keys=True) \
        .where(F.col("user") != TICK)
    read = mws.read_state(spark, stream.checkpoint, include_timer_only_keys=True)
    assert read.columns == WITH_HAS_STATE + ["partition"]
    assert states(read, WITH_HAS_STATE) == states(reference_final, WITH_HAS_STATE)
    # By default read_state leaves out the keys holding only a timer.
    assert states(mws.read_state(spark, stream.checkpoint)) == \
        states(reference_final.where("has_state"))


def test_read_state_resumes_as_is(spark, tmp_path):
    """read_state's rows, partition column included, are an initial state as they are."""
    stream = Stream(str(tmp_path / "first"))
    stream.add_records([{"user": "a", "amount": 2}, {"user": "b", "amount": 3}])
    source = spark.readStream.schema("user STRING, amount BIGINT") \
        .option("maxFilesPerTrigger", 1).json(stream.input)
    counted = spec(False, "idle", idle="3650 days")
    stream.run_available_now(map_with_state(source, key="user", spec=counted))
    read = mws.read_state(spark, stream.checkpoint)
    assert "partition" in read.columns
    more = spark.createDataFrame([("a", 5, T0)], SCHEMA)
    out = map_with_state(more, key="user",
                         spec=counted.initial_state(read, last_updated="last_updated"),
                         output="final_state")
    assert sorted((r.user, r.n, r.total) for r in out.collect()) == [("a", 2, 7), ("b", 1, 3)]


def test_a_group_function_does_not_call_resumed_keys_without_records(spark):
    # Seeded (no last_updated), flatMapGroupsWithState calls every initial key in the first
    # batch; resumed, a key is called by its records only (b has none).
    initial = spark.createDataFrame([("a", 1, 10, T0, None), ("b", 1, 20, T0, None)],
                                    "user STRING, n BIGINT, total BIGINT, "
                                    "last_updated TIMESTAMP, timeout_at TIMESTAMP")
    more = spark.createDataFrame([("a", 5, T0 + timedelta(seconds=1))], SCHEMA)
    counted = spec(True, "idle", idle="3650 days")
    seeded = map_groups_with_state(
        more, key="user", spec=counted.initial_state(initial.select("user", "n", "total")))
    resumed = map_groups_with_state(
        more, key="user", spec=counted.initial_state(initial, last_updated="last_updated"))
    assert [r[0] for r in emitted(seeded)] == ["a", "b"]
    assert [r[:3] for r in emitted(resumed)] == [("a", 2, 15)]


def test_the_idle_clock_runs_from_last_updated(spark):
    # Both keys resumed, idle 3 s, scanned every batch: a was last updated at 0 s, b at 4 s, so
    # at the batch at 5 s only a has been idle past 3 s; without its last_updated a key's clock
    # would start at 5 s.
    initial = spark.createDataFrame(
        [("a", 1, 1, T0, None), ("b", 1, 1, T0 + timedelta(seconds=4), None)],
        "user STRING, n BIGINT, total BIGINT, last_updated TIMESTAMP, timeout_at TIMESTAMP")
    more = spark.createDataFrame([("c", 1, T0 + timedelta(seconds=5))], SCHEMA)
    out = map_with_state(more, key="user",
                         spec=spec(False, "idle").initial_state(initial,
                                                                last_updated="last_updated"),
                         batch_time="ts")
    assert [(r[0], r[3]) for r in emitted(out)] == [("a", True), ("c", False)]
    seeded = map_with_state(more, key="user",
                            spec=spec(False, "idle").initial_state(
                                initial.select("user", "n", "total")),
                            batch_time="ts")
    assert [(r[0], r[3]) for r in emitted(seeded)] == [("c", False)]


@mws.state_function("n BIGINT")
def group_count(user, rows, state):
    if state.timing_out:
        return {"user": user, "n": state.n, "timing_out": True}
    state.update(n=(state.n or 0) + len(rows))
    return {"user": user, "n": state.n, "timing_out": False}


def test_mapwithstate_testing_resumes_as_the_server_does(spark):
    # A resumed group function: b is not called for its initial state, a's idle clock runs from
    # its last_updated (idle past 3 s at 5 s), b's does not time it out yet.
    initial = [("a", 1, T0, None), ("b", 2, T0 + timedelta(seconds=4), None)]
    initial_df = spark.createDataFrame(
        initial, "user STRING, n BIGINT, last_updated TIMESTAMP, timeout_at TIMESTAMP")
    resumed = group_count.timeout("3 seconds").checkpoint_interval(1) \
        .initial_state(initial_df, last_updated="last_updated")
    records = [("c", T0 + timedelta(seconds=5)), ("b", T0 + timedelta(seconds=6))]
    on_server = map_groups_with_state(spark.createDataFrame(records, "user STRING, ts TIMESTAMP"),
                                      key="user", spec=resumed, batch_time="ts")
    in_python = python_replay(resumed, [{"user": u, "ts": t} for u, t in records], key="user",
                              batch_time="ts")
    expected = [("a", 1, True), ("b", 3, False), ("c", 1, False)]
    assert sorted(tuple(r) for r in on_server.collect()) == expected
    assert sorted(tuple(d.values()) for b in in_python for d in b.emitted) == expected


THREE_SECONDS = timedelta(seconds=3)


@mws.state_function("n BIGINT")
def event_count(user, et, state):
    if state.timing_out:
        return {"user": user, "n": state.n, "wm": state.watermark}
    state.update(n=(state.n or 0) + 1)
    state.set_timer(et + THREE_SECONDS)
    return {"user": user, "n": state.n, "wm": state.watermark}


def test_mapwithstate_testing_resumes_timers_and_the_watermark_as_the_server_does(spark):
    # Resumed: b holds only a timer (5 s), which the resumed watermark (10 s) has passed, so it
    # fires in the first batch (no state: n null); a's record (8 s) is late by that watermark;
    # c's (12 s) is not, and sees the resumed watermark.
    initial = spark.createDataFrame(
        [("b", None, None, T0 + timedelta(seconds=5), False),
         ("d", 4, None, T0 + timedelta(seconds=30), True)],
        "user STRING, n BIGINT, last_updated TIMESTAMP, timeout_at TIMESTAMP, has_state BOOLEAN")
    wm = T0 + timedelta(seconds=10)
    resumed = event_count.timeout_domain("event_time").initial_state(
        initial, timeout_at="timeout_at", last_updated="last_updated", has_state="has_state",
        watermark=wm)
    records = [("a", T0 + timedelta(seconds=8), T0 + timedelta(seconds=20)),
               ("c", T0 + timedelta(seconds=12), T0 + timedelta(seconds=20))]
    df = spark.createDataFrame(records, "user STRING, et TIMESTAMP, ts TIMESTAMP") \
        .withWatermark("et", DELAY)
    on_server = map_with_state(df, key="user", spec=resumed, batch_time="ts", value="et")
    in_python = python_replay(resumed, [{"user": u, "et": e, "ts": t} for u, e, t in records],
                              key="user", batch_time="ts", event_time="et",
                              watermark_delay=DELAY)
    expected = [("b", None, wm), ("c", 1, wm)]
    assert sorted((tuple(r) for r in on_server.collect()), key=nulls_first) == expected
    assert sorted((tuple(d.values()) for b in in_python for d in b.emitted),
                  key=nulls_first) == expected


@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_a_replay_of_one_batch_runs_with_the_resumed_watermark(spark, operator):
    """Without batch_time a replay is one batch, with no watermark of its own: it runs with the
    resumed one, so rows at or before it are late (dropped, before a group function's
    aggregates: a key whose rows all are is not called), later ones are not, and the calls see
    it; a's timer, after it, does not fire."""
    w = T0 + timedelta(seconds=10)
    final = spark.createDataFrame(
        [("a", 1, 1, None, w + timedelta(seconds=5), True)],
        "user STRING, n BIGINT, total BIGINT, last_updated TIMESTAMP, timeout_at TIMESTAMP, "
        "has_state BOOLEAN")
    records = [("a", 2, T0, w), ("b", 3, T0, w - timedelta(seconds=1)),
               ("b", 4, T0, w + timedelta(seconds=1)), ("c", 5, T0, w + timedelta(seconds=2))]
    resumed = resume(spec(operator == "map_groups_with_state", "event_time"), final,
                     "event_time", watermark=w)
    out = OPERATORS[operator](frame(spark, records, True), key="user", spec=resumed)
    assert [r[:4] + r[5:] for r in emitted(out)] == [("b", 1, 4, False, w), ("c", 1, 5, False, w)]


@pytest.mark.connect_only
def test_final_state_is_refused_on_a_stream(spark, tmp_path):
    stream = Stream(str(tmp_path))
    source = spark.readStream.schema("user STRING, amount BIGINT").json(stream.input)
    with pytest.raises(PySparkException, match="output='final_state' is for batch DataFrames"):
        map_with_state(source, key="user", spec=spec(False, "idle"),
                       output="final_state").schema


def test_initial_state_refuses_other_extra_columns(spark):
    initial = spark.createDataFrame([("a", 1, 1, T0, None, 0, "x")],
                                    "user STRING, n BIGINT, total BIGINT, last_updated TIMESTAMP, "
                                    "timeout_at TIMESTAMP, partition INT, note STRING")
    more = spark.createDataFrame([("a", 5, T0)], SCHEMA)
    with pytest.raises(PySparkException, match="neither key columns nor state fields: note"):
        map_with_state(more, key="user", spec=spec(False, "idle").initial_state(
            initial, last_updated="last_updated")).collect()
    # Without last_updated it is a seeded initial state: read_state's columns are extra too.
    with pytest.raises(PySparkException, match="neither key columns nor state fields"):
        map_with_state(more, key="user", spec=spec(False, "idle").initial_state(
            initial.drop("note"))).collect()
    # has_state not named: taking the row as a state would resume a timer-only key as a key
    # with an all-null state, so it is refused, saying how to take it.
    with_has_state = initial.drop("note").withColumn("has_state", F.lit(False))
    with pytest.raises(PySparkException,
                       match="neither key columns nor state fields: has_state.*name has_state"):
        map_with_state(more, key="user", spec=spec(False, "idle").initial_state(
            with_has_state, last_updated="last_updated")).collect()


@pytest.mark.connect_only
def test_a_stream_keeps_the_resumed_watermark_after_a_restart(spark, tmp_path):
    """The resumed watermark W holds in every micro-batch, also after the query restarts from
    its checkpoint with the same spec, until the stream's own passes it: a record at or before
    W is late though the stream's own watermark is below it."""
    w = T0 + timedelta(minutes=10)
    final = spark.createDataFrame(
        [("a", 1, 1, None, w + timedelta(seconds=5), True)],
        "user STRING, n BIGINT, total BIGINT, last_updated TIMESTAMP, timeout_at TIMESTAMP, "
        "has_state BOOLEAN")
    stream = Stream(str(tmp_path))
    source = spark.readStream.schema("user STRING, amount BIGINT, e BIGINT") \
        .option("maxFilesPerTrigger", 1).json(stream.input) \
        .select("user", "amount", F.timestamp_millis("e").alias("et")) \
        .withWatermark("et", DELAY)
    resumed = resume(spec(False, "event_time"), final, "event_time", watermark=w)

    def add(*records):
        stream.add_records({"user": u, "amount": 1, "e": round((w + d).timestamp() * 1000)}
                           for u, d in records)

    # b is late by W only (the stream has no watermark of its own yet); c is not.
    add(("b", -timedelta(seconds=60)), ("c", timedelta(seconds=1)))
    stream.run_available_now(map_with_state(source, key="user", spec=resumed))
    # Restarted: the stream's own watermark is now W - 1 s, below d's event time; W is not.
    add(("d", -timedelta(milliseconds=500)), ("e", timedelta(seconds=2)))
    stream.run_available_now(map_with_state(source, key="user", spec=resumed))
    schema = "user STRING, n BIGINT, total BIGINT, timing_out BOOLEAN, bt TIMESTAMP, wm TIMESTAMP"
    got = sorted((r.user, r.n, r.wm)
                 for r in spark.read.schema(schema).json(stream.output).collect())
    assert got == [("c", 1, w), ("e", 1, w)]


def test_bad_arguments_say_what_is_wrong(spark):
    counted = spec(False, "idle")
    df = spark.createDataFrame([("a", 1, T0)], SCHEMA)
    with pytest.raises(TypeError, match="initial_state's last_updated must be a column name"):
        counted.initial_state(df, last_updated=3)
    with pytest.raises(ValueError, match="final_state"):
        map_with_state(df, key="user", spec=counted, output="final")
    initial = spark.createDataFrame([("a", 1, 1, "yesterday")],
                                    "user STRING, n BIGINT, total BIGINT, at STRING")
    with pytest.raises(PySparkException, match="initial_state column 'at' is STRING"):
        map_with_state(df, key="user", spec=counted.initial_state(initial, last_updated="at"),
                       batch_time="ts").collect()
    with pytest.raises(PySparkException, match="initial_state has no column 'seen'"):
        map_with_state(df, key="user", spec=counted.initial_state(
            initial.drop("at"), last_updated="seen"), batch_time="ts").collect()
    with pytest.raises(ValueError, match="include_timer_only_keys is for output='final_state'"):
        map_with_state(df, key="user", spec=counted, include_timer_only_keys=True)
    with pytest.raises(ValueError, match="has_state resume state read back.*last_updated"):
        counted.initial_state(initial, has_state="has_state")
    with pytest.raises(TypeError, match="initial_state's watermark must be a datetime"):
        counted.initial_state(initial, last_updated="at", watermark=3)
    resumed = spark.createDataFrame([("a", 1, 1, None, None, "no")],
                                    "user STRING, n BIGINT, total BIGINT, last_updated TIMESTAMP, "
                                    "timeout_at TIMESTAMP, has_state STRING")
    with pytest.raises(PySparkException,
                       match="initial_state column 'has_state' is STRING, which cannot be "
                             "safely cast to BOOLEAN"):
        map_with_state(df, key="user", spec=counted.initial_state(
            resumed, last_updated="last_updated", has_state="has_state"),
            batch_time="ts").collect()
    # A watermark, resumed or a replay's final one, needs the input's event-time watermark.
    with pytest.raises(PySparkException, match="initial_state's watermark resumes an event-time "
                                               "watermark, but the input has none"):
        map_with_state(df, key="user", spec=counted.initial_state(
            resumed.drop("has_state"), last_updated="last_updated", watermark=T0),
            batch_time="ts").collect()
    with pytest.raises(PySparkException, match="output='final_watermark' is the replay's "
                                               "event-time watermark after its last batch, but "
                                               "the input has none"):
        map_with_state(df, key="user", spec=counted, batch_time="ts",
                       output="final_watermark").collect()

