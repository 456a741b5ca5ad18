"""De-duplication within a window: an event passes unless the same id was seen in the ten
minutes before it; the id is forgotten once the watermark passes the window, so the state
holds only the ids that can still have duplicates.
"""
from datetime import datetime, timedelta

import mapwithstate as mws

WINDOW = timedelta(minutes=10)


@mws.state_function("first_seen TIMESTAMP")
def dedup(event_id, ts, payload, state):
    if state.timing_out:  # the window has passed: forget the id
        state.remove()
        return None
    if state.exists and ts - state.first_seen < WINDOW:
        return None  # a duplicate
    state.update(first_seen=ts)
    state.set_timer(ts + WINDOW)
    return {"event_id": event_id, "ts": ts, "payload": payload}


deduplicate = dedup.timeout_domain("event_time")


def run(spark):
    t0 = datetime(2026, 1, 1, 9, 0)
    events = spark.createDataFrame(
        [("e1", t0, "a"), ("e2", t0 + timedelta(minutes=1), "b"),
         ("e1", t0 + timedelta(minutes=2), "a again"),       # within 10 minutes: dropped
         ("e1", t0 + timedelta(minutes=30), "a, later"),     # after the window: passes
         ("e2", t0 + timedelta(minutes=31), "b, later")],
        "event_id STRING, ts TIMESTAMP, payload STRING").withWatermark("ts", "5 minutes")
    unique = mws.map_with_state(events, key="event_id", spec=deduplicate, batch_time="ts")
    unique.orderBy("ts").show()
    assert [r.payload for r in unique.orderBy("ts").collect()] == [
        "a", "b", "a, later", "b, later"]


if __name__ == "__main__":
    run(mws.local_session())
