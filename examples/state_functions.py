"""Five state functions written in plain Python, as a data engineer writes them: compiled by
``mws.state_function`` into the plugin's Column form, they run natively on the executors with
``map_with_state`` (per record) or ``map_groups_with_state`` (per key and batch), and
``mapwithstate.testing`` runs the very same functions in plain Python for unit tests.

- :data:`sessions`: sessionization with a conversion flag, closed by an idle timeout;
- :data:`fraud`: a rule over the last five amounts of each card (a capped list);
- :data:`deduplicate`: de-duplication within a time window, forgotten by an event-time timer;
- :data:`top_scores`: the top three scores of each player, per batch of scores;
- :data:`sla`: an alert when an order is not shipped within its SLA (an event-time timer).

    from mapwithstate import map_with_state
    from examples.state_functions import sessions
    map_with_state(clicks, key="user", spec=sessions, batch_time="ts", batch_interval="10 seconds")

``tests/test_pyfunc_differential.py`` runs each one on random inputs both ways, through the
server and through ``mapwithstate.testing``, and compares their outputs batch by batch.
"""
from datetime import timedelta

import mapwithstate as mws

#: How many amounts of a card the fraud rule remembers.
HISTORY = 5
#: An amount this many times the card's recent average is suspicious.
FACTOR = 3
#: Events with the same id within this window are duplicates.
WINDOW = timedelta(minutes=10)
#: How many scores a player's leaderboard keeps.
TOP = 3
#: The time an order has from "placed" to "shipped".
SLA = timedelta(hours=2)


@mws.state_function("clicks BIGINT, started TIMESTAMP, converted BOOLEAN")
def session(user, page, ts, state):
    """Counts a user's clicks while their session lasts; when it closes (no click for the
    timeout) emits its summary: clicks, start, and whether it reached the checkout."""
    if state.timing_out:
        return {"user": user, "clicks": state.clicks, "started": state.started,
                "converted": state.converted}
    state.update(clicks=(state.clicks or 0) + 1,
                 started=state.started if state.exists else ts,
                 converted=bool(state.converted) or page == "checkout")


sessions = session.timeout("30 seconds")


@mws.state_function("amounts ARRAY<DOUBLE>")
def fraud(card, amount, state):
    """Flags an amount over FACTOR times the average of the card's last HISTORY amounts
    (once it has three)."""
    history = state.amounts or []
    state.update(amounts=(history + [amount])[-HISTORY:])
    if len(history) >= 3:
        average = sum(history) / len(history)
        if amount > FACTOR * average:
            return {"card": card, "amount": amount, "average": average}


@mws.state_function("first_seen TIMESTAMP")
def dedup(event_id, ts, payload, state):
    """Passes an event on unless the same id was seen within WINDOW before it; the id is
    forgotten once the watermark passes the window."""
    if state.timing_out:
        state.remove()
        return None
    if state.exists and ts - state.first_seen < WINDOW:
        return None
    state.update(first_seen=ts)
    state.set_timer(ts + WINDOW)
    return {"event_id": event_id, "ts": ts, "payload": payload}


deduplicate = dedup.timeout_domain("event_time")


@mws.state_function("top ARRAY<BIGINT>")
def top_scores(player, rows, state):
    """A player's TOP best scores so far, updated with each batch of their scores."""
    scores = [r.score for r in rows if r.score is not None]
    top = sorted((state.top or []) + scores)[-TOP:]
    state.update(top=top)
    return {"player": player, "top": top, "best": top[-1] if top else None,
            "new": len(scores)}


@mws.state_function("placed TIMESTAMP")
def order_sla(order_id, status, ts, state):
    """Alerts when an order placed is not shipped within SLA (by event time), or ships late."""
    if state.timing_out or (state.timer is not None and state.watermark is not None
                            and state.timer < state.watermark):
        # The deadline passed (a call for data in that batch sees it before the timer fires).
        placed = state.placed
        state.remove()
        state.clear_timer()
        return {"order_id": order_id, "alert": "not shipped in time", "placed": placed}
    if status == "placed" and not state.exists:
        state.update(placed=ts)
        state.set_timer(ts + SLA)
    elif status == "shipped" and state.exists:
        late = ts - state.placed > SLA
        placed = state.placed
        state.remove()
        state.clear_timer()
        if late:
            return {"order_id": order_id, "alert": "shipped late", "placed": placed}
    return None


sla = order_sla.timeout_domain("event_time")
