"""The synthetic corpus: small Python state functions, each built around the constructs where
Python's semantics and SQL's part ways (truthiness, ``and``/``or`` operands, flooring ``//``
and ``%``, banker's rounding, ``/`` always floating, negative slices, ``in``, mixed ``min``/
``max``, chained comparisons, ``str()`` of floats and booleans, datetime arithmetic), the
statements and builtins a state function may use, the state operations (update, remove, timers,
timeouts, in any order), and the places Python raises.

Each function takes the key ``k`` and some of the input columns (``v BIGINT, x DOUBLE,
s STRING, b BOOLEAN, ts TIMESTAMP``, or ``rows`` of them for a group function) and emits rows
with ``k``, so the harness can tell the cases of one query apart. They are plain functions: the
harness decorates them with ``mws.state_function`` and runs them through ``mapwithstate.testing``
and through the server.
"""
import bisect
import collections
import heapq
import itertools
import linecache
import math
import operator
import re
import statistics
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from statistics import median_low
from typing import Any, Callable, Dict, List, Optional

from hypothesis import strategies as st

from pyfuncs.inputs import (
    BIGINT_MAX,
    BIGINT_MIN,
    COLUMNS,
    MAPS,
    SMALL_BIGINTS,
    STRATEGIES,
    STRINGS,
    TIMESTAMPS,
    mostly,
)

LIMIT = 3
CAPACITY = 4
PREFIX = "k="
LOG_LINE = re.compile(r"(?P<level>[A-Z]+) (?P<code>\d{3}) (.*)")
WINDOW = timedelta(seconds=20)


@dataclass(frozen=True)
class Entry:
    """One corpus function and how it is run: its state type, its spec's settings (builder
    method -> argument), an input watermark (``event_time`` column and delay) and initial
    state rows (key ``k`` and the state's fields)."""

    function: Callable[..., Any]
    state_schema: str
    settings: Dict[str, Any] = field(default_factory=dict)
    event_time: Optional[str] = None
    delay: Optional[str] = None
    initial_state: Optional[List[Dict[str, Any]]] = None
    columns: Dict[str, str] = field(default_factory=lambda: dict(COLUMNS))
    strategies: Dict[str, Any] = field(default_factory=lambda: dict(STRATEGIES))

    @property
    def name(self) -> str:
        return self.function.__name__


CORPUS: List[Entry] = []


def entry(state_schema: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        CORPUS.append(Entry(function, state_schema, **options))
        return function
    return register


# --- per record: expressions --------------------------------------------------------------

@entry("n BIGINT, total BIGINT")
def running_total(k, v, state):
    # None + 1 raises in Python: a null v fails the query.
    state.update(n=(state.n or 0) + 1, total=(state.total or 0) + v)
    return {"k": k, "n": state.n, "total": state.total}


@entry("seen BIGINT")
def truthiness(k, v, x, s, b, state):
    score = 0
    if v:
        score += 1
    if x:
        score += 2
    if s:
        score += 4
    if b:
        score += 8
    if not state.seen:
        score += 16
    state.update(seen=score)
    return {"k": k, "score": score, "any": bool(v) or bool(s), "none": not (bool(x) or bool(b))}


@entry("last STRING")
def and_or_operands(k, v, s, state):
    label = s or "empty"
    doubled = v and v // 2
    previous = state.last or label
    state.update(last=label)
    return {"k": k, "label": label, "half": doubled, "previous": previous,
            "both": (s and state.last) or "-"}


@entry("last BIGINT")
def int_powers(k, v, state):
    # A square beyond 64 bits raises OverflowError (Python's int would not fit the column),
    # 0 ** -3 ZeroDivisionError.
    if v is None:
        return None
    state.update(last=(state.last or 0) ** 2 % 1000 + 1)
    return {"k": k, "sq": v ** 2, "cube": (v % 100000) ** 3, "inv": (v % 50 - 25) ** -3,
            "one": (v % 3 - 1) ** 101, "last": state.last ** 0}


# Bases and exponents of int ** int around where a power leaves 64 bits, a double's 53 and a
# double's range, with nulls.
POWER_BASES = st.one_of(
    st.integers(-12, 12),
    st.sampled_from([2, -2, 3037000499, 3037000500, 2 ** 31, 2 ** 53 + 1, BIGINT_MAX, BIGINT_MIN]),
    st.none())
POWER_EXPONENTS = st.one_of(
    st.integers(-70, 70),
    st.sampled_from([0, 1, 2, 62, 63, 64, -1, -1074, -1075, 2 ** 62, BIGINT_MAX, BIGINT_MIN]),
    st.none())


@entry("p BIGINT", columns={"v": "BIGINT", "e": "BIGINT"},
       strategies={"v": POWER_BASES, "e": POWER_EXPONENTS})
def variable_powers(k, v, e, state):
    # v ** e with the exponent a column: an int for e >= 0 (OverflowError beyond 64 bits), a
    # float for e < 0 (0 ** e raises ZeroDivisionError).
    if v is None or e is None:
        return None
    p = v ** e
    small = (v % 5) ** (e % 4 - 1)
    if e >= 0:
        state.update(p=int(p))
        return {"k": k, "int": int(p), "float": 0.0, "small": small}
    return {"k": k, "int": 0, "float": float(p), "small": small}


# Floats for the int-or-float operands: zeros of both signs, the infinities, whole ones (an int
# and a float equal), and extremes.
MIXED_DOUBLES = mostly(STRATEGIES["x"], st.sampled_from(
    [0.0, -0.0, 7.0, -7.5, 0.25, float("inf"), float("-inf"), 1e300, -1e-300]), 3)


@entry("r STRING", strategies={**STRATEGIES, "x": MIXED_DOUBLES})
def mixed_floor_division(k, v, x, b, state):
    # n and d are ints on some records and floats on others: // and % floor as Python's int
    # operation where both are ints, the float one (CPython's float_floor_div and float_mod)
    # where either is a float; a zero divisor of either type raises ZeroDivisionError.
    if v is None or x is None:
        return None
    n = v if b else x
    d = x if b is None else v % 1000 - 500
    # As text: -0.0 and NaN (inf // 3) as Python prints them.
    state.update(r=str(float(n % d)))
    return {"k": k, "q": str(float(n // d)), "r": state.r}


@entry("p DOUBLE", strategies={**STRATEGIES, "x": MIXED_DOUBLES})
def mixed_powers(k, v, x, state):
    # ** of ints and floats mixed per record: exact ints (a float for a negative exponent),
    # CPython's float_pow; 0 to a negative power raises ZeroDivisionError, a float power
    # beyond the double's range OverflowError. pow() with two arguments and with a modulus.
    if v is None or x is None:
        return None
    base = v % 7 - 3 if v % 4 < 2 else x
    e = v % 4 - 1 if v % 3 else 0.5
    p = (base * base if e == 0.5 else base) ** e
    state.update(p=float(p))
    return {"k": k, "p": state.p, "pow": float(pow(v % 10 + 1, v % 3 - 1)),
            "mod": pow(v, v % 50, 1000000007), "inv": pow(v % 1000 + 1, v % 7 - 7, -1000000007),
            "small": pow(v % 9, v % 4, v % 23 - 11), "none": pow(v % 1000, 2, None)}


@entry("last BIGINT")
def floor_division(k, v, state):
    if v is None:
        return None
    out = {"k": k, "q": v // 7, "r": v % 7, "nq": v // -3, "nr": v % -3}
    if state.last is not None and state.last != 0 and -1_000_000_000 < v < 1_000_000_000:
        out = {"k": k, "q": v // state.last, "r": v % state.last, "nq": -v // 4,
               "nr": -v % 4}
    state.update(last=v if -1_000_000_000 < v < 1_000_000_000 else 0)
    return out


@entry("n BIGINT")
def zero_division(k, v, state):
    # ZeroDivisionError when v is 0.
    if v is not None and -100 < v < 100:
        state.update(n=(state.n or 0) + 1)
        return {"k": k, "q": 100 // v, "f": 1 / v, "n": state.n}
    return {"k": k, "q": 0, "f": 0.0, "n": state.n}


@entry("sum DOUBLE")
def true_division(k, v, x, state):
    if v is None or x is None or v == 0:
        return None
    total = (state.sum or 0.0) + x / v
    state.update(sum=total)
    return {"k": k, "half": v / 2, "ratio": x / v, "sum": state.sum, "int_ratio": 7 / 2}


@entry("r BIGINT")
def banker_rounding(k, x, state):
    if x is None or abs(x) > 1e15:
        return {"k": k, "r": None, "i": None, "half": 2, "neg": 0}
    state.update(r=round(x))
    return {"k": k, "r": round(x), "i": int(x), "half": round(2.5), "neg": round(-0.5)}


@entry("tail STRING")
def string_slices(k, s, state):
    if not s:
        return {"k": k, "head": "", "tail": state.tail, "mid": None, "last": None,
                "upto": None}
    state.update(tail=s[-2:])
    return {"k": k, "head": s[:1], "tail": s[-2:], "mid": s[1:-1], "last": s[-1],
            "upto": s[:-1]}


@entry("last_char STRING")
def index_error(k, s, state):
    # ""[0] raises IndexError.
    if s is None:
        return None
    state.update(last_char=s[-1])
    return {"k": k, "first": s[0], "last": state.last_char}


@entry("seen ARRAY<STRING>")
def membership(k, s, v, state):
    seen = state.seen or []
    fresh = s is not None and s not in seen
    if fresh:
        seen = (seen + [s])[-LIMIT:]
    state.update(seen=seen)
    return {"k": k, "fresh": fresh, "has_a": s is not None and "a" in s,
            "small": v in [0, 1, 2, 3], "count": len(seen)}


# round(x, n): the halves that are not halves in binary, signed zeros, the infinities, the
# extremes, doubles of every magnitude, and values a thousandth and a half off a grid.
ROUNDING_DOUBLES = st.one_of(
    st.sampled_from([2.675, 0.125, 0.375, -0.125, 2.5, -2.5, 1.005, -0.001, -0.0, 0.0,
                     float("inf"), float("-inf"), 1e300, 5e-324, 1.7976931348623157e308,
                     -1.7976931348623157e308, 12345.6785, 0.5, 2.0 ** 53 + 2]),
    st.floats(allow_nan=False),
    st.floats(-1e4, 1e4).map(lambda f: round(f, 3) + 0.0005),
    st.none())


@entry("r DOUBLE", strategies={**STRATEGIES, "x": ROUNDING_DOUBLES})
def float_rounding(k, x, state):
    # round(x, -308) of the largest doubles raises OverflowError.
    if x is None:
        return None
    state.update(r=round(x, 2))
    return {"k": k, "r2": state.r, "r0": round(x, 0), "r1": round(x, ndigits=1),
            "rm1": round(x, -1), "r5": round(x, 5), "r16": round(x, 16),
            "rm308": round(x, -308), "r400": round(x, 400)}


@entry("r DOUBLE", strategies={**STRATEGIES, "x": ROUNDING_DOUBLES})
def variable_rounding(k, v, x, state):
    # round(x, n) with n a column: negative too, None (then round(x), an int); an int rounded
    # to tens and beyond, half to even (OverflowError beyond 64 bits); the largest doubles
    # rounded to -308 digits raise OverflowError.
    if x is None or v is None:
        return None
    n = v % 9 - 4 if v % 5 else None
    if n is None and not -1e15 < x < 1e15:
        return None
    r = round(x, n)
    state.update(r=float(r))
    return {"k": k, "r": str(float(r)), "far": round(x, -(v % 400)),
            "i": round(v, v % 23 - 21), "j": round(v % 1000, n)}


# Ints beyond 2**53 and the floats they round to, which Python orders exactly.
ROUNDED_INTS = st.sampled_from([2 ** 53 + 1, 2 ** 63 - 1, -2 ** 63, 2 ** 62 + 1, 2 ** 53])
ROUNDED_FLOATS = st.sampled_from([2.0 ** 53, 2.0 ** 63, -2.0 ** 63, 2.0 ** 62, 2.0 ** 54])


@entry("hi DOUBLE, lo DOUBLE", strategies={
    **STRATEGIES, "v": mostly(STRATEGIES["v"], ROUNDED_INTS, 10),
    "x": mostly(STRATEGIES["x"], ROUNDED_FLOATS, 5)})
def mixed_min_max(k, v, x, state):
    if v is None or x is None:
        return None
    hi = max(v, x, state.hi or 0.0)
    lo = min(v, x)
    state.update(hi=hi, lo=lo)
    return {"k": k, "hi": hi, "lo": lo, "m3": max(1, 2.0, v)}


@entry("n BIGINT")
def chained_comparisons(k, v, x, state):
    inside = v is not None and 0 < v <= 5
    near = x is not None and -1.0 <= x < 1.0 != x
    state.update(n=(state.n or 0) + (1 if inside else 0))
    return {"k": k, "inside": inside, "near": near, "n": state.n,
            "ordered": v is not None and x is not None and v < x < 100}


@entry("text STRING")
def none_ordering(k, v, state):
    # None < 3 raises TypeError in Python.
    if v < 3:
        state.update(text="low")
    else:
        state.update(text="high")
    return {"k": k, "text": state.text}


@entry("text STRING")
def str_conversions(k, v, x, b, state):
    text = str(x) + "|" + str(b) + "|" + str(v)
    state.update(text=text)
    return {"k": k, "text": text, "t": str(True), "f": str(1.0), "big": str(1e16),
            "small": str(1e-05)}


@entry("first TIMESTAMP")
def datetime_arithmetic(k, ts, state):
    if ts is None:
        return None
    first = state.first if state.exists else ts
    state.update(first=min(first, ts))
    gap = ts - first
    return {"k": k, "later": ts + timedelta(minutes=5), "earlier": ts - timedelta(days=1),
            "gap": gap, "since": ts - datetime(2026, 1, 1),
            "in_window": ts - state.first <= WINDOW}


@entry("seconds DOUBLE")
def timedelta_seconds(k, ts, state):
    if ts is None:
        return None
    seconds = (ts - datetime(2026, 1, 1)).total_seconds()
    state.update(seconds=seconds)
    return {"k": k, "seconds": seconds, "hour": timedelta(hours=1).total_seconds()}


# --- per record: statements and builtins --------------------------------------------------

@entry("label STRING")
def if_elif_else(k, v, x, state):
    if v is None:
        label = "none"
    elif v < 0:
        label = "negative"
    elif v == 0:
        label = "zero"
    else:
        label = "positive" if v < 100 else "large"
    if x is not None and abs(x) >= 1e18:
        kind = "huge"
    else:
        kind = "float" if x is not None and x != int(x) else "whole"
    state.update(label=label)
    return {"k": k, "label": label, "kind": kind}


@entry("n BIGINT")
def augmented_assignment(k, v, state):
    n = state.n or 0
    n += 1
    if v is not None and -1_000_000 < v < 1_000_000:
        n *= 2
        n -= v
        n //= 3
        n %= 1000
    state.update(n=n)
    return {"k": k, "n": n}


@entry("n BIGINT")
def generator_rows(k, v, state):
    state.update(n=(state.n or 0) + 1)
    yield {"k": k, "i": 0, "n": state.n}
    if v is not None and v > 0:
        yield {"k": k, "i": 1, "n": state.n}
    if v is not None and v > 3:
        yield {"k": k, "i": 2, "n": state.n}


@entry("n BIGINT")
def assert_and_raise(k, v, s, state):
    if s == "boom":
        raise ValueError("boom in the input")
    assert v is None or v > -1_000_000_000, "v is far too small"
    state.update(n=(state.n or 0) + 1)
    return {"k": k, "n": state.n}


@entry("chars BIGINT")
def builtins_mix(k, v, x, s, state):
    chars = (state.chars or 0) + (len(s) if s is not None else 0)
    state.update(chars=chars)
    small = v is not None and v > -1_000_000_000_000_000_000
    return {"k": k, "chars": chars, "abs": abs(v) if small else None,
            "int": int(x) if x is not None and abs(x) < 1e18 else None,
            "float": float(v) if v is not None else None, "bool": bool(s),
            "sum": sum([1, 2, len(k)])}


@entry("acc DOUBLE")
def math_functions(k, x, state):
    if x is None or abs(x) > 1e300:
        return None
    acc = (state.acc or 0.0) + math.sqrt(abs(x))
    state.update(acc=acc)
    return {"k": k, "acc": acc, "floor": math.floor(x) if abs(x) < 1e15 else None,
            "ceil": math.ceil(x) if abs(x) < 1e15 else None,
            "log": math.log(x) if x > 0 else None, "pi": math.pi}


PRIORITY = {"a": 3, "ab": 2, "é": 1}


@entry("m MAP<STRING, BIGINT>")
def dict_displays(k, v, s, state):
    if s is None or v is None or not -10**9 < v < 10**9:
        return None
    counts = {}
    for ch in [s[:1], s[-1:], s[:1]]:
        counts[ch] = counts.get(ch, 0) + 1
    merged = {**(state.m or {}), s: v, "total": v * 2}
    state.update(m=dict(merged, last=PRIORITY.get(s, 0)))
    row = {"k": k, "n": len(merged)}
    row["counts"] = counts
    row["by"] = {v: s, 1: "one", 2: "two", 1: "uno"}  # noqa: F601 (Python keeps the last)
    row["n"] = {"a": 1, "b": 2, "a": v}["a"]  # noqa: F601
    return dict(row, kw=dict(a=v, b=len(counts)))


@entry("counts MAP<STRING, BIGINT>")
def keys_named_by_function(k, s, v, state):
    # key= given a function rather than a lambda: a dict's get, a builtin, a str method.
    if s is None:
        return None
    counts = dict(state.counts or {})
    counts[s] = counts.get(s, 0) + 1
    state.update(counts=counts)
    words = s.split(",") + [str(v)]
    return {"k": k, "top": max(counts, key=counts.get), "longest": max(words, key=len),
            "folded": sorted(words, key=str.lower), "least": min(words, key=len),
            "closest": min([3, -1, v % 100 - 50 if v is not None else 0], key=abs)}


@entry("info STRUCT<n: BIGINT, total: DOUBLE>, "
       "events ARRAY<STRUCT<ts: TIMESTAMP, amount: DOUBLE>>")
def struct_state(k, v, x, ts, state):
    # Dict displays stored as structs: a STRUCT field, appended to and concatenated onto an
    # ARRAY<STRUCT> field (on either side of +, and by +=), a list display of them stored
    # whole; a Row read by attribute and by name; max over structs by a key.
    if x is None or ts is None:
        return None
    info = state.info
    n = (info.n if info else 0) + 1
    total = (info["total"] if info is not None else 0.0) + x
    events = list(state.events or [])
    if v == 2:
        events = [{"ts": ts - timedelta(seconds=1), "amount": -x}] + events
    events.append({"ts": ts, "amount": x})
    recent = [e for e in events if abs((ts - e["ts"]).total_seconds()) < 60][-LIMIT:]
    if v == 1:
        recent = recent + [{"ts": ts, "amount": 0.0}]
    elif v == 0:
        recent += [{"ts": ts, "amount": 1.0}]
    latest = max(recent, key=lambda e: e["ts"])
    state.update(info={"n": n, "total": total}, events=recent)
    if v == 3:
        state.update(events=[{"ts": latest["ts"], "amount": 3.0}, {"ts": ts, "amount": x}])
    return {"k": k, "n": state.info.n, "avg": total / n, "last": recent[-1]["amount"],
            "first": recent[0]["ts"], "kept": len(state.events), "top": latest["amount"]}


@entry("acc DOUBLE")
def more_math(k, v, x, state):
    if x is None:
        return None
    # Transcendental results are rounded: Java's and C's may differ in the last bit.
    acc = (state.acc or 0.0) + round(math.atan(x), 9)
    state.update(acc=acc)
    small = abs(x) < 1e5
    return {"k": k, "acc": acc, "sin": round(math.sin(x), 9) if small else None,
            "asinh": round(math.asinh(x), 9), "atanh": round(math.atanh(x / 2e6), 12),
            "log1p": round(math.log1p(x), 9), "exp": round(math.exp(x), 6) if x < 50 else None,
            "sign": math.copysign(1.5, x), "fmod": math.fmod(x, 2.5), "deg": math.degrees(x),
            "close": math.isclose(x, 0.5, abs_tol=0.1), "fact": math.factorial(v % 21) if v is not None else -1}


@entry("q BIGINT")
def divmod_isinstance(k, v, x, state):
    q, r = divmod(v, 3)
    state.update(q=q)
    fq = divmod(x, -2.5) if x is not None else None
    return {"k": k, "q": q, "r": r, "fq": fq[0] if fq else None, "fr": fq[1] if fq else None,
            "zero": divmod(v, v % 7 - 1)[1] if 0 < v < 10 else None,
            "is_int": isinstance(state.q, int), "is_num": isinstance(x, (int, float)),
            "is_str": isinstance(x, str)}


@entry("words BIGINT")
def string_methods(k, s, state):
    if s is None:
        return None
    parts = s.split(",")
    state.update(words=(state.words or 0) + len(parts))
    return {"k": k, "upper": s.upper(), "lower": s.lower(), "strip": s.strip(),
            "starts": s.startswith("a"), "ends": s.endswith("b"), "swap": s.replace("a", "b"),
            "find": s.find("b"), "parts": parts, "words": state.words}


@entry("vals ARRAY<BIGINT>")
def capped_list(k, v, state):
    if v is None or not -1_000_000_000 < v < 1_000_000_000:
        return None
    vals = ((state.vals or []) + [v])[-LIMIT:]
    state.update(vals=vals)
    return {"k": k, "first": vals[0], "last": vals[-1], "len": len(vals),
            "doubled": [x * 2 for x in vals], "positive": [x for x in vals if x > 0],
            "total": sum(vals), "sorted": sorted(vals), "top": max(vals)}



@entry("amounts ARRAY<BIGINT>")
def loop_over_capped_list(k, v, x, state):
    # for loops over a capped list state, range and enumerate: carried ints, an optional
    # int (None before the loop), an int-or-float, a list built in the loop, if/elif/else in
    # the body; None + 1 and 64-bit overflow raise inside the body.
    amounts = ((state.amounts or []) + [v])[-LIMIT:]
    state.update(amounts=amounts)
    total = mixed = 0
    biggest = None
    flags = []
    for a in amounts:
        total += a
        if biggest is None or a > biggest:
            biggest = a
        elif a == biggest:
            flags = flags + ["tie"]
        else:
            mixed = mixed + (x if x is not None else 1)
    weighted = 0
    for i, a in enumerate(amounts, 1):
        if a is not None and -1000 < a < 1000:
            weighted += i * a
    squares = 0
    for i in range(len(amounts)):
        for j in range(i, len(amounts), 2):
            squares += i * j
    return {"k": k, "total": total, "biggest": biggest, "mixed": mixed, "flags": flags,
            "weighted": weighted, "squares": squares}

@entry("xs ARRAY<DOUBLE>", strategies={**STRATEGIES, "x": MIXED_DOUBLES})
def keyed_min_max_and_sorting(k, v, x, state):
    # min/max with key= (ties: the first item wins) and default=; sorted() of floats (stable:
    # -0.0 and 0.0 keep their order, reverse=True too) and of ints mixed with floats, compared
    # exactly (2**53 + 1 after 2.0**53).
    if x is None or v is None:
        return None
    xs = ((state.xs or []) + [x])[-4:]
    state.update(xs=xs)
    mixed = [v, x, 0, -0.0, 2 ** 53 + 1, 2.0 ** 53, 1]
    return {"k": k, "far": max(xs, key=lambda y: abs(y - 1.0)),
            "near": str(min(xs, key=lambda y: abs(y))),
            "first_big": max(xs, key=lambda y: y > 100.0),
            "positive": max([y for y in xs if y > 0], default=-1.0),
            "none": min([y for y in xs if y > 1e7], key=lambda y: 0.0 - y, default=None),
            "pair": float(max(v, x, key=lambda z: 0.0 - z)),
            "square": min(v % 10, -(v % 7), key=lambda z: z * z),
            "up": [str(y) for y in sorted(xs)], "down": [str(y) for y in sorted(xs, reverse=True)],
            "mixed": [str(float(m)) for m in sorted(mixed)],
            "big": [m == 2 ** 53 + 1 for m in sorted(mixed, reverse=True)]}


@entry("last BIGINT, prev BIGINT")
def module_constants(k, v, state):
    label = PREFIX + k
    over = v is not None and v > LIMIT
    state.update(prev=state.last, last=v)
    return {"k": k, "label": label, "over": over, "prev": state.prev}


@entry("m MAP<STRING, BIGINT>",
       columns={"s": "STRING", "m": "MAP<STRING, BIGINT>"},
       strategies={"s": STRINGS, "m": MAPS})
def map_lookups(k, s, m, state):
    # m["a"] raises KeyError when the map has no "a" (and TypeError when m is None).
    if m is None:
        kept = state.m.get("b", -1) if state.m is not None else -1
        return {"k": k, "got": None, "a": None, "kept": kept}
    state.update(m=m)
    return {"k": k, "got": m.get(s, 0) if s is not None else None, "a": m["a"],
            "kept": state.m.get("b", -1)}


@entry("n BIGINT",
       columns={"s": "STRING", "m": "MAP<STRING, BIGINT>"},
       strategies={"s": STRINGS, "m": MAPS})
def map_none_keys(k, s, m, state):
    # A dict's key may be None: get() gives the default, `in` False, and m[None] raises
    # KeyError (here only for a map without "a", rare, so that most cases run).
    if m is None:
        return None
    got = m.get(s)
    fallback = m.get(s, -1)
    literal = m.get(None, -2)
    state.update(n=m[s] if s == "a" or (s is None and "a" not in m) else -3)
    return {"k": k, "got": got, "fallback": fallback, "literal": literal,
            "has": s in m, "none": None in m}


def generated(source: str, name: str) -> Callable[..., Any]:
    """The function ``name`` defined by ``source``, with its source where the compiler reads
    it (``linecache``, under a made-up file name), as if written in a file."""
    filename = f"<corpus {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: Dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def _long_chain_source(steps: int) -> str:
    """A long straight-line function: each statement builds on the last, so its Columns nest
    a level per line, deeper than protobuf's client-side limit of 100 messages."""
    lines = ["def long_chain(k, v, state):", "    n = (v or 0) % 100 + (state.n or 0) % 1000"]
    lines += [f"    n = n + {i % 5 - 2}" for i in range(steps)]
    lines += ["    state.update(n=n)", "    return {'k': k, 'n': n}"]
    return "\n".join(lines) + "\n"


entry("n BIGINT", columns={"v": "BIGINT"}, strategies={"v": SMALL_BIGINTS})(
    generated(_long_chain_source(80), "long_chain"))


@entry("flag BOOLEAN")
def boolean_state(k, b, state):
    flag = bool(b) != bool(state.flag)
    state.update(flag=flag)
    return {"k": k, "flag": flag, "was": state.exists}


@entry("n BIGINT")
def overflow(k, v, state):
    # An int beyond 64 bits does not fit the column: the query fails (Python would not).
    if v is None:
        return None
    n = (state.n or 0) + v
    state.update(n=n)
    return {"k": k, "n": n}


def seldom(common: st.SearchStrategy, rare: st.SearchStrategy, one_in: int) -> st.SearchStrategy:
    """``common``, and once in ``one_in`` draws ``rare`` (not at the draw hypothesis favours,
    the smallest, as ``mostly``'s)."""
    return st.integers(1, one_in).flatmap(lambda i: rare if i == one_in // 2 else common)


# Fields of a datetime around their bounds: mostly valid, now and then one Python refuses (a
# month 13, a February 30, year 0, an int beyond 32 bits, None).
YEARS = seldom(st.sampled_from([1970, 2000, 2024, 2026, 2100, 1, 9999]),
               st.sampled_from([0, 10000, -1, 2 ** 40, None]), 40)
MONTHS = seldom(st.integers(1, 12), st.sampled_from([0, 13, -1, None]), 40)
DAYS = seldom(st.integers(1, 31), st.sampled_from([0, 32, None]), 40)
HOURS = seldom(st.integers(0, 23), st.sampled_from([24, -1, None, 2 ** 31]), 40)


@entry("last TIMESTAMP",
       columns={"y": "BIGINT", "mo": "BIGINT", "d": "BIGINT", "h": "BIGINT", "v": "BIGINT",
                "ts": "TIMESTAMP"},
       strategies={"y": YEARS, "mo": MONTHS, "d": DAYS, "h": HOURS, "v": SMALL_BIGINTS,
                   "ts": TIMESTAMPS})
def datetime_constructors(k, y, mo, d, h, v, ts, state):
    # datetime(2024, 2, 30) raises ValueError, datetime(2 ** 40, 1, 1) OverflowError,
    # timedelta(weeks=2 ** 62) OverflowError, datetime(None, ...) TypeError.
    if y is None or mo is None:
        return None
    made = datetime(y, mo, min(d or 1, 28), hour=h or 0, minute=59, second=mo, microsecond=7)
    day = date(y, mo, d)
    span = timedelta(days=d, hours=h, microseconds=y, weeks=v if v is not None else 0)
    state.update(last=made)
    return {"k": k, "made": made, "day": day, "span": span, "first": datetime(y, mo, 1),
            "since": None if ts is None else ts - datetime(y, 1, 1),
            "noon": datetime(2026, 1, d, h, 0)}


# Separators, characters and affixes: None (whitespace), the regular expressions' own
# characters, non-ASCII ones, now and then "" (split raises ValueError).
SEPARATORS = seldom(st.sampled_from([",", " ", "a", "é", "ab", None, "日", "\\E", ".", "a,"]),
                    st.just(""), 30)
SPLITS = st.one_of(st.integers(-2, 3), st.none())


@entry("parts BIGINT", columns={"s": "STRING", "t": "STRING", "v": "BIGINT"},
       strategies={"s": STRINGS, "t": SEPARATORS, "v": SPLITS})
def string_arguments(k, s, t, v, state):
    # s.split("") raises ValueError; s.startswith(("a", None)) TypeError unless s starts with
    # "a"; s.split(t, None) TypeError; None.strip() AttributeError.
    if s is None and t == "a":
        return {"k": k, "parts": [], "limited": [], "words": [], "strip": s.strip(),
                "lstrip": "", "rstrip": "", "starts": False, "ends": False, "bounded": False,
                "tuple": False}
    if s is None:
        return None
    parts = s.split(t)
    limited = s.split(t, v if v is not None else -1)
    words = s.split(maxsplit=v if v is not None else -1)
    state.update(parts=(state.parts or 0) + len(parts))
    return {"k": k, "parts": parts, "limited": limited, "words": words, "strip": s.strip(t),
            "lstrip": s.lstrip(t), "rstrip": s.rstrip(t), "starts": s.startswith(("a", t)),
            "ends": t is not None and s.endswith(t, v),
            "bounded": s.startswith("b", v, -1) or s.endswith(("a", "b", "é"), 1, v),
            "tuple": s.startswith(PREFIXES) or s.endswith(PREFIXES, None, 3)}


PREFIXES = ("ab", "é", "")
STEPS = seldom(st.sampled_from([1, 2, 3, -1, -2, -3, 5, -7, None, 2 ** 62, -(2 ** 63)]),
               st.just(0), 25)
LISTS = st.one_of(st.lists(seldom(st.integers(-20, 20), st.none(), 30), max_size=6), st.none())


@entry("tail ARRAY<BIGINT>", columns={"s": "STRING", "xs": "ARRAY<BIGINT>", "v": "BIGINT"},
       strategies={"s": STRINGS, "xs": LISTS, "v": STEPS})
def stepped_slices(k, s, xs, v, state):
    # A zero step raises ValueError.
    if s is None or xs is None:
        return None
    lo = len(s) - 3
    state.update(tail=xs[-1:-4:-1])
    return {"k": k, "evens": xs[::2], "odds": xs[1::2], "back": s[::-2], "every3": s[1:-1:3],
            "rev": xs[-2::-1], "steps": xs[::v], "text": s[lo::v], "window": xs[lo:lo + 4:v],
            "upto": s[:lo:v], "tail": state.tail}


@entry("n BIGINT", columns={"xs": "ARRAY<BIGINT>", "ys": "ARRAY<BIGINT>", "v": "BIGINT"},
       strategies={"xs": LISTS, "ys": LISTS, "v": SMALL_BIGINTS})
def nested_comprehensions(k, xs, ys, v, state):
    # None < 3 in a clause raises TypeError, for the element that reaches it.
    if xs is None or ys is None:
        return None
    pairs = [a + b for a in xs for b in ys if a is not None and b is not None and a < b]
    products = [a * b for a in xs if a is not None if a > 0 for b in ys if b != a if b % 2 == 0]
    spread = [b for a in xs for b in [a, a] if b is None or b != 0]
    state.update(n=len(pairs) + len(products))
    return {"k": k, "pairs": pairs, "products": products, "spread": spread,
            "total": sum(a - b for a in xs if a is not None for b in ys if b is not None),
            "below": [a for a in xs for b in ys if v is not None and a < v]}


@entry("n BIGINT", columns={"xs": "ARRAY<BIGINT>", "v": "BIGINT"},
       strategies={"xs": LISTS, "v": SMALL_BIGINTS})
def loop_yields(k, xs, v, state):
    # yield in for loops: the rows in Python's order among the function's other yields, a
    # nested loop's rows inside its enclosing iteration's, continue, a bare return leaving
    # the generator (what it yielded stays emitted, the state update after the loop does not
    # run); None < v raises TypeError in the iteration that reaches it.
    yield {"k": k, "i": -1, "x": v}
    if xs is None:
        return
    n = 0
    for i, x in enumerate(xs):
        if x == 0:
            continue
        if x == 17:
            return
        if v is not None and x < v:
            yield {"k": k, "i": i, "x": x}
        for y in range(x % 3 if x is not None else 0):
            yield {"k": k, "i": 100 * i + y, "x": None}
        n += 1
    state.update(n=(state.n or 0) + n)
    yield {"k": k, "i": n, "x": state.n}


@entry("n BIGINT", columns={"xs": "ARRAY<BIGINT>", "v": "BIGINT"},
       strategies={"xs": LISTS, "v": SMALL_BIGINTS})
def loop_break_continue(k, xs, v, state):
    # break and continue: the carried variables as the iteration left them, the rest of the
    # list skipped after a break (an assert failing in an iteration before the break raises,
    # one after it does not); a break in a nested loop leaves that loop only. The targets
    # after the loops: where the break left them, else the last element; x unbound after an
    # empty list (UnboundLocalError), i holding its value from before the loop.
    if xs is None:
        return None
    total = seen = 0
    for x in xs:
        seen += 1
        if x is None:
            continue
        assert x != 13, "thirteen"
        if x < 0:
            break
        total += x
    first_big = None
    pairs = 0
    i = -1
    for i, a in enumerate(xs):
        if first_big is None and a is not None and a > 10:
            first_big = i
        for b in xs:
            if b is None or b == a:
                break
            pairs += 1
        if pairs > 6:
            break
    state.update(n=total)
    return {"k": k, "total": total, "seen": seen, "first_big": first_big, "pairs": pairs,
            "x": x, "i": i}


@entry("n BIGINT", columns={"xs": "ARRAY<BIGINT>", "v": "BIGINT"},
       strategies={"xs": LISTS, "v": SMALL_BIGINTS})
def loop_early_return(k, xs, v, state):
    # return in a loop leaves the function: its row, no state update after the loop (the
    # state is as before the loop), None for no row; in a nested loop too.
    if xs is None:
        return None
    for i, x in enumerate(xs):
        if x is not None and x == v:
            return {"k": k, "at": i, "n": state.n}
        if x is not None and x < -15:
            return None
        for y in xs:
            if y is not None and x is not None and y * 2 == x and y != 0:
                return {"k": k, "at": 100 + i, "n": y}
    state.update(n=(state.n or 0) + 1)
    return {"k": k, "at": -1, "n": state.n}


@entry("n BIGINT", columns={"xs": "ARRAY<BIGINT>", "v": "BIGINT"},
       strategies={"xs": LISTS, "v": SMALL_BIGINTS})
def loop_else(k, xs, v, state):
    # for ... else: the else runs where no break ended the loop (after an empty list too; a
    # continue does not skip it). A name assigned before every break and in the else is
    # assigned after the loop: the breaking iteration's value, else the else's. The nested
    # search: the inner loop's else continues the outer loop, a break after it ends the outer
    # one. A yield in the body and in the else; a return in the body leaves before the else.
    if xs is None:
        return
    for i, x in enumerate(xs):
        if x is None:
            continue
        if v is not None and x > v:
            found = x
            at = i
            break
    else:
        found = None
        at = -1
    pair = None
    for a in xs:
        for b in xs:
            if a is not None and b is not None and a + b == 10:
                break
        else:
            continue
        pair = a
        break
    n = state.n or 0
    for x in xs:
        n += 1
        if x == 13:
            yield {"k": k, "found": found, "at": at, "pair": pair, "n": -1}
            return
        if x == 7:
            yield {"k": k, "found": None, "at": None, "pair": None, "n": n}
    else:
        state.update(n=n)
        yield {"k": k, "found": found, "at": at, "pair": pair, "n": state.n}


@entry("n BIGINT")
def assert_messages(k, v, s, state):
    # The message is evaluated only where the assertion fails: 10 // v raises
    # ZeroDivisionError for v == 0, as Python does, and not where v is not 0.
    assert v is None or v < 1_000_000, f"v={v} is too large for {k}"
    assert s != "boom", "bad input: " + s + str(v)
    assert v is None or v != 0, 10 // v
    state.update(n=(state.n or 0) + 1)
    return {"k": k, "n": state.n}


@entry("n BIGINT, total DOUBLE, m MAP<STRING, BIGINT>",
       columns={"xs": "ARRAY<BIGINT>", "m": "MAP<STRING, BIGINT>"},
       strategies={"xs": LISTS, "m": MAPS})
def augmented_items(k, xs, m, state):
    # ys[-1] *= 2 of a None item raises TypeError, seen["a"] -= 1 KeyError where m has no
    # "a"; state.n += 1 is state.update(n=state.n + 1).
    ys = list(xs or [0])
    ys[-1] *= 2
    if m is not None:
        seen = dict(m)
        seen["a"] -= 1
        state.update(m=seen)
    if state.exists and state.n is not None:
        state.n += 1
        state.total *= 2
    else:
        state.update(n=1, total=0.5)
    return {"k": k, "ys": ys, "n": state.n, "total": state.total, "m": state.m}


@entry("xs ARRAY<BIGINT>", columns={"v": "BIGINT", "ys": "ARRAY<BIGINT>"},
       strategies={"v": SMALL_BIGINTS, "ys": LISTS})
def list_in_place(k, v, ys, state):
    # A local copy of the state's list changed in place: append, insert at a clamped index,
    # extend with None items, pop (IndexError of an empty list), remove (ValueError where the
    # value is absent).
    xs = list(state.xs or [])
    if v is not None:
        xs.append(v)
        # v * 2 within 64 bits: beyond, the compiled function fails at the product (its ints
        # are BIGINTs), where Python would go on to the list's own errors.
        xs.insert(v % 5 - 3, v * 2 if -(2 ** 62) <= v < 2 ** 62 else v)
    xs.extend(ys or [])
    last = None
    if v is not None and v > 6:
        last = xs.pop(v % 3 - 1)
    if v is not None and v < -6:
        xs.remove(v * 2 if v % 2 and v >= -(2 ** 62) else v + 100)
    state.update(xs=xs[-LIMIT:])
    return {"k": k, "xs": xs, "last": last}


@entry("xs ARRAY<BIGINT>", columns={"v": "BIGINT", "ys": "ARRAY<BIGINT>"},
       strategies={"v": SMALL_BIGINTS, "ys": LISTS})
def list_reordered(k, v, ys, state):
    # sort (TypeError between None and an int; stable by a key), del (IndexError), reverse
    # and clear of a local list, append in a loop; and/or of operands of different types where
    # only their truth counts (an if's test, a conditional expression's, not's operand).
    xs = [x for x in (ys or []) if x is not None] if v is None or v % 4 else list(ys or [])
    if ys and not (v and ys[0]):
        xs.sort(reverse=True)
    else:
        xs.sort(key=lambda x: abs(x - 2))
    if v is not None and v > 5:
        del xs[v % 4 - 2]
    xs.reverse()
    if v == 0:
        xs.clear()
    evens = []
    for x in xs:
        if x % 2 == 0:
            evens.append(x)
    state.update(xs=(state.xs or []) + xs[:1])
    return {"k": k, "xs": xs, "evens": evens}


@entry("m MAP<STRING, BIGINT>", columns={"s": "STRING", "v": "BIGINT", "m2": "MAP<STRING, BIGINT>"},
       strategies={"s": STRINGS, "v": SMALL_BIGINTS, "m2": MAPS})
def dict_in_place(k, s, v, m2, state):
    # setdefault, update from a dict (a present key keeps its place, new ones go last) or from
    # keywords, pop with a default and without (KeyError), del (KeyError), clear.
    m = dict(m2 or {})
    if s is not None:
        n = m.setdefault(s, 0)
        m[s] = n + 1
    if v is not None and v > 5:
        m.update(state.m or {})
        del m["b"]
    elif v is not None and v < -5:
        m.update(last=v)
        m.pop(s[::-1])
    elif v == 0:
        m.clear()
    dropped = m.pop("a", -1)
    state.update(m=m)
    return {"k": k, "m": m, "dropped": dropped}


@entry("seen ARRAY<STRING>, dups BIGINT",
       columns={"s": "STRING", "v": "BIGINT", "xs": "ARRAY<BIGINT>", "ys": "ARRAY<BIGINT>"},
       strategies={"s": STRINGS, "v": SMALL_BIGINTS, "xs": LISTS, "ys": LISTS})
def set_dedup(k, s, v, xs, ys, state):
    # Deduplication with a set of the state's list: a duplicate emits nothing; None is an
    # element (kept out of the stored list, as sorted() of None and a str raises); remove
    # raises KeyError where the element is missing. And a set carried through a for loop
    # (add, discard), |= and -=, methods of lists and sets, and the builtins whose result a
    # set's order cannot change.
    seen = set(state.seen or [])
    if s in seen:
        state.update(dups=(state.dups or 0) + 1)
        return None
    seen.add(s)
    if v == 7:
        seen.remove("boom")
    kept = {x for x in seen if x is not None}
    state.update(seen=sorted(kept)[-LIMIT:])
    numbers = set()
    repeats = 0
    for x in xs or []:
        if x in numbers:
            repeats += 1
        numbers.add(x)
        if x is not None and x < -15:
            numbers.discard(None)
    others = set(ys or [])
    others -= {v}
    others |= {0}
    both = numbers.intersection(ys or [], others)
    found = {x % 3 for x in numbers if x is not None}
    return {"k": k, "s": s, "n": len(seen), "kept": len(kept), "first": min(kept, default=None),
            "dups": state.dups, "repeats": repeats, "numbers": len(numbers),
            "found": sorted(found), "both": sorted(x for x in both if x is not None),
            "sub": numbers.issubset(others), "lt": found < {0, 1, 2}, "gt": others > {0},
            "sup": others.issuperset(found), "disjoint": numbers.isdisjoint(ys or []),
            "any": any(numbers), "all": all(numbers), "hi": max(found, default=-1),
            "total": sum(x for x in numbers if x is not None),
            "union": sorted(numbers.union(ys or [], {v}) - {None})}


@entry("n BIGINT")
def set_algebra(k, v, x, b, state):
    # 1, 1.0 and True are one element, None is one, and where equal elements meet the one
    # Python keeps shows in str(): the left set's on |, the smaller set's on &.
    a = {1, 2.0, None, v}
    c = {x, 1.0, 3}
    u = a | c
    i = a & c
    d = a - c
    sd = a ^ c
    empty = set()
    return {"k": k, "u": len(u), "i": len(i), "d": len(d), "sd": len(sd),
            "u_items": [str(e) for e in sorted(e for e in u if e is not None)],
            "i_items": [str(e) for e in sorted(e for e in i if e is not None)],
            "one": 1 in u, "true": True in a, "none": None in sd, "x_in": x in a,
            "sub": i <= a, "sup": u >= c, "eq": a == c,
            "ne": a - {None} != {v, 1, 2}, "empty": not empty, "eq_empty": d - d == empty,
            "bools": len({b, True} - {False}),
            "ints": sum({v if v is None else v % 5, 3, 4} - {None}), "disjoint": a.isdisjoint(c), "sub2": {1}.issubset(a)}


@entry("groups MAP<STRING, ARRAY<BIGINT>>", columns={"s": "STRING", "v": "BIGINT"},
       strategies={"s": STRINGS, "v": SMALL_BIGINTS})
def nested_in_place(k, s, v, state):
    # A dict's lists changed in place, one level down: setdefault(...).append, append after an
    # `if key not in g` insert, += (extend), an item's assignment, pop (IndexError of an
    # empty list), an absent key's append (KeyError).
    g = dict(state.groups or {})
    key = s or "-"
    g.setdefault(key, []).append(v)
    if v is not None and v > 5:
        if "big" not in g:
            g["big"] = []
        g["big"] += [v // 2, v % 4]
    elif v == 0:
        g[key][0] = len(g)
        g[key if s != "a" else "a"].pop()
    elif v == 3 and key == "b":
        g["a"].append(3)
    state.update(groups={name: items[-LIMIT:] for name, items in g.items()})
    return {"k": k, "mine": g.get(key)}


@entry("buckets ARRAY<ARRAY<BIGINT>>", columns={"v": "BIGINT", "xs": "ARRAY<BIGINT>"},
       strategies={"v": SMALL_BIGINTS, "xs": LISTS})
def list_of_lists(k, v, xs, state):
    # A list's lists changed in place: append at an index (IndexError past the end), in a
    # loop too.
    buckets = [list(b) for b in (state.buckets or [[], []])]
    for x in xs or []:
        if x is not None:
            buckets[x % 3 - 1].append(x)
    state.update(buckets=[b[-LIMIT:] for b in buckets])
    return {"k": k, "buckets": buckets}


@entry("total BIGINT, n BIGINT", columns={"xs": "ARRAY<BIGINT>", "v": "BIGINT"},
       strategies={"xs": LISTS, "v": SMALL_BIGINTS})
def state_in_loop(k, xs, v, state):
    # update and remove in a loop's iterations, in order: the last decides whether the key
    # keeps a state, reads see the newest values (also after the loop); a return in an
    # iteration leaves with the state as that iteration left it; += of a field; remove then
    # update makes a new state.
    if xs is None:
        return None
    for x in xs:
        if x is None:
            continue
        if x < -15:
            state.remove()
            return {"k": k, "neg": x, "total": state.total, "exists": state.exists}
        if x == 0:
            state.remove()
            continue
        if x == 7 and state.exists:
            state.total += x
            continue
        state.update(total=(state.total or 0) + x, n=(state.n or 0) + 1)
        if x > 15:
            break
    return {"k": k, "neg": None, "total": state.total, "exists": state.exists}


@entry("n BIGINT", settings={"timeout_domain": "processing_time"},
       columns={"xs": "ARRAY<BIGINT>"}, strategies={"xs": LISTS})
def timers_in_loop(k, xs, state):
    # set_timer and clear_timer in a loop: the last one decides, state.timer reads the
    # newest; a timing-out call removes the state.
    if state.timing_out:
        state.remove()
        return {"k": k, "n": state.n, "timer": state.timer}
    for x in xs or []:
        if x is None:
            state.clear_timer()
        elif x % 3 == 0:
            state.set_timer(state.batch_time + timedelta(seconds=1 + x % 4))
    state.update(n=(state.n or 0) + 1)
    return {"k": k, "n": state.n, "timer": state.timer}


@entry("n BIGINT", columns={"xs": "ARRAY<BIGINT>", "v": "BIGINT", "s": "STRING"},
       strategies={"xs": LISTS, "v": SMALL_BIGINTS, "s": STRINGS})
def walrus(k, xs, v, s, state):
    # := evaluated once in Python's order; under a short circuit it binds only where its
    # operand runs (half: unbound where v is None); in a comprehension's filter, for the
    # element's value; in a return's dict, before the operand that reads it.
    if (n := len(s or "")) > 2:
        label = "long"
    else:
        label = "short"
    found = v is not None and (half := v // 2 - 1) > 1
    doubled = [y for x in (xs or []) if x is not None and (y := x * 2) > 4]
    total = 0 if (t := state.n) is None else t
    state.update(n=total + n)
    first = half if found or v == 7 else None
    return {"k": k, "n": n, "label": label, "doubled": doubled, "first": first, "t": t,
            "last": (w := n + 1) * w}


@entry("n BIGINT", columns={"s": "STRING", "t": "STRING", "v": "BIGINT"},
       strategies={"s": STRINGS, "t": STRINGS, "v": SMALL_BIGINTS})
def str_search_and_pad(k, s, t, v, state):
    # count (of "" too), rfind, removeprefix/removesuffix, the paddings (center's odd fill
    # character) and zfill's sign, join of a generator; rindex raises ValueError where t is
    # absent (Nones are replaced, so that most cases run through).
    s = s or ""
    t = t or ""
    width = (v or 0) % 9
    fill = t[:1] or "*"
    found = s.rindex(t) if (v or 0) > 7 else s.rfind(t)
    return {"k": k, "count": s.count(t), "found": found,
            "cut": s.removeprefix(t) + "|" + s.removesuffix(t),
            "padded": s.ljust(width, fill) + s.rjust(width) + s.center(width, fill),
            "z": (t or s).zfill(width), "joined": "-".join(w.upper() for w in s.split(",") if w)}


@entry("counts MAP<STRING, BIGINT>",
       columns={"s": "STRING", "m": "MAP<STRING, BIGINT>", "v": "BIGINT"},
       strategies={"s": STRINGS, "m": MAPS, "v": SMALL_BIGINTS})
def map_items_top_k(k, s, m, v, state):
    # A dict's items, keys and values in insertion order (a new key goes last, a pruned one
    # leaves its place); sorted() by a value is stable (ties keep that order, reverse=True
    # too); a dict comprehension prunes; an empty map has no top (top[0] would raise).
    counts = dict(state.counts or {})
    if s is not None:
        counts[s] = counts.get(s, 0) + 1
    for key, n in (m or {}).items():
        counts[key] = counts.get(key, 0) + (n if v is None else n + v % 7)
    kept = {key: n for key, n in counts.items() if n > 0}
    top = sorted(kept.items(), key=lambda kv: kv[1], reverse=True)[:LIMIT]
    state.update(counts=kept)
    return {"k": k, "top": [key for key, _ in top], "best": top[0][0] if top else None,
            "total": sum(kept.values()), "names": list(kept), "keys": list(counts.keys()),
            "high": max(counts, default=None), "back": list(reversed(counts)),
            "ranked": [f"{key}:{n}" for key, n in sorted(counts.items(),
                                                         key=lambda kv: (-kv[1], kv[0]))]}


@entry("n BIGINT", columns={"xs": "ARRAY<BIGINT>", "ys": "ARRAY<BIGINT>", "v": "BIGINT"},
       strategies={"xs": LISTS, "ys": LISTS, "v": SMALL_BIGINTS})
def tuples_zip_enumerate(k, xs, ys, v, state):
    # Tuples as Python has them: unpacked (a, b = b, a), indexed from either end, compared
    # element by element (None < 1 raises TypeError where it decides), in zip (the shortest
    # wins), enumerate and reversed, in loops and comprehensions.
    if xs is None or ys is None:
        return None
    pairs = [(a, b) for a, b in zip(xs, ys, strict=False)]
    evens = [x for i, x in enumerate(xs) if i % 2 == 0]
    total = 0
    for i, (a, b) in enumerate(zip(xs, reversed(ys), strict=False), start=1):
        if a is not None and b is not None:
            total += i * (a - b)
    lo, hi = (v, 0) if v is not None and v < 0 else (0, v)
    lo, hi = hi, lo
    t = (lo, hi, len(pairs))
    first = pairs[0] if pairs else (0, 0)
    last = pairs[-1] if pairs else (0, 0)
    state.update(n=total)
    return {"k": k, "firsts": [a for a, _ in pairs], "evens": evens, "total": total,
            "lo": t[0], "hi": t[-2], "n": t[2], "len": len(t), "has": v in t, "any": bool(t),
            "same": first == last, "less": first < last, "third": t[1:][-1],
            "sorted": [b for _, b in sorted(p for p in pairs if p[0] is not None)],
            "best": max(pairs, key=lambda p: (p[0] is not None, p[0] or 0), default=(0, 0))[0],
            "dict": [f"{a}:{b}" for a, b in dict((a, b) for a, b in pairs if a is not None).items()],
            "larger": max(first, last)[1], "listed": list(t[:2]), "summed": sum(x or 0 for x in t),
            "at": t[v % 3] if v is not None else None}


# Text where Python's Unicode and the JVM's part ways: special casing ("ß".upper() is "SS",
# "İ".lower() two characters, "ŉ" and "ﬁ" expanding), the final sigma, titlecase digraphs
# ("ǅ"), apostrophes and other case-ignorable characters in title(), digits and numerics
# beyond ASCII, whitespace beyond ASCII, characters beyond the BMP (an emoji, a mathematical
# bold capital, Vithkuqi letters: cased since Unicode 14, which Java 17 does not have).
UNICODE_ALPHABET = "aAzßİıΣσςǅǄǆ1١²½Ⅻ \t\u00a0\u3000'.ﬁŉ\u0345ΐ🙂𝐀\U00010570\U00010597Ꟁẞᾼ"
UNICODE_TEXT = st.one_of(
    st.sampled_from(["", "ß", "İstanbul", "ΣΑΣ ΟΔΟΣ.", "ὈΔΥΣΣΕΎΣ", "aΣ", "Σa", "ǅemal ǆ",
                     "they're bill's", "١٢٣", "²½", "ﬁne ŉ", "\U00010570\U00010597", "🙂x",
                     "Hello World", "hello", "HELLO", " \t\u00a0\u3000", "ǅ", "A1b", "Ꟁ"]),
    st.text(alphabet=UNICODE_ALPHABET, max_size=6),
    st.none())


@entry("n BIGINT", columns={"s": "STRING"}, strategies={"s": UNICODE_TEXT})
def str_predicates_and_case(k, s, state):
    # The str predicates and case methods with Python's Unicode tables, for every code point:
    # special casing, the final sigma in lower() (and in capitalize(), title() and swapcase()),
    # title()'s words (a cased character after an uncased one starts one).
    if s is None:
        return None
    state.update(n=(state.n or 0) + len(s))
    return {"k": k, "digit": s.isdigit(), "decimal": s.isdecimal(), "numeric": s.isnumeric(),
            "alpha": s.isalpha(), "alnum": s.isalnum(), "space": s.isspace(),
            "ascii": s.isascii(), "upper": s.isupper(), "lower": s.islower(),
            "title": s.istitle(), "lowered": s.lower(), "uppered": s.upper(),
            "titled": s.title(), "capitalized": s.capitalize(), "swapped": s.swapcase(),
            "folded": s.casefold(), "printable": s.isprintable(),
            "identifier": s.isidentifier(), "n": state.n}


@entry("last STRING", columns={"s": "STRING", "t": "STRING"},
       strategies={"s": UNICODE_TEXT, "t": UNICODE_TEXT})
def str_iteration(k, s, t, state):
    # A str iterates as its characters, one code point each (an emoji is one): in a for loop,
    # comprehensions and generators, list(), enumerate(), reversed(), zip(), min()/max() and
    # sorted() (by code point). Iterating None raises TypeError (t, where s is "" or "ß").
    if s is None:
        return None
    digits = 0
    backwards = ""
    for ch in s:
        if ch.isdigit():
            digits += 1
        else:
            backwards = ch + backwards
    state.update(last="".join(reversed(s))[:3])
    return {"k": k, "digits": digits, "backwards": backwards, "chars": list(s),
            "letters": [c.upper() for c in s if c.isalpha()],
            "pairs": [a + b for a, b in zip(s, t or "", strict=False)],
            "at": [i for i, c in enumerate(s, 1) if c == "a" or c.isspace()],
            "lower": sum(1 for c in s if c.islower()), "smallest": min(s) if s else None,
            "largest": max(s, default="-"), "sorted": "".join(sorted(s)),
            "any": any(c.isupper() for c in s), "all": all(c.isalnum() for c in s),
            "t": len([c for c in t]) if s in ("", "ß") else 0, "last": state.last}


@entry("last TIMESTAMP, gaps ARRAY<DOUBLE>")
def timedelta_arithmetic(k, v, ts, state):
    # timedelta * // / % by ints and timedeltas, divmod, a date moved by td.days only (date -
    # td is date + timedelta(-td.days)), date - date, str() and repr() of timedeltas and
    # datetimes, sum() of an empty list of floats (the int 0), a raise with a message made
    # at run time; OverflowError past year 9999, ZeroDivisionError by a zero timedelta.
    if ts is None:
        return None
    gap = ts - state.last if state.last is not None else timedelta(0)
    gaps = [g for g in (state.gaps or []) if g > 0]
    state.update(last=ts, gaps=(gaps + [gap.total_seconds()])[-LIMIT:])
    n = v if v is not None and -100 < v < 100 else 3
    day = ts.date()
    if n == 99:
        raise ValueError(f"n is {n} at {ts}")
    return {"k": k, "gap": str(gap), "neg": str(-gap), "r": repr(gap), "rt": repr(ts),
            "rd": f"{day!r}", "times": str(gap * n), "div": str(gap / 7),
            "fdiv": str(gap // max(n, 1)), "in_min": gap // timedelta(minutes=1),
            "mod": str(gap % timedelta(seconds=7)), "dm": divmod(gap, timedelta(seconds=3))[0],
            "ratio": gap / timedelta(milliseconds=250) if gap else None,
            "by_zero": gap // gap if n == 7 else None,
            "back": day - timedelta(hours=1), "fwd": day + timedelta(hours=-1),
            "days": (day - date(2026, 1, 1)).days, "later": ts + timedelta(days=n * 30_000),
            "iso": ts.isocalendar()[1], "iso_year": ts.isocalendar().year,
            "iso_day": day.isocalendar().weekday, "sum": str(sum(gaps)), "round": round(sum(gaps)),
            "abs": abs(sum(gaps))}


@entry("xs ARRAY<DOUBLE>, order ARRAY<STRING>")
def heaps_bisect_iterators(k, v, x, s, state):
    # heapq.nlargest/nsmallest (stable, nothing for n <= 0), bisect over a sorted list and
    # insort into it, itertools.pairwise/chain/islice of lists, and a changing method as a
    # conditional expression's branch (an LRU list's eviction).
    xs = list(state.xs or [])
    if x is not None and not math.isnan(x):
        bisect.insort(xs, x)
    order = [w for w in (state.order or []) if w != s]
    order.append(s or "")
    evicted = order.pop(0) if len(order) > LIMIT else None
    state.update(xs=sorted(heapq.nlargest(LIMIT, xs, key=abs)), order=order)
    n = v if v is not None and -5 < v < 5 else 2
    return {"k": k, "top": heapq.nlargest(n, xs), "low": heapq.nsmallest(n, order, key=len),
            "rank": bisect.bisect_left(xs, 0.5), "right": bisect.bisect(xs, 0.5),
            "gaps": [b - a for a, b in itertools.pairwise(xs)], "evicted": evicted,
            "both": list(itertools.chain(order, [s or ""])), "head": list(itertools.islice(xs, 1, 3))}


@entry("n BIGINT")
def map_and_filter(k, v, x, s, state):
    # map() and filter() as the lazy generators they are: consumed by list/sum/max/any/join,
    # iterated by a comprehension or a for loop (each item mapped where the loop reaches it, so
    # int("x") fails where Python's does), unpacked with the length check, over several lists.
    parts = (s or "").split(",")
    digits = list(filter(str.isdigit, parts))
    total = sum(map(int, digits)) if len(digits) < 3 else 0
    for p in map(str.strip, parts):
        if p == "stop":
            break
        total += len(p)
    lo, hi = map(abs, sorted([v or 0, total]))
    state.update(n=(state.n or 0) + len(list(filter(None, parts))))
    return {"k": k, "lens": list(map(len, parts)), "total": total, "lo": lo, "hi": hi,
            "longest": max(map(len, parts)), "any": any(map(str.isupper, parts)),
            "joined": "|".join(map(str, [v, x])), "pairs": list(map(lambda a, b: a + b, parts, "xyz")),
            "ints": [n + 1 for n in map(int, filter(None, parts))] if v == 5 else None,
            "kept": list(filter(lambda p: len(p) > 1, parts)), "n": state.n}


TIERS = [(0, "bronze", ["b"]), (100, "silver", []), (1000, "gold", ["g", "G"])]
ROUTES = {"login": {"ok": "home", "fail": "retry"}, "pay": {"fail": "support"}}


@entry("seen MAP<STRING, BIGINT>")
def first_items_and_lookups(k, v, x, s, state):
    # any()/all() stop at the deciding item and next() at the first one: later items are not
    # computed, so their failures are not raised (10 // 0 after a true item); module constants
    # nesting tuples, lists and dicts; rsplit; itemgetter keys; str.format of None with !r.
    xs = [1, v if v is not None else 1, 0]
    seen = dict(state.seen or {})
    kind, _, detail = (s or "").partition(":")
    seen[kind] = seen.get(kind, 0) + 1
    state.update(seen=seen)
    spent = abs(v or 0) * 10
    tier = next((name for floor, name, _ in reversed(TIERS) if spent >= floor), None)
    return {"k": k, "any": any(10 // d > 1 for d in xs), "all": all(10 // d < 10 for d in xs),
            "next": next((10 // d for d in xs if d != 1), -1), "first": next(iter(xs)),
            "char": next((c for c in (s or "") if c.isdigit()), None), "tier": tier,
            "to_next": next((f - spent for f, _, _ in TIERS if f > spent), None),
            "marks": len(TIERS[-1][2]), "route": ROUTES.get(kind, {}).get(detail, "unknown"),
            "tail": (s or "").rsplit(",", 1), "right": (s or "").rsplit(None, v if v is not None and -2 < v < 3 else 1),
            "ranked": [w for w, _ in sorted(seen.items(), key=operator.itemgetter(1, 0))],
            "msg": "{0!r} -> {1!r}".format(x, s), "top": max(seen.items(), key=operator.itemgetter(1))[0]}


# Times as text near the formats parsed_times reads ("%Y-%m-%d %H:%M:%S", ISO): mostly valid,
# now and then one Python refuses (a field out of range, a character off, unconverted text).
TIME_TEXTS = mostly(
    st.datetimes(datetime(1990, 1, 1), datetime(2040, 1, 1)).map(
        lambda d: d.strftime("%Y-%m-%d %H:%M:%S")),
    st.sampled_from(["2024-13-01 00:00:00", "2024-02-30 10:00:00", "2024-01-01 10:00:00x",
                     "2024-01-01 10:00", "", None, "2024-01-01T10:00:00"]), 25)
# Epoch seconds as floats: fractions that round half to even at the microsecond, negatives,
# NaN and what no datetime holds.
EPOCHS = mostly(
    st.one_of(st.floats(-2e9, 4e9, allow_nan=False).map(lambda f: round(f, 7)),
              st.sampled_from([0.0, -0.5, 1.0000005, 1.0000015, 1e9 + 0.25, -1e-7, 2.5e-6])),
    st.sampled_from([float("nan"), 1e20, -1e12, 253402300800.0, None]), 25)
BASES = mostly(st.sampled_from([0, 2, 8, 10, 16, 36]), st.sampled_from([1, 37, -1, None]), 25)
NUMBER_TEXTS = mostly(
    st.sampled_from(["0x1f", "0o17", "0b101", "17", "0", "00", "0_0", " -0x_ff ", "1_000", "z",
                     "\u0661\u0662", "+7"]),
    st.sampled_from(["010", "0x", "1__0", "_1", "é", "9" * 20, None]), 25)


@entry("last TIMESTAMP, n BIGINT",
       columns={"v": "BIGINT", "x": "DOUBLE", "s": "STRING", "t": "STRING", "w": "BIGINT"},
       strategies={"v": SMALL_BIGINTS, "x": EPOCHS, "s": TIME_TEXTS, "t": NUMBER_TEXTS,
                   "w": BASES})
def parsed_times(k, v, x, s, t, w, state):
    # datetime.strptime of a constant format (ValueError with Python's message for text that
    # does not match, a field out of range, unconverted text), fromisoformat of datetimes and
    # dates, fromtimestamp of float epoch seconds (the fraction rounded half to even; NaN and
    # years past 9999 raise), timedelta of float seconds, td * float and td / float
    # (CPython's exact rounding; by an int-or-float, as the int or the float it holds),
    # isocalendar() kept as a named tuple, int(t, 0) and int(t, w) of a base known at run
    # time (ValueError outside 0 and 2..36).
    if s is None:
        return None
    ts = datetime.strptime(s, "%Y-%m-%d %H:%M:%S")
    day = date.fromisoformat(s[:10])
    iso = ts.isocalendar()
    year, week, weekday = iso
    gap = ts - state.last if state.last is not None else timedelta(0)
    state.update(last=ts, n=(state.n or 0) + 1)
    at = on = window = scaled = n = any_base = None
    if x is not None and v is not None and v > 0:
        at, on = datetime.fromtimestamp(x), date.fromtimestamp(x)
        window = timedelta(seconds=x / 1000, milliseconds=v)
        scaled = timedelta(minutes=3) * (x / 1e9)
    if t is not None and v is not None and v < 0:
        n = int(t, 0)
        any_base = int(t, w) if w != 10 else None
    return {"k": k, "ts": ts, "same": datetime.fromisoformat(s) == ts, "day": day,
            "week": iso.week, "y": year, "wd": weekday, "d": iso[2], "fee": gap * 1.5,
            "part": gap / 2.5, "mixed": gap * (3 if ts.second % 2 else 0.5),
            "mixed_div": gap / (3 if ts.minute % 2 else -2.5), "at": at, "on": on, "window": window, "scaled": scaled,
            "n": n, "any": any_base}


@entry("xs ARRAY<DOUBLE>, m MAP<STRING, BIGINT>")
def container_repr(k, v, x, s, state):
    # str() and repr() of lists, tuples and dicts (f-strings and raise messages use them):
    # each item's repr(), None for a null, a one-item tuple's comma, a dict in insertion order.
    xs = ((state.xs or []) + [x, None if v == 0 else 1.5])[-LIMIT:]
    m = dict(state.m or {})
    m[s or ""] = v if v is not None else 0
    state.update(xs=xs, m=m)
    pair = (s, v, None)
    if v == 7:
        raise ValueError(f"bad {pair} after {xs}")
    return {"k": k, "xs": str(xs), "m": f"{m}", "pair": repr(pair), "one": str((s,)),
            "empty": str([]), "nested": str([[v, 1], [2]]), "words": str((s or "").split(",")),
            "flags": str([True, None]), "d": str({"a": [x]}), "msg": f"values {xs!r} and {pair}"}


# Numbers as int() and float() read them: Unicode decimal digits and whitespace, underscores
# between digits, nan/inf/infinity in any case with a sign; now and then what Python refuses
# (\x1c is whitespace to str.strip() but not to int(); "²" is a digit but not a decimal).
INT_TEXT = seldom(
    st.sampled_from([" ٣٤ ", "1_000", "-0", "+5", "１２", "\u3000 7\x85", "0_0", "007", "-٣",
                     "9223372036854775807", "\t42\n", "١_٢", "𝟗9"]),
    st.sampled_from(["1__0", "_1", "\x1c5", "²", "٣x", "", " ", "9223372036854775808"]), 60)
FLOAT_TEXT = seldom(
    st.sampled_from([" 1e3\n", "nan", "-NaN", "-inf", "+Infinity", "iNfInItY", "١.٥", "1_0.5",
                     ".5", "5.", "-0", "1e-400", "1e400", "1_000", "\u30001.5\x85", "1e1_0",
                     "0.1", "-١e-٣", "4.9e-324"]),
    st.sampled_from(["infinit", "1e", "1_e10", "0x1", "5._5", "\x1c1", "", "nan_"]), 60)
TAB_TEXT = st.one_of(
    st.sampled_from(["a\tb", "\t", "ab\tc\td", "x\n\ty", "12345678\t|", "é\t🙂\t.",
                     "a\r\tb\r\n\tc", "", "a-b_c", "-ab-"]),
    st.text(alphabet="ab\t\n\ré-_🙂", max_size=8),
    st.none())
TAB_SIZES = st.one_of(st.integers(-2, 9), st.none())
TRANSLATION = str.maketrans("ab", "xy", "-")


@entry("n BIGINT", columns={"s": "STRING", "t": "STRING", "u": "STRING", "v": "BIGINT"},
       strategies={"s": INT_TEXT, "t": FLOAT_TEXT, "u": TAB_TEXT, "v": TAB_SIZES})
def number_and_tab_text(k, s, t, u, v, state):
    # int(s) and float(s) as Python parses them; expandtabs (columns restart after \n and \r,
    # a tabsize of 0 or less drops tabs); translate with str.maketrans tables (made when
    # compiling, or a module constant) and a dict display of code points (None deletes).
    n = int(s) if s is not None else None
    state.update(n=n)
    text = u or ""
    # A float as its repr: NaN is not equal to itself in the harness's comparison.
    return {"k": k, "n": n, "x": str(float(t)) if t is not None else None,
            "int_as_float": float(s) if s is not None else None,
            "tabs": text.expandtabs(),
            "tabs_v": text.expandtabs(tabsize=v) if v is not None else None,
            "dropped": text.translate(str.maketrans("a", "x", "-_")),
            "spelled": text.translate(str.maketrans({"a": "A!", "é": None, ord("b"): 0x1F642})),
            "deleted": text.translate({ord("-"): None, ord("é"): "e!"}),
            "module": text.translate(TRANSLATION)}


MAXLENS = seldom(st.one_of(st.integers(0, 4), st.none()), st.just(-1), 40)


@entry("xs ARRAY<BIGINT>, grid ARRAY<ARRAY<DOUBLE>>",
       columns={"v": "BIGINT", "x": "DOUBLE", "w": "BIGINT"},
       strategies={"v": SMALL_BIGINTS, "x": STRATEGIES["x"], "w": MAXLENS})
def float_counts_and_run_time_maxlen(k, v, x, w, state):
    # A Counter of floats (a missing key still the int 0); a deque whose maxlen is a parameter
    # (None: no limit, negative: ValueError); lists of lists with an empty one, joined with
    # lists of ints and of floats.
    weights = Counter()
    for key in [k, "other", k]:
        weights[key] += x if x is not None else 0.5
    last = deque(state.xs or [], maxlen=w)
    last.append(v or 0)
    grid = [[1], []] if (v or 0) > 0 else [[], [2.5]]
    grid = grid + [[v or 0]]
    table = {"a": [], "b": [x or 0.0]}
    state.update(xs=list(last), grid=grid)
    return {"k": k, "total": weights.total(), "mine": weights[k], "missing": weights["nobody"],
            "last": list(last), "sizes": [len(row) for row in grid], "none": len(table["a"]),
            "first": table["b"][0]}


@entry("n BIGINT")
def number_text(k, v, x, s, state):
    # hex/oct/bin of any int (the 64-bit minimum too), chr (ValueError out of range) and ord
    # (TypeError but for one character), bit_length, is_integer, partition/rpartition,
    # int(s, base) (ValueError for what is not that base's literal), splitlines.
    head, sep, tail = (s or "").partition(",")
    left, _, right = (s or "").rpartition(" ")
    small = v is not None and v < 1000
    return {"k": k, "head": head, "sep": sep, "tail": tail, "left": left, "right": right,
            "hex": hex(v) if v is not None else None, "oct": oct(v) if v is not None else None,
            "bin": bin(v) if v is not None else None,
            "bits": v.bit_length() if v is not None else None,
            "char": chr(v + 100) if small else None,
            "whole": x.is_integer() if x is not None else None,
            "code": ord(s) if s is not None and (len(s) == 1 or v == 5) else None,
            "back": (int(hex(v), 16) == v and int(bin(v), 2) == v and int(oct(v), base=8) == v)
            if v is not None else None,
            "parsed": int(s, 16) if s is not None and v == 4 else None,
            "lines": ((s or "") + "\n" + k + "\r\n\u2028").splitlines()}


@entry("n BIGINT", columns={"v": "BIGINT", "xs": "ARRAY<BIGINT>", "w": "BIGINT"},
       strategies={"v": SMALL_BIGINTS, "xs": LISTS, "w": STEPS})
def ranges_and_repetition(k, v, xs, w, state):
    # range() as a value (comprehensions, list, sum, reversed, zip, max with a key), len and
    # in as Python's arithmetic on huge ranges, a computed step (zero
    # raises ValueError), list * int (a negative count is []).
    n = (v or 0) % 6
    squares = [i * i - 3 * i for i in range(n)]
    best = max(range(len(squares)), key=lambda i: squares[i]) if squares else -1
    row = [0] * n + (n - 3) * [1, None] + [] * 5
    row *= 2
    pairs = [i * x for i, x in zip(range(10, 0, -3), xs or [], strict=False) if x is not None]
    state.update(n=sum(range(n)) + len(row))
    return {"k": k, "squares": squares, "best": best, "row": row, "pairs": pairs,
            "found": v in range(-10, 10, 3), "absent": v not in range(n, n),
            "evens": list(range(0, 2 * n, 2)), "back": list(reversed(range(n))),
            "huge": len(range(-2 ** 62, 2 ** 62, 7)), "big_in": 3 * 10 ** 9 in range(0, 2 ** 62, 3),
            "span": len(range(-9, v or 0, w or 1)),
            "stepped": list(range(n, -n, w if w is not None else -1))
            if -100 < (w or 0) < 100 else [], "n": state.n}


@entry("first BIGINT", columns={"v": "BIGINT", "xs": "ARRAY<BIGINT>"},
       strategies={"v": SMALL_BIGINTS, "xs": LISTS})
def unpacking_lists(k, v, xs, state):
    # Lists unpacked into names: a, b = sorted(...), a starred target, for a, b over lists;
    # a list of another length raises ValueError (not enough / too many values), None
    # TypeError.
    lo, hi = sorted([(v or 0) % 10, len(xs or [])])
    a, *middle, z = [lo, lo + 1, hi] + (xs or [])[:1]
    total = 0
    for p, q in [[lo, hi], [hi, lo]] + ([[v, v]] if v == 3 else []):
        total += p - q
    if v is not None and v % 8 == 1:
        first, *rest = xs
    elif v is not None and v % 8 == 2:
        first, second = xs
        rest = [second]
    else:
        first, rest = -1, []
    state.update(first=first)
    return {"k": k, "lo": lo, "hi": hi, "a": a, "middle": middle, "z": z, "total": total,
            "first": first, "rest": rest}


class Kinds:
    """Constants a match statement's value patterns name (case Kinds.LOGIN)."""

    LOGIN = 1
    PAY = 2


@entry("n BIGINT", settings={"timeout": "3 seconds"},
       columns={"v": "BIGINT", "s": "STRING", "b": "BOOLEAN", "x": "DOUBLE"})
def match_and_local_functions(k, v, s, b, x, state, threshold=3, cap=None):
    # match: literal, | and None patterns, captures and guards, value patterns of constants,
    # True/False by identity, sequence patterns over a tuple; the first matching case runs.
    # Local lambdas and a nested def of one return, inlined at each call (late binding: a
    # free name is read when called), as a sort key too; default parameters naming no
    # column are their defaults, in a timing-out call too (its columns are None).
    match s.split(":")[0] if s else s:
        case "a" | "ab":
            kind = Kinds.LOGIN
        case "é" | "boom":
            kind = Kinds.PAY
        case None | "":
            kind = -1
        case _:
            kind = 0
    match v:
        case 0 | 1:
            size = "small"
        case None:
            size = "none"
        case n if n < 0 and n % 3 == 0:
            size = "neg" + str(n)
        case 7 as seven:
            size = str(seven * 2)
        case _:
            size = "big"
    match kind:
        case Kinds.LOGIN:
            label = "login"
        case Kinds.PAY:
            label = "pay"
        case other:
            label = f"other {other}"
    match b:
        case True:
            truth = 1
        case False:
            truth = 0
        case _:
            truth = -1
    match (kind, x):
        case (1, 1.5):
            pair = "login at 1.5"
        case (0, y) if y is not None and y > 0:
            pair = "positive"
        case (_, None):
            pair = "no x"
        case _:
            pair = "else"
    w = v % 100 if v is not None else 1
    scale = lambda y: y * 2 + threshold  # noqa: E731 (a local lambda is the point)
    def clip(y, lo):
        """Clipped below."""
        return lo if y < lo else y
    over = lambda: w > threshold  # noqa: E731
    first = over()
    w = -w
    late = over()
    ordered = sorted([w, 3, -1, threshold], key=scale)
    state.update(n=clip(scale(w), -5) + kind if cap is None else cap)
    return {"k": k, "kind": kind, "size": size, "label": label, "truth": truth, "pair": pair,
            "scaled": scale(w), "clipped": clip(w, lo=-threshold), "first": first, "late": late,
            "ordered": ordered, "n": state.n,
            "halved": (lambda z: z / 2)(x) if x is not None else None}


# --- per record: state operations ---------------------------------------------------------

@entry("n BIGINT")
def remove_then_update(k, v, state):
    if v is None:
        return {"k": k, "n": state.n, "exists": state.exists}
    if v % 3 == 0:
        state.remove()
    if v % 2 == 0:
        state.update(n=(state.n or 0) + 10)
    if v % 5 == 0:
        state.remove()
    return {"k": k, "n": state.n, "exists": state.exists}


@entry("n BIGINT", settings={"timeout": "3 seconds", "checkpoint_interval": 2})
def idle_timeout(k, v, state):
    if state.timing_out:
        return {"k": k, "n": state.n, "timed_out": True}
    if v is not None and v < -5:
        return None  # a record that leaves the state as it was still refreshes the key
    state.update(n=(state.n or 0) + 1)
    return {"k": k, "n": state.n, "timed_out": False}


@entry("n BIGINT", settings={"timeout_domain": "processing_time"},
       initial_state=[{"k": "a", "n": 100}, {"k": "zz", "n": 7}])
def processing_timers(k, v, state):
    if state.timing_out:
        yield {"k": k, "n": state.n, "fired": state.timer, "exists": state.exists}
        if state.n is not None and state.n > 3:
            state.remove()
        else:
            state.set_timer(state.batch_time + timedelta(seconds=2))
        return
    state.update(n=(state.n or 0) + 1)
    if v is None:
        state.clear_timer()
    elif v < 0:
        state.remove()
        state.set_timer(state.batch_time + timedelta(seconds=1))
    else:
        state.set_timer(state.batch_time + timedelta(seconds=1 + v % 4))
    yield {"k": k, "n": state.n, "fired": state.timer, "exists": state.exists}


@entry("latest TIMESTAMP, n BIGINT", settings={"timeout_domain": "event_time"},
       event_time="ts", delay="10 seconds")
def event_timers(k, ts, state):
    if state.timing_out:
        state.remove()
        return {"k": k, "n": state.n, "latest": state.latest, "wm": state.watermark}
    if state.timer is not None and state.watermark is not None and state.timer < state.watermark:
        state.set_timer(state.watermark)  # a passed timer may not be kept: fire it next
    if ts is None:
        return None
    latest = ts if state.latest is None else max(ts, state.latest)
    state.update(latest=latest, n=(state.n or 0) + 1)
    deadline = latest + timedelta(seconds=5)
    if state.watermark is None or deadline >= state.watermark:
        state.set_timer(deadline)
    else:
        state.clear_timer()
    return {"k": k, "n": state.n, "latest": latest, "wm": state.watermark}


# --- collections and statistics ----------------------------------------------------------

@entry("counts MAP<STRING, BIGINT>, groups MAP<STRING, ARRAY<BIGINT>>, "
       "sizes MAP<BIGINT, BIGINT>")
def counters_and_defaultdicts(k, v, s, state):
    # Counter of a stored MAP (a copy), of a generator and of a str's characters: c[x] is 0
    # where x is missing, c[x] += n starts from 0, update() adds (new keys last),
    # most_common() keeps ties in insertion order, total(); stored as a MAP.
    c = Counter(state.counts or {})
    c.update(w for w in (s or "").split(",") if w)
    c["a"] += 1
    letters = collections.Counter(s)
    top = c.most_common(2)
    # defaultdict(list) and (int): d[k].append(x) and d[k] += 1 insert the default first;
    # x = d[k] inserts it too; get() and in do not.
    groups = defaultdict(list)
    sizes = defaultdict(int)
    for w in (s or "").split(","):
        groups[w].append(v)
        sizes[len(w)] += 1
    first = groups["?"]
    state.update(counts=c, groups=groups, sizes=sizes)
    return {"k": k, "a": c["a"], "missing": c["zz"], "n": len(c), "total": c.total(),
            "top": [w for w, n in top], "letters": sorted(letters), "has_b": "b" in c,
            "none": len(c.most_common(-1)), "keys": list(groups), "first": len(first),
            "got": sizes.get(99, -1), "has": 3 in sizes}


@entry("amounts ARRAY<DOUBLE>, ids ARRAY<BIGINT>")
def deques(k, v, x, b, state):
    # deque(maxlen=N): append drops from the left, appendleft from the right; pop/popleft
    # (IndexError on an empty deque); indexing, in, len, sum/max, truthiness; stored as list(d).
    window = deque(state.amounts or [], maxlen=3)
    if x is not None:
        window.append(x)
    recent = deque(state.ids or [], maxlen=CAPACITY)
    recent.appendleft(v)
    if v is not None and v % 3 == 0:
        recent.extend([v, 0])
    if v == 2:
        recent.extendleft([7, 8])
    gone = None
    if b:
        gone = recent.pop()
    if v == 5:
        recent.clear()
        gone = recent.popleft()
    unbounded = deque(recent)
    unbounded.append(1)
    state.update(amounts=list(window), ids=list(recent))
    return {"k": k, "n": len(window), "total": sum(window), "top": max(window) if window else None,
            "first": window[0] if window else None, "last": recent[-1] if recent else None,
            "has": 0 in recent, "gone": gone, "long": len(unbounded)}


@entry("xs ARRAY<DOUBLE>, vs ARRAY<BIGINT>")
def statistics_of_a_window(k, v, x, state):
    # statistics as CPython computes them: exact means and variances (an int where whole),
    # correctly rounded deviations, fmean by fsum; medians (of an even count a float), the
    # mode (the first most common); StatisticsError for too few points.
    xs = ((state.xs or []) + ([x] if x is not None else []))[-3:]
    vs = ((state.vs or []) + [v or 0])[-4:]
    state.update(xs=xs, vs=vs)
    if v == 7:
        statistics.stdev(vs[:1])  # one point: StatisticsError
    return {"k": k, "mean_v": statistics.mean(vs), "mean_x": statistics.mean(xs) if xs else None,
            "fmean_x": statistics.fmean(xs) if xs else None,
            "var_v": statistics.variance(vs) if len(vs) > 1 else None,
            "pstdev_x": statistics.pstdev(xs) if xs else None,
            "median": statistics.median(vs), "low": median_low(vs),
            "high": statistics.median_high(vs), "mode": statistics.mode(vs)}


# --- group functions ----------------------------------------------------------------------

@entry("n BIGINT, total BIGINT")
def group_totals(k, rows, state):
    total = sum(r.v for r in rows
                if r.v is not None and -1_000_000_000_000 < r.v < 1_000_000_000_000)
    state.update(n=(state.n or 0) + len(rows), total=(state.total or 0) + total)
    return {"k": k, "rows": len(rows), "n": state.n, "total": state.total,
            "nulls": len([r.v for r in rows if r.v is None])}


@entry("hi DOUBLE")
def group_max(k, rows, state):
    # max() of no values raises ValueError: a batch whose x are all null fails the query.
    hi = max(r.x for r in rows if r.x is not None)
    lo = min(r.x for r in rows if r.x is not None)
    state.update(hi=hi if state.hi is None else max(hi, state.hi))
    return {"k": k, "hi": state.hi, "lo": lo}


@entry("best DOUBLE")
def group_keyed(k, rows, state):
    # min/max over rows with key= and default= (records in record order, the first best
    # wins, a key that handles None), sorted() of the batch's floats.
    best = max((r.x for r in rows if r.x is not None), key=lambda y: 0.0 - abs(y), default=None)
    first = min((r.v for r in rows), key=lambda y: 0 if y is None else 1, default=-1)
    top = max((r.v for r in rows if r.v is not None and -1000 < r.v < 1000), default=0)
    state.update(best=best if best is not None else state.best)
    return {"k": k, "best": best, "first": first, "top": top, "state": state.best,
            "xs": sorted([r.x for r in rows if r.x is not None], reverse=True)}


@entry("flags BIGINT")
def group_any_all(k, rows, state):
    some = any(r.b for r in rows)
    every = all(r.v > 0 for r in rows if r.v is not None)
    state.update(flags=(state.flags or 0) + (1 if some else 0) + (2 if every else 0))
    return {"k": k, "some": some, "every": every, "flags": state.flags}


@entry("top ARRAY<BIGINT>")
def group_lists(k, rows, state):
    names = [r.s for r in rows]
    values = sorted([r.v for r in rows
                     if r.v is not None and -1_000_000_000_000 < r.v < 1_000_000_000_000])
    top = sorted((state.top or []) + values)[-LIMIT:]
    state.update(top=top)
    return {"k": k, "names": names, "values": values, "top": top}



@entry("total DOUBLE, hi BIGINT")
def group_loop(k, rows, state):
    # for r in rows: the records in record order. A running sum of floats and a decaying one
    # (order matters), a running max that starts at None, a count under a condition, the last
    # string seen.
    total = state.total or 0.0
    decayed = 0.0
    hi = state.hi
    positives = 0
    last = ""
    for r in rows:
        if r.x is not None:
            total = total + r.x
            decayed = decayed / 2 + r.x
        if r.v is not None and (hi is None or r.v > hi):
            hi = r.v
        if r.v is not None and r.v > 0:
            positives += 1
        last = r.s or last
    state.update(total=total, hi=hi)
    return {"k": k, "total": total, "decayed": decayed, "hi": hi, "positives": positives,
            "last": last}

@entry("n BIGINT")
def group_loop_yields(k, rows, state):
    # yield, continue, break and return over rows: one alert per large record, in record
    # order, up to a record whose s is "boom"; a running count carried through. A record
    # whose s starts with "ab" ends the call: its rows stay emitted, the state is not updated.
    n = state.n or 0
    for r in rows:
        if r.v is None:
            continue
        if r.s == "boom":
            break
        if r.s is not None and r.s.startswith("ab"):
            yield {"k": k, "v": r.v, "n": -1}
            return
        if r.v > 5:
            n += 1
            yield {"k": k, "v": r.v, "n": n}
    state.update(n=n)
    yield {"k": k, "v": None, "n": n}


@entry("total BIGINT", settings={"timeout_domain": "processing_time"},
       initial_state=[{"k": "a", "total": 5}, {"k": "zz", "total": 1}])
def group_timers(k, rows, state):
    if state.timing_out:
        state.remove()
        return {"k": k, "total": state.total, "rows": -1}
    state.update(total=(state.total or 0) + len(rows))
    state.set_timer(state.batch_time + timedelta(seconds=2))
    return {"k": k, "total": state.total, "rows": len(rows)}


@entry("n BIGINT")
def group_consumers(k, rows, state):
    # A generator over rows handed to what is not an aggregate (Counter, set, sorted's key,
    # str.join, statistics) is the records' values in record order, as Python iterates it.
    words = Counter(r.s for r in rows if r.s is not None)
    kinds = set(r.b for r in rows)
    state.update(n=(state.n or 0) + len(words))
    small = [r.v for r in rows if r.v is not None and -100 < r.v < 100]
    return {"k": k, "top": words.most_common(1)[0][0] if words else None, "n": state.n,
            "kinds": len(kinds), "joined": ",".join(str(r.v) for r in rows),
            "mean": statistics.mean(small) if small else None}


@entry("n BIGINT")
def group_top_and_gaps(k, rows, state):
    # heapq over records by a key, and the gaps between records in time order (pairwise).
    times = sorted(r.ts for r in rows if r.ts is not None)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    top = heapq.nlargest(2, rows, key=lambda r: r.v if r.v is not None else 0)
    state.update(n=(state.n or 0) + len(gaps))
    return {"k": k, "top": [r.s for r in top], "gaps": gaps, "n": state.n}


@entry("n BIGINT", settings={"timeout": "2 seconds", "checkpoint_interval": 1})
def group_idle(k, rows, state):
    if state.timing_out:
        return {"k": k, "n": state.n, "out": True}
    state.update(n=(state.n or 0) + len([r.b for r in rows if r.b]))
    return {"k": k, "n": state.n, "out": False}


@entry("latest TIMESTAMP", settings={"timeout_domain": "event_time"},
       event_time="ts", delay="5 seconds")
def group_event_time(k, rows, state):
    if state.timing_out:
        state.remove()
        return {"k": k, "latest": state.latest, "n": 0}
    if state.timer is not None and state.watermark is not None and state.timer < state.watermark:
        state.set_timer(state.watermark)  # a passed timer may not be kept: fire it next
    times = [r.ts for r in rows if r.ts is not None]
    if not times:
        return {"k": k, "latest": state.latest, "n": len(rows)}
    latest = max(times) if state.latest is None else max(max(times), state.latest)
    state.update(latest=latest)
    if state.watermark is None or latest >= state.watermark:
        state.set_timer(latest)
    return {"k": k, "latest": latest, "n": len(rows)}


@entry("n BIGINT")
def group_rows_as_list(k, rows, state):
    # rows as Python's list of the key's records, in record order: enumerate with rows[i - 1]
    # read in the loop's body, zip with its own tail, reversed with for ... else, indexing,
    # list(rows), a comprehension keeping whole records, sorted records enumerated. Generators
    # whose per-record part reads the state (a threshold) or another aggregate (len(rows)) go
    # over that list rather than into an aggregate.
    limit = state.n if state.n is not None else 0
    ups = repeats = 0
    for i, r in enumerate(rows):
        if i > 0 and r.s == rows[i - 1].s:
            repeats += 1
    for prev, cur in zip(rows, rows[1:], strict=False):
        if prev.v is not None and cur.v is not None and cur.v > prev.v:
            ups += 1
    for r in reversed(rows):
        if r.s is not None:
            last = r.s
            break
    else:
        last = None
    flagged = [r for r in rows if r.b]
    state.update(n=(state.n or 0) + len(rows))
    return {"k": k, "ups": ups, "repeats": repeats, "last": last, "flagged": len(flagged),
            "first": rows[0].v, "final": list(rows)[-1].s,
            "ranks": [i for i, r in enumerate(sorted(rows, key=lambda r: r.s or ""), 1) if r.b],
            "over": sum(1 for r in rows if r.v is not None and r.v > limit),
            "sized": any(r.v == len(rows) for r in rows)}

# Log lines: levels, codes (in other scripts' digits too), separators, newlines where ``$``
# looks, spaces Python's \s knows and ASCII's does not, letters beyond ASCII and the BMP.
LOG_TEXT = st.one_of(
    st.sampled_from(["ERROR 404 not found", "WARN 200 ok, fine; done", "INFO ٣٤٥ x\n",
                     "ERROR 5000 too long", "error: disk FAIL", "a_b9", "A_b9", "x\n", "",
                     "\u00a0 Fail\u2028", "k=v; k2=v2,k3", "İSTANBUL 301 moved", "🙂 x 𝐀_1"]),
    st.text(alphabet="AEZaez09٣_ ,;\n\u00a0é🙂", max_size=10),
    st.none())


KEY_VALUE = re.compile(r"(\w+)=(\w*)")


@entry("errors BIGINT, last STRING", columns={"s": "STRING"}, strategies={"s": LOG_TEXT})
def log_parsing(k, s, state):
    # re: a module-level compiled pattern's match (truth, named and numbered groups, groups()
    # unpacked, m[i], start/end in code points; \d is any script's decimal digit), search
    # under IGNORECASE.
    if s is None:
        return None
    m = LOG_LINE.match(s)
    if not m:
        return {"k": k, "code": None, "rest": None, "errors": state.errors, "at": -1,
                "failed": re.search(r"error|fail", s, re.IGNORECASE) is not None}
    level, code, rest = m.groups()
    if level == "ERROR":
        state.update(errors=(state.errors or 0) + 1, last=m["code"])
    return {"k": k, "code": m.group("level") + m[2], "rest": rest, "errors": state.errors,
            "at": m.start(3) * 100 + m.end("code"), "failed": False}


@entry("n BIGINT", columns={"s": "STRING"}, strategies={"s": LOG_TEXT})
def log_tokens(k, s, state):
    # re's functions: findall (of two groups: tuples, '' for an unmatched one; of \d*: empty
    # matches), sub (a compiled pattern's, with \2, \g<1> and count=), split keeping a group,
    # fullmatch, group(a, b) and span(g); \w and \s are Python's, \B sees
    # characters beyond the BMP whole.
    if s is None:
        return None
    pairs = ""
    for key, value in re.findall(r"(\w+)=(\w*)|;", s):
        pairs += f"{key}:{value}|"
    kv = KEY_VALUE.search(s)
    return {"k": k, "pair": kv.group(1, 2) == ("k", "v") if kv else None,
            "span": kv.span(2)[1] - kv.start() if kv is not None else None,
            "subbed": KEY_VALUE.sub(r"\2=\g<1>", s, count=2), "words": re.findall(r"\w+", s), "clean": re.sub(r"\s+", " ", s).strip(),
            "parts": re.split(r"([,;])\s*", s), "pairs": pairs,
            "ok": re.fullmatch(r"[a-z0-9_]+", s) is not None,
            "empties": re.findall(r"\d*", s), "inner": re.sub(r"\B", ".", s)}
