"""Backfill with event-time timers, then go live: de-duplicate events within a ten-minute
window over a recorded history, then over the live stream, as one run over both would. Two
things cross from the replay to the stream besides the state's rows: the keys holding only a
timer (here every key: the timer alone remembers an id until its window ends) and the
event-time watermark, below which live events are late.
"""
import os
import tempfile
from datetime import datetime, timedelta

import mapwithstate as mws

WINDOW = timedelta(minutes=10)


# No state is kept: an id's timer, set at the end of its window, is what remembers it.
@mws.state_function("unused BOOLEAN")
def dedup(event_id, ts, payload, state):
    if state.timing_out:  # the window has passed: the id is forgotten with its timer
        return None
    if state.timer is not None and ts < state.timer:
        return None  # seen within the window: a duplicate
    state.set_timer(ts + WINDOW)
    return {"event_id": event_id, "ts": ts, "payload": payload}


deduplicate = dedup.timeout_domain("event_time")
SCHEMA = "event_id STRING, ts TIMESTAMP, payload STRING"


def run(spark, work=None):
    work = work or tempfile.mkdtemp()
    t0 = datetime(2026, 1, 1, 9, 0)
    history = spark.createDataFrame(
        [("e1", t0, "a"), ("e2", t0 + timedelta(minutes=1), "b"),
         ("e1", t0 + timedelta(minutes=2), "a again"),       # within 10 minutes: dropped
         ("e1", t0 + timedelta(minutes=30), "a, later"),     # after the window: passes
         ("e2", t0 + timedelta(minutes=31), "b, later")],
        SCHEMA).withWatermark("ts", "5 minutes")

    # 1. The backfill: the ids still remembered (timer-only keys, so asked for) and the
    #    watermark the history leaves: its latest event time (9:31) less the delay.
    replay = dict(key="event_id", spec=deduplicate, batch_time="ts")
    final = mws.map_with_state(history, output="final_state", include_timer_only_keys=True,
                               **replay)
    (last,) = mws.map_with_state(history, output="final_watermark", **replay).collect()
    assert last.watermark == t0 + timedelta(minutes=26)
    final_path = os.path.join(work, "final_state")
    final.write.parquet(final_path)
    remembered = spark.read.parquet(final_path)
    assert sorted((r.event_id, r.has_state, r.timeout_at) for r in remembered.collect()) == [
        ("e1", False, t0 + timedelta(minutes=40)), ("e2", False, t0 + timedelta(minutes=41))]

    # 2. Go live: a replayed e2 is still a duplicate, e0 is older than the watermark (late),
    #    e3 is new.
    live_dir = os.path.join(work, "live")
    spark.createDataFrame(
        [("e2", t0 + timedelta(minutes=35), "b, replayed"),
         ("e0", t0 + timedelta(minutes=20), "too late"),
         ("e3", t0 + timedelta(minutes=36), "c")], SCHEMA).write.parquet(live_dir)
    live = spark.readStream.schema(SCHEMA).parquet(live_dir).withWatermark("ts", "5 minutes")
    resumed = deduplicate.initial_state(remembered, timeout_at="timeout_at",
                                        last_updated="last_updated", has_state="has_state",
                                        watermark=last.watermark)
    unique = mws.map_with_state(live, key="event_id", spec=resumed)
    query = (unique.writeStream.format("memory").queryName("unique_events")
             .option("checkpointLocation", os.path.join(work, "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.sql("SELECT event_id, payload FROM unique_events").collect()
    assert [tuple(r) for r in rows] == [("e3", "c")]


if __name__ == "__main__":
    run(mws.local_session())
