"""The plugin's time parsers, exact timedelta arithmetic and int parser against Python's own,
in one query each: ``__mws_python_strptime`` (``datetime.strptime``),
``__mws_python_datetime_fromisoformat`` and ``__mws_python_date_fromisoformat``
(``fromisoformat``), ``__mws_python_timedelta``, ``_multiply`` and ``_divide``
(``timedelta(seconds=x)``, ``td * x``, ``td / x`` of floats) and ``__mws_python_int``
(``int(s, 0)``, ``int(s, base)`` of a base known at run time).

The strings are seeded hypothesis draws near the formats: valid ones, ones with a field out of
range, a character changed, dropped or added, Unicode digits and whitespace, names in other
cases, fractions and offsets of every length. Each must give Python's datetime, or Python's
exception and its message exactly (``time data '...' does not match format '...'``,
``unconverted data remains: ...``, ``Invalid isoformat string: '...'``).
"""
from datetime import date, datetime, timedelta

from hypothesis import strategies as st
from pyspark.sql import functions as F

from differential import draw_cases

SEED = 4143
PER_EXAMPLE = 50

FORMATS = ["%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%d/%m/%y %I:%M %p", "%Y-%m-%dT%H:%M:%S.%f",
           "%a, %d %b %Y %H:%M:%S", "%A %B %d %Y", "%Y %j", "%j", "%m-%d", "%H:%M",
           "%y%m%d%H%M%S", "%Y-%m-%d %% %w %u", "[%Y] (%m)", "%b %d  %Y"]
# Characters the mutations put in: digits (Unicode ones too), separators, whitespace of
# str.isspace's (which \s matches in Python), letters.
NOISE = st.sampled_from(list("0123456789-: ./TxZ+aA%") +
                        ["\u0663", "\uff11", "\u00a0", "\t", "\u2003", "\x1c", "é", "ſ"])


def mutate(text: str, edits) -> str:
    for kind, at, char in edits:
        at = at % (len(text) + 1)
        if kind == "replace" and text:
            at = min(at, len(text) - 1)
            text = text[:at] + char + text[at + 1:]
        elif kind == "drop" and text:
            at = min(at, len(text) - 1)
            text = text[:at] + text[at + 1:]
        elif kind == "insert":
            text = text[:at] + char + text[at:]
        elif kind == "case":
            text = text.swapcase()
    return text


EDITS = st.lists(st.tuples(st.sampled_from(["replace", "drop", "insert", "case"]),
                           st.integers(0, 40), NOISE), max_size=2)
DATETIMES = st.one_of(
    st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999)),
    st.datetimes(datetime(1960, 1, 1), datetime(2080, 1, 1)),
    st.sampled_from([datetime(2024, 2, 29, 12), datetime(2023, 12, 31, 0, 0, 0, 5),
                     datetime(1969, 1, 1), datetime(2068, 12, 31, 23, 59, 59)]))
STRPTIME = st.tuples(DATETIMES, st.sampled_from(FORMATS), EDITS).map(
    lambda c: (mutate(c[0].strftime(c[1]), c[2]), c[1]))
# Out-of-range fields written in a format's shape.
STRPTIME_ODD = st.sampled_from([
    ("2024-13-01", "%Y-%m-%d"), ("2024-02-30", "%Y-%m-%d"), ("0000-01-01", "%Y-%m-%d"),
    ("2023-02-29 10:00:00", "%Y-%m-%d %H:%M:%S"), ("12:00:61", "%H:%M"), ("9999 366", "%Y %j"),
    ("2024 366", "%Y %j"), ("2023 366", "%Y %j"), ("060", "%j"), ("02-29", "%m-%d"),
    ("12:30:60", "%H:%M:%S"), ("1 1 2024", "%d %m %Y"), (" 1/1/24 12:00 AM", "%d/%m/%y %I:%M %p"),
    ("31/12/69 12:00 pm", "%d/%m/%y %I:%M %p"), ("2024-01-01T00:00:00.5", "%Y-%m-%dT%H:%M:%S.%f"),
    ("2024-01-01", "%Y-%m-%d %H"), ("", "%Y"), ("SEPTEMBER 1 2024", "%B %d %Y"),
    ("ſeptember 01 2024", "%B %d %Y"), ("2024-1-5", "%Y-%m-%d"), ("2024\u00a0\t 05", "%Y %m")])

ISO_DATES = st.sampled_from(["%Y-%m-%d", "%Y%m%d", "%G-W%V-%u", "%GW%V%u", "%G-W%V", "%GW%V"])
ISO_TIMES = st.sampled_from(["", "%H", "%H:%M", "%H%M", "%H:%M:%S", "%H%M%S",
                             "%H:%M:%S.%f", "%H%M%S,%f"])
ISO_SEPARATORS = st.sampled_from(["T", "T", " ", "é", "1", "-", "日"])
ISO_FRACTIONS = st.integers(0, 9)
ISO_OFFSETS = st.sampled_from(["", "", "", "", "Z", "+05:30", "-0800", "+00:00", "+25:00",
                               "-23:59:59.999999", "+1", "+05:3"])


def iso_string(case) -> str:
    moment, date_format, time_format, separator, digits, offset, edits = case
    text = moment.strftime(date_format)
    if time_format:
        clock = moment.strftime(time_format)
        if "%f" in time_format:
            clock = clock[:len(clock) - 6 + digits] if digits <= 6 else clock + "7" * (digits - 6)
        text += separator + clock + offset
    return mutate(text, edits)


ISO = st.tuples(DATETIMES, ISO_DATES, ISO_TIMES, ISO_SEPARATORS, ISO_FRACTIONS, ISO_OFFSETS,
                EDITS).map(iso_string)
ISO_ODD = st.sampled_from(["2024-13-01", "2024-02-30T10:00", "2024-01-01T25:00", "0000-01-01",
                           "2024-W53-1", "2026-W53-1", "2020-W53-7", "2024-W01-8", "0000-W01-1",
                           "9999-W52-6", "2024-W01-", "2024-01-01T", "2024-01-01T10:00:00.",
                           "2024-01-01T10:0", "20240101T1030", "2024-01-01 10:30:45,123",
                           "2024-0101", "2024W011T10", "2024W0110", "1999-12-31T23:59:59.9999999",
                           "2024-01-01T10:00Z", "2024-01-01T10:00+99:00", "2024-01-01\x0010:00"])


def python_parse(make, text):
    """Python's datetime or date of ``text``, or its exception as the plugin writes it."""
    try:
        made = make(text)
    except (ValueError, TypeError, OverflowError) as e:
        return None, f"{type(e).__name__}: {e}"
    if getattr(made, "tzinfo", None) is not None:
        return None, "aware"
    return made, None


def server_rows(spark, column, values):
    df = spark.createDataFrame([(v,) for v in values], "s STRING")
    return df.select(F.call_function(column, F.col("s"))).collect()


def check(cases, expected, got, to_python):
    wrong = []
    for case, (value, error), (row,) in zip(cases, expected, got, strict=True):
        mine = (to_python(row["local"]), row["error"])
        if error == "aware":
            ok = row["error"] is not None and "aware datetime" in row["error"]
        else:
            ok = mine == (value, error)
        if not ok:
            wrong.append(f"{case!r}: Python {(value, error)}, server {mine}")
    assert not wrong, f"{len(wrong)} of {len(cases)} differ, e.g. " + "; ".join(wrong[:8])


def test_strptime_as_python_parses(spark):
    drawn = draw_cases(st.lists(st.one_of(STRPTIME, STRPTIME, STRPTIME, STRPTIME_ODD),
                                min_size=PER_EXAMPLE, max_size=PER_EXAMPLE), 16, SEED)
    cases = [case for _, batch in drawn for case in batch]
    expected = [python_parse(lambda s, f=f: datetime.strptime(s, f), s) for s, f in cases]
    df = spark.createDataFrame(cases, "s STRING, f STRING")
    got = df.select(F.call_function("__mws_python_strptime", F.col("s"), F.col("f"))).collect()
    assert sum(e[1] is None for e in expected) > len(cases) // 4
    assert sum(e[1] is not None for e in expected) > len(cases) // 4
    check(cases, expected, got, lambda local: local)


def test_fromisoformat_as_python_parses(spark):
    drawn = draw_cases(st.lists(st.one_of(ISO, ISO, ISO, ISO_ODD), min_size=PER_EXAMPLE,
                                max_size=PER_EXAMPLE), 16, SEED)
    texts = [text for _, batch in drawn for text in batch]
    expected = [python_parse(datetime.fromisoformat, t) for t in texts]
    got = server_rows(spark, "__mws_python_datetime_fromisoformat", texts)
    assert sum(e[1] is None for e in expected) > len(texts) // 4
    check(texts, expected, got, lambda local: local)
    dates = [t[:10] if i % 3 else t[:8] for i, t in enumerate(texts)] + texts[:100]
    expected = [python_parse(date.fromisoformat, t) for t in dates]
    got = server_rows(spark, "__mws_python_date_fromisoformat", dates)
    check(dates, expected, got, lambda local: None if local is None else local.date())


FLOATS = st.one_of(
    st.floats(-1e6, 1e6), st.floats(), st.integers(-10 ** 6, 10 ** 6).map(lambda n: n / 8),
    st.sampled_from([0.5, -0.5, 1.5, 2.5, 1e-6, 5e-7, -5e-7, 1.0000005, 0.1, 1e15, 1e20,
                     -1e20, 0.0, -0.0, float("nan"), float("inf"), float("-inf"),
                     86399.9999995, 1 / 3]))
MICROS = st.one_of(st.integers(-10 ** 12, 10 ** 12), st.integers(-1000, 1000),
                   st.sampled_from([0, 1, -1, 86_400_000_000 * 999_999_999 // 1000]))
# An int-or-float holding an int: the int, exactly (beyond 2**53 too).
INT_FACTORS = st.one_of(st.none(), st.none(), st.none(), st.sampled_from(
    [0, 3, -7, 1 << 53 | 1, 1 << 60, -(1 << 62)]))
UNITS = ["microseconds", "milliseconds", "seconds", "minutes", "hours", "days", "weeks"]


def python_delta(make):
    """The microseconds of Python's timedelta, or its exception; one a DAY TO SECOND interval
    cannot hold is the compiler's OverflowError."""
    try:
        count = make() // timedelta(microseconds=1)
    except (ValueError, TypeError, OverflowError, ZeroDivisionError) as e:
        return None, f"{type(e).__name__}: {e}"
    if not -(1 << 63) <= count < (1 << 63):
        return None, ("OverflowError: timedelta does not fit a DAY TO SECOND interval "
                      "(106751991 days)")
    return count, None


def test_timedelta_of_floats_as_python_rounds(spark):
    drawn = draw_cases(st.lists(st.tuples(MICROS, FLOATS, INT_FACTORS, st.lists(
        st.tuples(st.sampled_from(UNITS), st.one_of(FLOATS, st.integers(-10 ** 6, 10 ** 6),
                                                    st.none())), min_size=1, max_size=3,
        unique_by=lambda u: u[0])), min_size=PER_EXAMPLE, max_size=PER_EXAMPLE), 12, SEED)
    cases = [case for _, batch in drawn for case in batch]
    rows, expected = [], []
    for micros, x, n, units in cases:
        ordered = sorted(units, key=lambda u: UNITS.index(u[0]))
        kinds = ",".join(f"{u}={'f' if isinstance(v, float) else 'i'}" for u, v in ordered)
        ints = [v if not isinstance(v, float) else None for _, v in ordered]
        floats = [v if isinstance(v, float) else None for _, v in ordered]
        rows.append((micros, x, n, kinds, ints, floats))
        td, by = timedelta(microseconds=micros), x if n is None else n
        expected.append((python_delta(lambda td=td, by=by: td * by),
                         python_delta(lambda td=td, by=by: td / by),
                         python_delta(lambda units=dict(ordered): timedelta(**units))))
    df = spark.createDataFrame(
        rows, "m BIGINT, x DOUBLE, n BIGINT, units STRING, ints ARRAY<BIGINT>, "
        "floats ARRAY<DOUBLE>")
    got = df.select(
        F.call_function("__mws_python_timedelta_multiply", F.col("m"), F.col("x"), F.col("n")),
        F.call_function("__mws_python_timedelta_divide", F.col("m"), F.col("x"), F.col("n")),
        F.call_function("__mws_python_timedelta", F.col("units"), F.col("ints"),
                        F.col("floats"))).collect()
    wrong = []
    for row, want, have in zip(rows, expected, got, strict=True):
        mine = tuple((None if r["micros"] is None else int(r["micros"]), r["error"])
                     for r in have)
        if mine != want:
            wrong.append(f"{row}: Python {want}, server {mine}")
    assert not wrong, f"{len(wrong)} of {len(rows)} differ, e.g. " + "; ".join(wrong[:6])


INT_TEXTS = st.one_of(
    st.sampled_from(["0x1f", "0X_1F", "0o17", "0b101", "0b", "0x", "17", "0", "00", "0_0", "010",
                     " -0x_ff ", "1_000", "1__0", "_1", "1_", "z", "Zz", "\u0661\u0662", "+7",
                     "- 7", "\u00a07\u2003", "é", "9" * 19, "9" * 20, "-" + "9" * 19,
                     "-9223372036854775808", "0x8000000000000000", "", " ", "0b_1_0"]),
    st.text(alphabet="0123456789abxoXOB_+- ", max_size=8))
INT_BASES = st.sampled_from([0, 0, 0, 2, 8, 10, 16, 36, 1, 37, -1, 35])


def test_int_of_any_base_as_python_parses(spark):
    drawn = draw_cases(st.lists(st.tuples(INT_TEXTS, INT_BASES), min_size=PER_EXAMPLE,
                                max_size=PER_EXAMPLE), 8, SEED)
    cases = [case for _, batch in drawn for case in batch]
    expected = []
    for text, base in cases:
        try:
            n = int(text, base)
            expected.append((n, None) if -(1 << 63) <= n < (1 << 63) else
                            (None, "OverflowError: int result does not fit in 64 bits (BIGINT)"))
        except ValueError as e:
            expected.append((None, f"ValueError: {e}"))
    df = spark.createDataFrame(cases, "s STRING, b BIGINT")
    got = df.select(F.call_function("__mws_python_int", F.col("s"), F.col("b"))).collect()
    wrong = [f"int({c[0]!r}, {c[1]}): Python {e}, server {tuple(g[0])}"
             for c, e, g in zip(cases, expected, got, strict=True) if tuple(g[0]) != e]
    assert sum(e[1] is None for e in expected) > len(cases) // 5
    assert not wrong, f"{len(wrong)} of {len(cases)} differ, e.g. " + "; ".join(wrong[:8])
