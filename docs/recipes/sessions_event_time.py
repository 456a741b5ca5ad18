"""Sessionization in event time: a session closes once the watermark passes its last click
plus the gap, whatever the clock says — the right choice when data arrives late or is
replayed. An event-time timer (``state.set_timer``) does it; ``withWatermark`` bounds how late
a click may come.
"""
from datetime import datetime, timedelta

import mapwithstate as mws

GAP = timedelta(minutes=5)


@mws.state_function("clicks BIGINT, started TIMESTAMP, last TIMESTAMP")
def session(user, ts, state):
    if state.timing_out:  # the watermark passed the session's end: close it
        yield {"user": user, "clicks": state.clicks, "started": state.started,
               "ended": state.last}
        state.remove()
        return
    if state.exists and ts > state.last + GAP:
        # A click after the gap, in a batch whose watermark has not yet passed the session's
        # end (the watermark trails the data): close the session now, start a new one.
        yield {"user": user, "clicks": state.clicks, "started": state.started,
               "ended": state.last}
        state.update(clicks=1, started=ts, last=ts)
    else:
        state.update(clicks=(state.clicks or 0) + 1,
                     started=state.started if state.exists else ts, last=ts)
    state.set_timer(ts + GAP)  # fires once the watermark is past it


sessions = session.timeout_domain("event_time")


def run(spark):
    t0 = datetime(2026, 1, 1, 9, 0)
    at = [t0 + timedelta(minutes=m) for m in (0, 2, 3, 20, 21, 40, 60)]
    clicks = spark.createDataFrame(
        [("u1", at[0]), ("u1", at[1]), ("u2", at[2]), ("u1", at[3]), ("u2", at[4]),
         ("u3", at[5]), ("u4", at[6])],
        "user STRING, ts TIMESTAMP").withWatermark("ts", "1 minute")
    # Each distinct event time is a batch of the replay. A batch's watermark is the largest
    # event time of the batches before it minus the delay, as a stream computes it.
    closed = mws.map_with_state(clicks, key="user", spec=sessions, batch_time="ts")
    closed.orderBy("ended").show()
    # The click at 9:20 closes u1's first session (9:00 to 9:02), the click at 9:21 u2's (9:03);
    # their second sessions close by timer in the batch at 10:00, whose watermark (9:39) is past
    # 9:25 and 9:26. u3's session (9:40) and u4's are still open when the data ends.
    assert sorted(tuple(r) for r in closed.collect()) == [
        ("u1", 1, at[3], at[3]),
        ("u1", 2, at[0], at[1]),
        ("u2", 1, at[2], at[2]),
        ("u2", 1, at[4], at[4]),
    ]


if __name__ == "__main__":
    run(mws.local_session())
