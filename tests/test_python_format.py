"""The plugin's ``__mws_python_format`` and ``__mws_python_repr`` (what compiled f-string
specs, ``format()``, ``str.format``, ``%`` and ``!r`` run as) against Python's own
``format(value, spec)`` and ``repr(s)``: seeded hypothesis draws of floats (halves that are
not halves in binary, exact ties, signed zeros, the infinities, NaN, subnormals, the largest
doubles), 64-bit ints and non-ASCII strs, each with a spec Python takes for it, all in one
query.
"""
from hypothesis import strategies as st
from pyspark.sql import functions as F

from differential import draw_cases

SEED = 4142
# COUNT cases, drawn as lists of 50 (hypothesis' cost is per example).
COUNT = 1500
PER_EXAMPLE = 50

FLOATS = st.one_of(
    st.floats(),
    st.floats(-1e6, 1e6).map(lambda f: round(f, 3)),
    st.integers(-10 ** 6, 10 ** 6).map(lambda n: n / 8),  # exact ties at every precision
    st.sampled_from([0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.125, 0.375, 2.675, 1.005, 0.045,
                     99.995, 1e16, 1e22, 1e-5, 1e-4, 9.5, 0.95, 5e-324, -5e-324,
                     1.7976931348623157e308, 2.0 ** 53 + 2, 123456789.125, 1e300,
                     float("inf"), float("-inf"), float("nan"), 100.0, 999999.5, 0.1]))
INTS = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-2000, 2000),
                 st.sampled_from([0, 1, -1, (1 << 63) - 1, -(1 << 63), 10 ** 15 + 1,
                                  2 ** 53 + 1]))
STRS = st.one_of(st.text(max_size=6),
                 st.sampled_from(["", "a", "é", "日本", "🙂", "it's", 'say "hi"', "both'\"",
                                  "tab\there", "\\", "\x7f\x00", "\u00a0\u2028\u200b"]))

FILLS = st.sampled_from(["", "", "", "*<", "*>", "*^", "*=", "<", ">", "^", "=", "é^", "0>"])
SPECS = st.tuples(
    FILLS, st.sampled_from(["", "", "+", "-", " "]), st.sampled_from(["", "", "z"]),
    st.sampled_from(["", "", "#"]), st.sampled_from(["", "", "0"]),
    st.sampled_from(["", "", "1", "8", "12", "30"]), st.sampled_from(["", "", ",", "_"]),
    st.sampled_from(["", "", ".0", ".1", ".2", ".3", ".6", ".12", ".17", ".25"]))
FLOAT_TYPES = st.sampled_from(["", "e", "E", "f", "F", "g", "G", "%"])
INT_TYPES = st.sampled_from(["", "d", "b", "o", "x", "X", "e", "f", "g", "%"])
STR_TYPES = st.sampled_from(["", "s"])

CASES = st.one_of(
    st.tuples(st.just("float"), FLOATS, SPECS, FLOAT_TYPES),
    st.tuples(st.just("int"), INTS, SPECS, INT_TYPES),
    st.tuples(st.just("str"), STRS, SPECS, STR_TYPES))


def valid(kind, value, spec):
    try:
        return format(value, spec)
    except (ValueError, TypeError):
        return None


def test_format_and_repr_as_python_gives_them(spark):
    rows, expected = [], []
    drawn = draw_cases(st.lists(CASES, min_size=PER_EXAMPLE, max_size=PER_EXAMPLE),
                       COUNT // PER_EXAMPLE, SEED)
    for kind, value, parts, type_ in (case for _, cases in drawn for case in cases):
        spec = "".join(parts) + type_
        python = valid(kind, value, spec)
        if python is None:
            continue
        rows.append((kind, value if kind == "float" else None, value if kind == "int" else None,
                     value if kind == "str" else None, spec))
        expected.append((python, repr(value) if kind == "str" else None))
    df = spark.createDataFrame(rows, "kind STRING, d DOUBLE, l BIGINT, s STRING, spec STRING")

    def fmt(column):
        return F.call_function("__mws_python_format", F.col(column), F.col("spec"))

    got = df.select(
        F.when(F.col("kind") == "float", fmt("d")).when(F.col("kind") == "int", fmt("l"))
        .otherwise(fmt("s")),
        F.call_function("__mws_python_repr", F.col("s"))).collect()
    wrong = [(r, e, tuple(g)) for r, e, g in zip(rows, expected, got, strict=True)
             if tuple(g) != e]
    assert len(rows) > COUNT // 2
    assert not wrong, f"{len(wrong)} of {len(rows)} differ, e.g. " + "; ".join(
        f"format({r[1] if r[0] == 'float' else r[2] if r[0] == 'int' else r[3]!r}, "
        f"{r[4]!r}): Python {e}, server {g}" for r, e, g in wrong[:8])

