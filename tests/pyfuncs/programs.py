"""Realistic state functions, written as a data engineer writes them and not tailored to what
the compiler takes: sessionization, fraud rules, de-duplication, top-k, SLA and last-seen
timers, running statistics (Welford), a token bucket, funnels, z-score anomalies, inventory
balances, alert messages built with f-strings, ``str.format`` and ``%``, datetime bucketing,
capped lists and map lookups; per record and per group.

``tests/test_realistic_programs.py`` runs each through ``mapwithstate.testing`` and through
the real server on random inputs with nulls and edge values, and compares them. The programs
were written before ``for`` loops compiled: one that would need a loop is written without one
and says so. ``card_alerts``, written since, yields alerts in a loop over a group's rows, with
``continue`` and ``break``.
"""
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, List, Optional

from hypothesis import strategies as st

from pyfuncs.inputs import T0, mostly

#: A program's input column: its SQL type and the strategy of its values.
Column = tuple


@dataclass(frozen=True)
class Program:
    """One realistic state function: its state type, key column, other input columns
    (name -> (type, strategy)), spec settings (builder method -> argument) and input
    watermark."""

    function: Callable[..., Any]
    state_schema: str
    key: str
    columns: Dict[str, Column]
    settings: Dict[str, Any] = field(default_factory=dict)
    event_time: Optional[str] = None
    delay: Optional[str] = None

    @property
    def name(self) -> str:
        return self.function.__name__


PROGRAMS: List[Program] = []


def program(state_schema: str, key: str, columns: Dict[str, Column],
            **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        PROGRAMS.append(Program(function, state_schema, key, columns, **options))
        return function
    return register


# --- inputs: mostly plausible values, now and then a null or an extreme one -----------------

def sometimes_none(values: st.SearchStrategy, one_in: int = 12) -> st.SearchStrategy:
    return mostly(values, st.none(), one_in)


READINGS = sometimes_none(mostly(
    st.floats(15, 25).map(lambda f: round(f, 2)),
    st.sampled_from([0.0, -0.0, -40.5, 1e9, 2.675, 0.125, 1e-7, -1e16, 99.995]), 5))
AMOUNTS = sometimes_none(mostly(
    st.floats(5, 80).map(lambda f: round(f, 2)),
    st.sampled_from([0.0, 0.005, 1234567.891, 999.5, -12.5, 1e12, 0.045]), 5), 20)
COUNTS = sometimes_none(mostly(st.integers(-20, 50),
                               st.sampled_from([0, -1, 1_000_000, 123456789, -99999]), 6), 20)
SECONDS = st.integers(0, 40).map(lambda s: T0 + timedelta(seconds=s))
MINUTES = sometimes_none(mostly(
    st.integers(0, 300).map(lambda m: T0 + timedelta(minutes=m, seconds=m % 7)),
    st.sampled_from([datetime(2026, 3, 29, 1, 59, 59, 999999), datetime(1999, 12, 31, 23, 59),
                     datetime(2024, 2, 29, 12, 0, 0, 500),
                     datetime(1969, 12, 31, 23, 59, 59, 250000)]), 10), 25)
SERVICES = sometimes_none(
    st.sampled_from(["web-1", "db", "é-box", "", "cache's", 'quote"d', "tab\there", "a\\b"]))
WORDS = sometimes_none(st.sampled_from(["home", "cart", "checkout", "paid", "view", "", "é"]), 25)
MERCHANTS = sometimes_none(st.sampled_from(["acme", "acme", "bolt", "café", ""]), 15)
BOOLEANS = sometimes_none(st.booleans(), 15)
CART_ACTIONS = sometimes_none(st.sampled_from(["add", "add", "add", "remove", "checkout"]), 15)
SKUS = sometimes_none(st.sampled_from(["tea", "mug", "café", ""]), 15)


# --- per record -----------------------------------------------------------------------------

@program("n BIGINT, mean DOUBLE, m2 DOUBLE", "sensor", {"reading": ("DOUBLE", READINGS)})
def sensor_stats(sensor, reading, state):
    """Running mean and standard deviation per sensor (Welford's algorithm)."""
    if reading is None:
        return None
    n = (state.n or 0) + 1
    mean = state.mean or 0.0
    delta = reading - mean
    mean += delta / n
    m2 = (state.m2 or 0.0) + delta * (reading - mean)
    state.update(n=n, mean=mean, m2=m2)
    stddev = math.sqrt(m2 / (n - 1)) if n > 1 else 0.0
    return {"sensor": sensor, "n": n, "mean": round(mean, 3), "stddev": stddev,
            "summary": f"{sensor}: n={n} mean={mean:.2f} sd={stddev:.3f}"}


@program("items ARRAY<STRING>, qty MAP<STRING, BIGINT>", "user",
         {"action": ("STRING", CART_ACTIONS), "sku": ("STRING", SKUS)})
def shopping_cart(user, action, sku, state):
    """A cart kept in the order items were first added: add and remove change it in place,
    checkout emits it and empties it."""
    items = list(state.items or [])
    qty = dict(state.qty or {})
    if action == "add" and sku:
        if sku not in qty:
            items.append(sku)
        qty[sku] = qty.get(sku, 0) + 1
    elif action == "remove" and sku in qty:
        qty[sku] -= 1
        if qty[sku] == 0:
            del qty[sku]
            items.remove(sku)
    elif action == "checkout" and items:
        count = sum(qty[i] for i in items)
        state.remove()
        return {"user": user, "items": ", ".join(items), "count": count}
    state.update(items=items, qty=qty)
    return None


@program("n BIGINT, mean DOUBLE, m2 DOUBLE", "metric", {"value": ("DOUBLE", READINGS)})
def zscore_alerts(metric, value, state):
    """Alerts on a value more than three standard deviations from the metric's mean so far
    (once it has three values); the value then joins the statistics."""
    if value is None:
        return None
    n = state.n or 0
    mean = state.mean or 0.0
    m2 = state.m2 or 0.0
    alert = None
    if n >= 3:
        sd = math.sqrt(m2 / (n - 1))
        if sd > 0:
            z = (value - mean) / sd
            if abs(z) > 3:
                alert = {"metric": metric, "value": value, "z": round(z, 2),
                         "message": f"{metric} at {value:,.1f} is {z:+.1f} sd from {mean:.2f}"}
    n += 1
    delta = value - mean
    mean += delta / n
    state.update(n=n, mean=mean, m2=m2 + delta * (value - mean))
    if not alert:
        return None
    return alert


CAPACITY = 3.0
REFILL_PER_SECOND = 0.25


@program("tokens DOUBLE, refilled TIMESTAMP", "client", {"ts": ("TIMESTAMP", SECONDS)})
def token_bucket(client, ts, state):
    """Rate limiting: a bucket of CAPACITY tokens refilled at REFILL_PER_SECOND; a request
    takes a token or is denied."""
    gap = ts - state.refilled if state.exists else timedelta(0)
    if state.exists:
        elapsed = max(gap.total_seconds(), 0.0)
        tokens = min(CAPACITY, state.tokens + elapsed * REFILL_PER_SECOND)
        refilled = max(ts, state.refilled)
    else:
        tokens = CAPACITY
        refilled = ts
    allowed = tokens >= 1.0
    if allowed:
        tokens -= 1.0
    state.update(tokens=tokens, refilled=refilled)
    return {"client": client, "ts": ts, "allowed": allowed, "left": round(tokens, 2),
            "gap": f"{gap.days}d{gap.seconds}s"}


STEPS = ["view", "cart", "checkout", "paid"]


@program("reached BIGINT, started TIMESTAMP", "user",
         {"step": ("STRING", WORDS), "ts": ("TIMESTAMP", MINUTES)})
def funnel(user, step, ts, state):
    """A purchase funnel: steps must come in STEPS' order; emits when a user completes it,
    with how long it took, and when one skips a step."""
    if step not in STEPS:
        return None
    position = STEPS.index(step)
    reached = state.reached if state.reached is not None else -1
    if position <= reached:
        return None
    if position > reached + 1:
        return {"user": user, "event": f"skipped to {step}", "took": None}
    if position == 0:
        state.update(reached=0, started=ts)
        return None
    state.update(reached=position)
    if position == len(STEPS) - 1:
        took = ts - state.started if ts is not None and state.started is not None else None
        state.remove()
        return {"user": user, "event": "converted", "took": took}
    return None


@program("balance BIGINT, by_site MAP<STRING, BIGINT>", "sku",
         {"site": ("STRING", st.sampled_from(["north", "south", "é"])),
          "qty": ("BIGINT", COUNTS)})
def inventory(sku, site, qty, state):
    """Stock per SKU and site; alerts when a site's stock goes negative."""
    if qty is None:
        return None
    levels = dict(state.by_site or {})
    levels[site] = levels.get(site, 0) + qty
    state.update(balance=(state.balance or 0) + qty, by_site=levels)
    if levels[site] < 0:
        return {"sku": sku, "site": site, "message": f"{sku}@{site}: {levels[site]:,} units"}


@program("balance BIGINT, low BOOLEAN", "sku", {"qty": ("BIGINT", COUNTS)})
def stock_balance(sku, qty, state):
    """A SKU's stock: alerts once when it falls under REORDER_AT, again after a restock."""
    balance = (state.balance or 0) + (qty or 0)
    was_low = bool(state.low)
    low = balance < REORDER_AT
    state.update(balance=balance, low=low)
    if low and not was_low:
        return {"sku": sku, "balance": balance,
                "message": "SKU %s: %d left (reorder at %d)" % (sku, balance, REORDER_AT)}


REORDER_AT = 10
OFFLINE_AFTER = timedelta(minutes=5)


@program("last_seen TIMESTAMP, status STRING", "device",
         {"ts": ("TIMESTAMP", MINUTES), "status": ("STRING", WORDS)},
         settings={"timeout_domain": "event_time"}, event_time="ts", delay="1 minute")
def device_offline(device, ts, status, state):
    """IoT last-seen: alerts when a device sends nothing for OFFLINE_AFTER of event time."""
    if state.timing_out:
        last = state.last_seen
        state.remove()
        return {"device": device, "alert": f"{device} offline since {last.isoformat()}",
                "hour": last.hour}
    if ts is None:
        return None
    last = ts if state.last_seen is None else max(ts, state.last_seen)
    state.update(last_seen=last, status=status)
    deadline = last + OFFLINE_AFTER
    if state.watermark is None or deadline > state.watermark:
        state.set_timer(deadline)
    return None


@program("hour TIMESTAMP, total DOUBLE", "meter",
         {"ts": ("TIMESTAMP", MINUTES), "kwh": ("DOUBLE", AMOUNTS)})
def hourly_energy(meter, ts, kwh, state):
    """Energy per meter and clock hour: emits an hour's total when a reading of a later hour
    arrives."""
    if ts is None or kwh is None:
        return None
    hour = ts.replace(minute=0, second=0, microsecond=0)
    if state.hour is None or hour <= state.hour:
        state.update(hour=state.hour or hour, total=(state.total or 0.0) + kwh)
        return None
    done = {"meter": meter, "hour": state.hour.strftime("%Y-%m-%d %H:00"),
            "day": state.hour.date(), "weekday": state.hour.weekday(),
            "kwh": round(state.total, 3)}
    state.update(hour=hour, total=kwh)
    return done


@program("alerts BIGINT", "host", {"service": ("STRING", SERVICES), "cpu": ("DOUBLE", READINGS),
                                   "mem_mb": ("BIGINT", COUNTS)})
def host_alerts(host, service, cpu, mem_mb, state):
    """Alert messages as an on-call engineer reads them: numbered, with the figures laid
    out."""
    if cpu is None or mem_mb is None:
        return None
    if cpu < 20.0 and mem_mb < 40:
        return None
    n = (state.alerts or 0) + 1
    state.update(alerts=n)
    return {"host": host, "n": n,
            "message": f"[{n:03d}] {host} {service!r}: cpu {cpu:.1f}% mem {mem_mb:,} MB",
            "short": "%s cpu=%.0f%%" % (host, cpu),
            "line": "{}: {:>8.2f} | {:<6d}|".format(host, cpu, mem_mb),
            "pct": f"{cpu / 100:.1%}", "padded": f"{host:*^9}"}


@program("amounts ARRAY<DOUBLE>, merchants ARRAY<STRING>", "card",
         {"amount": ("DOUBLE", AMOUNTS), "merchant": ("STRING", MERCHANTS)})
def card_velocity(card, amount, merchant, state):
    """Fraud rules over a card's last ten payments: three at one merchant, or a payment over
    four times the average of those before it."""
    if amount is None:
        return None
    where = merchant or "?"
    amounts = ((state.amounts or []) + [amount])[-10:]
    merchants = ((state.merchants or []) + [where])[-10:]
    state.update(amounts=amounts, merchants=merchants)
    repeats = merchants.count(where)
    spike = len(amounts) >= 4 and amount > 4 * (sum(amounts[:-1]) / (len(amounts) - 1))
    if repeats >= 3 or spike:
        return {"card": card, "amount": amount, "repeats": repeats,
                "largest_at": amounts.index(max(amounts)),
                "reason": "merchant repeat" if repeats >= 3 else "spike"}


RECENT = 4


@program("ids ARRAY<STRING>, dropped BIGINT", "source",
         {"event_id": ("STRING", st.sampled_from(["e1", "e2", "e3", "e4", "e5", "e6"])),
          "payload": ("STRING", sometimes_none(st.sampled_from([" ok ", "x", "", "é "])))})
def recent_dedup(source, event_id, payload, state):
    """Drops an event whose id is among the source's last RECENT ids."""
    seen = state.ids or []
    if event_id in seen:
        state.update(dropped=(state.dropped or 0) + 1)
        return None
    state.update(ids=(seen + [event_id])[-RECENT:])
    return {"source": source, "event_id": event_id,
            "payload": payload.strip() if payload else "", "dropped": state.dropped or 0}


LOCK_WINDOW = timedelta(minutes=5)


@program("failures BIGINT, first_failure TIMESTAMP, locked BOOLEAN", "user",
         {"success": ("BOOLEAN", BOOLEANS), "ts": ("TIMESTAMP", MINUTES)})
def login_lockout(user, success, ts, state):
    """Locks an account after three failed logins within LOCK_WINDOW."""
    if ts is None:
        return None
    if state.locked:
        return {"user": user, "event": "blocked", "at": ts}
    if success:
        state.remove()
        return None
    first = state.first_failure
    if first is None or ts - first > LOCK_WINDOW:
        state.update(failures=1, first_failure=ts)
    else:
        state.update(failures=state.failures + 1)
    if state.failures >= 3:
        state.update(locked=True)
        return {"user": user, "event": "locked", "at": ts}
    return None


@program("last DOUBLE, moves BIGINT", "symbol", {"price": ("DOUBLE", AMOUNTS)})
def price_moves(symbol, price, state):
    """Reports a price move of more than 5% from the last price."""
    if price is None or price <= 0:
        return None
    last = state.last
    state.update(last=price)
    if last is None:
        return None
    change = (price - last) / last
    if abs(change) > 0.05:
        state.update(moves=(state.moves or 0) + 1)
        return {"symbol": symbol, "price": round(price, 2), "change": f"{change:+.2%}",
                "arrow": "up" if change > 0 else "down", "moves": state.moves}


SLA_TIME = timedelta(seconds=2)


@program("opened TIMESTAMP, status STRING", "ticket",
         {"status": ("STRING", st.sampled_from(["open", "open", "closed", "pending"]))},
         settings={"timeout_domain": "processing_time"})
def ticket_sla(ticket, status, state):
    """An SLA timer in processing time: a ticket not closed within SLA_TIME of being opened
    (by batch time) is escalated."""
    if state.timing_out:
        opened = state.opened
        state.remove()
        return {"ticket": ticket, "escalated": f"{ticket} open since {opened:%H:%M:%S}"}
    if status == "closed":
        state.remove()
        state.clear_timer()
        return None
    if not state.exists:
        state.update(opened=state.batch_time, status=status)
        state.set_timer(state.batch_time + SLA_TIME)
    return None


TAG_MAPS = sometimes_none(st.dictionaries(st.sampled_from(["sql", "py", "é", ""]),
                                          st.integers(0, 9), max_size=3))


@program("top STRING, best BIGINT", "user",
         {"counts": ("MAP<STRING, BIGINT>", TAG_MAPS),
          "tag": ("STRING", sometimes_none(st.sampled_from(["sql", "py", "go"])))})
def favourite_tag(user, counts, tag, state):
    """A user's most used tag so far, from per-event tag counts (a map)."""
    if counts is None or tag is None:
        return None
    n = counts.get(tag, 0)
    if n > (state.best or 0):
        state.update(top=tag, best=n)
    return {"user": user, "tag": tag, "count": n, "top": state.top or "-",
            "label": f"{tag}x{n}"}


# --- per group ------------------------------------------------------------------------------

@program("top ARRAY<DOUBLE>, orders BIGINT", "category",
         {"product": ("STRING", st.sampled_from(["a", "b", "c"])),
          "revenue": ("DOUBLE", AMOUNTS)})
def category_top(category, rows, state):
    """Top three order revenues per category so far, with the batch's revenue.
    (The top products by name would need sorting the rows by a key, or a for loop.)"""
    revenues = [r.revenue for r in rows if r.revenue is not None]
    top = sorted((state.top or []) + revenues, reverse=True)[:3]
    state.update(top=top, orders=(state.orders or 0) + len(rows))
    return {"category": category, "top": top, "batch": round(sum(revenues), 2),
            "orders": state.orders}


@program("n BIGINT, total DOUBLE", "customer",
         {"amount": ("DOUBLE", AMOUNTS),
          "status": ("STRING", st.sampled_from(["paid", "paid", "refund", "pending"]))})
def customer_tier(customer, rows, state):
    """Spend per customer, paid orders only, and the tier it puts them in."""
    spent = sum(r.amount for r in rows if r.status == "paid" and r.amount is not None)
    refunded = any(r.status == "refund" for r in rows)
    total = (state.total or 0.0) + spent
    state.update(n=(state.n or 0) + len(rows), total=total)
    if total >= 1000:
        tier = "gold"
    elif total >= 100:
        tier = "silver"
    else:
        tier = "bronze"
    return {"customer": customer, "tier": tier, "refunded": refunded,
            "total": f"{total:,.2f}", "orders": state.n}


SESSION_GAP = timedelta(minutes=10)


@program("start TIMESTAMP, last TIMESTAMP, sessions BIGINT", "user",
         {"ts": ("TIMESTAMP", MINUTES)})
def user_sessions(user, rows, state):
    """Sessions per user from batches of clicks: a gap over SESSION_GAP between batches
    closes the session, emitted with its id and length."""
    times = [r.ts for r in rows if r.ts is not None]
    if not times:
        return None
    first = min(times)
    last = max(times)
    if state.last is not None and first - state.last > SESSION_GAP:
        closed = {"user": user, "session": f"{user}-{state.sessions:04d}",
                  "minutes": (state.last - state.start).total_seconds() / 60}
        state.update(start=first, last=last, sessions=state.sessions + 1)
        return closed
    state.update(start=state.start or first, last=max(last, state.last or last),
                 sessions=state.sessions or 1)
    return None


@program("latest TIMESTAMP, n BIGINT", "device", {"ts": ("TIMESTAMP", MINUTES)})
def device_hours(device, rows, state):
    """Per device and batch: the latest reading's clock hour, weekday and a label."""
    latest = max((r.ts for r in rows if r.ts is not None), default=None)
    if latest is None:
        return None
    earliest = min(r.ts for r in rows if r.ts is not None)
    state.update(latest=max(latest, state.latest or latest), n=(state.n or 0) + len(rows))
    return {"device": device, "bucket": latest.replace(minute=0, second=0, microsecond=0),
            "weekday": latest.isoweekday(), "label": latest.strftime("%a %H:%M"),
            "long": latest.strftime("%A %d %B %Y, %I:%M:%S %p (day %j, %y, %w/%u) %f%%"),
            "epoch": latest.timestamp(), "n": state.n,
            "from": earliest.timestamp(), "from_us": earliest.microsecond}


ALERT_AMOUNT = 500.0
RAPID = timedelta(seconds=5)


@program("spent DOUBLE, alerts BIGINT, blocked BOOLEAN", "card",
         {"amount": ("DOUBLE", AMOUNTS), "merchant": ("STRING", MERCHANTS),
          "ts": ("TIMESTAMP", SECONDS)})
def card_alerts(card, rows, state):
    """Fraud alerts per payment, in record order: a large payment, or a payment at another
    merchant within seconds of the last one. A payment at an unknown merchant ("") blocks
    the card: its alert is the last, and a blocked card's later batches only say so."""
    if state.blocked:
        yield {"card": card, "at": None, "amount": None, "reason": "blocked", "n": state.alerts}
        return
    spent = state.spent or 0.0
    alerts = state.alerts or 0
    blocked = False
    last_ts = None
    last_merchant = None
    for r in rows:
        if r.amount is None:
            continue
        spent += r.amount
        if r.amount >= ALERT_AMOUNT or (
                last_ts is not None and r.merchant != last_merchant and r.ts - last_ts < RAPID):
            alerts += 1
            yield {"card": card, "at": r.ts, "amount": r.amount, "reason": "suspicious", "n": alerts}
        if r.merchant == "":
            blocked = True
            yield {"card": card, "at": r.ts, "amount": r.amount, "reason": "unknown merchant",
                   "n": alerts}
            break
        last_ts = r.ts
        last_merchant = r.merchant
    state.update(spent=round(spent, 2), alerts=alerts, blocked=blocked)
