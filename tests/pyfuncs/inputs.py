"""Random inputs for the differential test: hypothesis strategies for a case's batches of
records, with the values that trip Python-vs-SQL semantics — nulls, zeros, negatives, empty and
non-ASCII strings, extreme numbers."""
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, List

from hypothesis import strategies as st

T0 = datetime(2026, 1, 1)
BIGINT_MAX = (1 << 63) - 1
BIGINT_MIN = -(1 << 63)

# Key values: few, so that keys repeat; the harness prefixes each with its case.
KEYS = st.sampled_from(["a", "b", "é", "", "日本"])
# Fewer, for the realistic functions, whose rules need a few records of one key.
FEW_KEYS = st.sampled_from(["x", "é"])

BIGINTS = st.one_of(
    st.integers(-20, 20),
    st.integers(-10 ** 6, 10 ** 6),
    st.sampled_from([0, 0, 1, -1, BIGINT_MAX, BIGINT_MIN, 10 ** 12]),
    st.none())
# Mostly small numbers: the extreme ones reach every function, but rarely enough that a case
# has a chance to run through.
SMALL_BIGINTS = st.one_of(st.integers(-9, 9), st.integers(-9, 9), st.integers(-9, 9), BIGINTS)
DOUBLES = st.one_of(
    st.sampled_from([0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 1e16, 1e-5, -1e308, 1e308, 5e-324,
                     0.1]),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).map(lambda f: round(f, 3)),
    st.none())
STRINGS = st.one_of(
    st.sampled_from(["", "a", "ab", "abc", "é", "日本語", "🙂x", " a b ", "boom", "A,b", "x"]),
    st.text(alphabet="ab,é ", max_size=5),
    st.none())
BOOLEANS = st.one_of(st.booleans(), st.none())
_DICTS = st.dictionaries(st.sampled_from(["a", "b", "é", ""]), st.integers(-5, 5), max_size=3)


def mostly(common: st.SearchStrategy, rare: st.SearchStrategy, one_in: int) -> st.SearchStrategy:
    """``common``, and once in ``one_in`` draws ``rare``."""
    return st.integers(1, one_in).flatmap(lambda i: rare if i == 1 else common)


# Mostly with the key "a", which a lookup without get() needs.
MAPS = mostly(_DICTS.map(lambda d: {"a": 0, **d}), st.one_of(_DICTS, st.none()), 12)
# Event times in seconds from T0, whole milliseconds (a stream's watermark counts them).
TIMESTAMPS = st.one_of(
    st.integers(-30, 90).map(lambda s: T0 + timedelta(seconds=s)),
    st.integers(-30_000, 90_000).map(lambda ms: T0 + timedelta(milliseconds=ms)),
    st.sampled_from([datetime(1969, 12, 31, 23, 59, 59), datetime(2100, 1, 1)]),
    st.none())

# The shared input of the synthetic corpus: every function takes some of these columns.
COLUMNS = {"v": "BIGINT", "x": "DOUBLE", "s": "STRING", "b": "BOOLEAN", "ts": "TIMESTAMP"}
STRATEGIES: Dict[str, st.SearchStrategy] = {
    "v": SMALL_BIGINTS, "x": DOUBLES, "s": STRINGS, "b": BOOLEANS, "ts": TIMESTAMPS}


def records(values: Dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    """One record: a key ``k`` and the columns of ``values``."""
    return st.fixed_dictionaries({"k": KEYS, **values})


def batches(record: st.SearchStrategy, max_batches: int = 5,
            max_records: int = 5) -> st.SearchStrategy:
    """A case: a list of batches (some empty), each a list of records."""
    return st.lists(st.lists(record, max_size=max_records), min_size=1, max_size=max_batches)


def drawn(strategy: st.SearchStrategy, count: int) -> Callable[[Any], List[Any]]:
    """A function drawing ``count`` values of ``strategy`` from hypothesis' ``data``."""
    return lambda data: [data.draw(strategy, label=f"case {i}") for i in range(count)]
