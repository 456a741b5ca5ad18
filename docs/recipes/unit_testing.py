"""Unit-testing a state function without Spark: ``mapwithstate.testing`` runs the very function
that ``map_with_state`` compiles, in plain Python, with the operator's semantics (record order,
idle timeouts, timers in both domains, watermarks, initial state), in milliseconds — a plain
pytest test, no server.
"""
from datetime import datetime, timedelta

import mapwithstate as mws
from mapwithstate.testing import Tester, replay


@mws.state_function("clicks BIGINT, converted BOOLEAN")
def session(user, page, state):
    if state.timing_out:
        return {"user": user, "clicks": state.clicks, "converted": state.converted}
    state.update(clicks=(state.clicks or 0) + 1,
                 converted=bool(state.converted) or page == "checkout")


def test_a_session_closes_after_its_timeout():
    tester = Tester(session.timeout("30 seconds").checkpoint_interval(1), key="user")
    t0 = datetime(2026, 1, 1)
    first = tester.batch([{"user": "u1", "page": "home"}], batch_time=t0)
    assert first.emitted == [] and first.state == {"u1": {"clicks": 1, "converted": False}}
    tester.batch([{"user": "u1", "page": "checkout"}], batch_time=t0 + timedelta(seconds=10))
    closed = tester.batch([], batch_time=t0 + timedelta(seconds=41))
    assert closed.emitted == [{"user": "u1", "clicks": 2, "converted": True}]
    assert closed.state == {}


def test_a_replay_of_recorded_clicks():
    t0 = datetime(2026, 1, 1)
    clicks = [{"user": "u1", "page": "home", "ts": t0},
              {"user": "u1", "page": "cart", "ts": t0 + timedelta(minutes=5)}]
    batches = replay(session.timeout("30 seconds").checkpoint_interval(1), clicks, key="user",
                     batch_time="ts", batch_interval=timedelta(seconds=10))
    emitted = [row for batch in batches for row in batch.emitted]
    # The gap of five minutes closes the first session; the second is still open.
    assert emitted == [{"user": "u1", "clicks": 1, "converted": False}]


def run(spark=None):
    """Runs the tests above (what ``pytest docs/recipes/unit_testing.py`` does)."""
    test_a_session_closes_after_its_timeout()
    test_a_replay_of_recorded_clicks()


if __name__ == "__main__":
    run()
