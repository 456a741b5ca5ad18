"""Sessionization in processing time: a user's session closes once no click came for 30
seconds (an idle timeout), and its summary is emitted then.

Replayed here over recorded clicks (``batch_time=`` cuts them into batches, ``batch_interval=``
adds the empty batches between them, so the timeout fires when it would have live); on a stream
the same spec runs unchanged.
"""
from datetime import datetime, timedelta

import mapwithstate as mws


@mws.state_function("clicks BIGINT, started TIMESTAMP, converted BOOLEAN")
def session(user, page, ts, state):
    if state.timing_out:  # no click for the timeout: the session's last call
        return {"user": user, "clicks": state.clicks, "started": state.started,
                "converted": state.converted}
    state.update(clicks=(state.clicks or 0) + 1,
                 started=state.started if state.exists else ts,
                 converted=bool(state.converted) or page == "checkout")


# Timed-out keys are looked for every checkpoint_interval-th batch (10 by default, as DStream's
# mapWithState): every batch here, so a session closes in the first batch after its timeout.
sessions = session.timeout("30 seconds").checkpoint_interval(1)


def run(spark):
    t0 = datetime(2026, 1, 1, 9, 0)
    clicks = spark.createDataFrame(
        [("u1", "home", t0), ("u1", "checkout", t0 + timedelta(seconds=10)),
         ("u2", "home", t0 + timedelta(seconds=20)),
         ("u2", "search", t0 + timedelta(seconds=90))],
        "user STRING, page STRING, ts TIMESTAMP")
    closed = mws.map_with_state(clicks, key="user", spec=sessions,
                                batch_time="ts", batch_interval="10 seconds")
    closed.show()
    # u1's last click was at 9:00:10: its session closes in the batch at 9:00:50, the first
    # whose time is more than 30 seconds later. u2 clicked again at 9:01:30, after its own
    # timeout: a first session of one click closed at 9:01:00, the second is still open.
    assert sorted(tuple(r) for r in closed.collect()) == [
        ("u1", 2, t0, True),
        ("u2", 1, t0 + timedelta(seconds=20), False),
    ]


if __name__ == "__main__":
    run(mws.local_session())
