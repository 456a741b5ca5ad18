"""The realistic state functions of examples/state_functions.py, unit-tested in plain Python
with mapwithstate.testing, as a user would test theirs (no server)."""
import os
import sys
from datetime import datetime, timedelta

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))

from examples.state_functions import deduplicate, fraud, session, sla, top_scores  # noqa: E402
from mapwithstate.testing import Tester, replay  # noqa: E402

T0 = datetime(2026, 1, 1)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def test_a_session_closes_with_its_idle_timeout_and_says_whether_it_converted():
    tester = Tester(session.timeout("30 seconds").checkpoint_interval(1), key="user")
    tester.batch([{"user": "u1", "page": "home", "ts": at(0)},
                  {"user": "u2", "page": "home", "ts": at(0)}], at(0))
    tester.batch([{"user": "u1", "page": "checkout", "ts": at(20)}], at(20))
    closed = tester.batch([], at(31))
    assert closed.emitted == [
        {"user": "u2", "clicks": 1, "started": at(0), "converted": False}]
    closed = tester.batch([], at(51))
    assert closed.emitted == [
        {"user": "u1", "clicks": 2, "started": at(0), "converted": True}]
    assert tester.state == {}


def test_the_fraud_rule_flags_an_amount_over_three_times_the_recent_average():
    amounts = [10.0, 12.0, 8.0, 100.0, 9.0, 11.0, 10.0, 10.0, 20.0]
    results = replay(fraud, [{"card": "c", "amount": a, "t": at(i)}
                             for i, a in enumerate(amounts)], key="card", batch_time="t")
    alerts = [r for b in results for r in b.emitted]
    assert alerts == [{"card": "c", "amount": 100.0, "average": 10.0}]
    assert results[-1].state == {"c": {"amounts": [9.0, 11.0, 10.0, 10.0, 20.0]}}


def test_duplicates_within_the_window_are_dropped_until_the_watermark_passes_it():
    minutes = [("e1", 0), ("e1", 5), ("e2", 6), ("e1", 40), ("e1", 41), ("e2", 90)]
    results = replay(deduplicate, [{"event_id": e, "ts": at(60 * m), "payload": "p",
                                    "t": at(i)} for i, (e, m) in enumerate(minutes)],
                     key="event_id", batch_time="t", event_time="ts",
                     watermark_delay="1 minute")
    passed = [(r["event_id"], r["ts"]) for b in results for r in b.emitted]
    assert passed == [("e1", at(0)), ("e2", at(360)), ("e1", at(2400)), ("e2", at(5400))]
    assert sorted(results[-1].timers) == ["e1", "e2"]


def test_top_scores_keep_the_best_three_across_batches():
    results = replay(top_scores, [{"player": "p", "score": s, "t": at(i // 3)}
                                  for i, s in enumerate([5, 1, None, 7, 3, 9])],
                     key="player", batch_time="t")
    assert [b.emitted for b in results] == [
        [{"player": "p", "top": [1, 5], "best": 5, "new": 2}],
        [{"player": "p", "top": [5, 7, 9], "best": 9, "new": 3}]]


def test_an_order_not_shipped_within_its_sla_raises_an_alert():
    hours = [("o1", "placed", 0), ("o2", "placed", 0), ("o2", "shipped", 1),
             ("o3", "placed", 1), ("o3", "shipped", 4), ("x", "paid", 6)]
    results = replay(sla, [{"order_id": o, "status": s, "ts": at(3600 * h), "t": at(i)}
                           for i, (o, s, h) in enumerate(hours)],
                     key="order_id", batch_time="t", event_time="ts",
                     watermark_delay="10 minutes")
    alerts = [(r["order_id"], r["alert"]) for b in results for r in b.emitted]
    assert alerts == [("o3", "shipped late"), ("o1", "not shipped in time")]
