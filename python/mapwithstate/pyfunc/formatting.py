"""``str()`` of compiled values, as Python prints them (and ``repr()`` of datetimes, dates and
timedeltas).

Spark's ``CAST(x AS STRING)`` differs from Python for floats (``1.0E16`` where Python prints
``1e+16``, ``1.0E-5`` for ``1e-05``, ``NaN`` for ``nan``) and booleans (``true`` for
``True``). A float's shortest digits come from Spark's text (Java's ``Double.toString``); the
compiler re-lays them out as Python's ``repr`` does: positional for decimal exponents from -4
to 15, scientific with a signed two-digit exponent otherwise.
"""

import ast
from typing import TYPE_CHECKING, Callable, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc.pytypes import STR
from mapwithstate.pyfunc.values import Value, let, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context

__all__ = ["to_str", "float_repr", "timedelta_repr", "datetime_repr"]


def _digits(text: Column) -> Tuple[Column, Column, Column]:
    """The sign, significant digits and decimal exponent of the first digit of a float's
    text (``1.5E300``, ``0.001``, ``1.5372286728091292e+18``, ``5e-324``)."""
    pattern = r"^-?([0-9]+)(?:\.([0-9]+))?(?:[eE]\+?(-?[0-9]+))?$"
    sign = F.regexp_extract(text, r"^(-?)", 1)
    integral = F.regexp_extract(text, pattern, 1)
    fraction = F.regexp_extract(text, pattern, 2)
    exponent = F.coalesce(F.regexp_extract(text, pattern, 3).try_cast("int"), F.lit(0))
    digits = F.concat(integral, fraction)
    stripped = F.regexp_replace(digits, "^0+", "")
    leading = F.length(digits) - F.length(stripped)
    significant = F.regexp_replace(stripped, "0+$", "")
    return sign, significant, exponent + F.length(integral) - F.lit(1) - leading


#: The smallest positive normal double (sys.float_info.min); below it, doubles are subnormal.
_SMALLEST_NORMAL = 2.2250738585072014e-308


def float_repr(x: Column) -> Column:
    """Python's ``repr(x)`` of a DOUBLE Column."""
    return let([x], _float_repr)


def _float_repr(x: Column) -> Column:
    text = x.cast("string")
    # Java 17's Double.toString sometimes gives a digit more than the shortest text that
    # reads back as the same double, which is what Python prints: try 15 to 17 digits. For a
    # subnormal it may give more digits than it needs (4.9E-324 for 5e-324): try 1 to 17.
    normal = (F.abs(x) >= F.lit(_SMALLEST_NORMAL)) | (x == F.lit(0.0))
    short = let([text], lambda t: F.length(_digits(t)[1]) < 16)
    shortest = F.when(normal & short, text)
    for n in range(1, 15):
        candidate = F.format_string(f"%.{n - 1}e", x)
        shortest = shortest.when(~normal & (candidate.try_cast("double") == x), candidate)
    for n in (15, 16, 17):
        candidate = F.format_string(f"%.{n - 1}e", x)
        shortest = shortest.when(candidate.try_cast("double") == x, candidate)
    parts = let(
        [shortest.otherwise(text)],
        lambda t: F.struct(*[c.alias(f"_{i}") for i, c in enumerate(_digits(t))]),
    )
    finite = let(
        [parts],
        lambda p: _layout(p.getField("_0"), p.getField("_1"), p.getField("_2")),
    )
    return (
        F.when(F.isnan(x), F.lit("nan"))
        .when(x == F.lit(float("inf")), F.lit("inf"))
        .when(x == F.lit(float("-inf")), F.lit("-inf"))
        .otherwise(finite)
    )


def _layout(sign: Column, significant: Column, exp10: Column) -> Column:
    """A finite float's text from its sign, significant digits and decimal exponent, laid out
    as Python's ``repr``: positional from 1e-4 to 1e16, scientific otherwise."""
    count = F.length(significant)
    whole = F.substring(F.rpad(significant, exp10 + 1, "0"), F.lit(1), exp10 + 1)
    after = F.substring(significant, exp10 + 2, F.greatest(count - exp10 - 1, F.lit(0)))
    positional = F.when(
        exp10 >= 0,
        F.concat(whole, F.lit("."), F.when(F.length(after) == 0, F.lit("0")).otherwise(after)),
    ).otherwise(F.concat(F.lit("0."), F.repeat(F.lit("0"), -exp10 - 1), significant))
    magnitude = F.abs(exp10).cast("string")
    scientific = F.concat(
        F.substring(significant, 1, 1),
        F.when(
            count > 1, F.concat(F.lit("."), F.substring(significant, F.lit(2), count))
        ).otherwise(F.lit("")),
        F.lit("e"),
        F.when(exp10 < 0, F.lit("-")).otherwise(F.lit("+")),
        F.when(F.length(magnitude) < 2, F.concat(F.lit("0"), magnitude)).otherwise(magnitude),
    )
    return F.concat(
        sign,
        F.when(count == 0, F.lit("0.0"))
        .when((exp10 >= -4) & (exp10 < 16), positional)
        .otherwise(scientific),
    )


def _datetime_str(ts: Column) -> Column:
    base = F.date_format(ts, "yyyy-MM-dd HH:mm:ss")
    micros = F.unix_micros(ts.cast("timestamp")) % F.lit(1_000_000)
    return F.when(micros == 0, base).otherwise(
        F.concat(base, F.lit("."), F.date_format(ts, "SSSSSS"))
    )


def _timedelta_parts(td: Column, body: Callable[[Column, Column, Column], Column]) -> Column:
    """``body`` of a timedelta's CPython normal form: days (any sign), seconds (0..86399),
    microseconds (0..999999)."""
    from mapwithstate.pyfunc.timedelta_arithmetic import DAY, micros, whole_days

    def parts(td: Column, count: Column) -> Column:
        rest = F.pmod(count, F.lit(DAY))
        seconds = F.call_function("div", rest, F.lit(1_000_000))
        return let(
            [whole_days(td), seconds, F.pmod(rest, F.lit(1_000_000))],
            body,
        )

    return let([td, micros(td)], parts)


def _timedelta_str(td: Column) -> Column:
    """``str(td)``: ``[D day[s], ]H:MM:SS[.ffffff]``."""

    def text(days: Column, seconds: Column, us: Column) -> Column:
        clock = F.format_string(
            "%d:%02d:%02d",
            F.call_function("div", seconds, F.lit(3600)),
            F.pmod(F.call_function("div", seconds, F.lit(60)), F.lit(60)),
            F.pmod(seconds, F.lit(60)),
        )
        fraction = F.when(us != F.lit(0), F.format_string(".%06d", us)).otherwise(F.lit(""))
        plural = F.when(F.abs(days) != F.lit(1), F.lit("s")).otherwise(F.lit(""))
        prefix = F.when(days != F.lit(0), F.format_string("%d day%s, ", days, plural)).otherwise(
            F.lit("")
        )
        return F.concat(prefix, clock, fraction)

    return _timedelta_parts(td, text)


def timedelta_repr(td: Column) -> Column:
    """``repr(td)``: ``datetime.timedelta(days=.., seconds=.., microseconds=..)``, the fields
    that are not 0 (``datetime.timedelta(0)`` for none)."""

    def text(days: Column, seconds: Column, us: Column) -> Column:
        fields = [
            F.when(part != F.lit(0), F.concat(F.lit(f"{name}="), part.cast("string")))
            for name, part in (("days", days), ("seconds", seconds), ("microseconds", us))
        ]
        listed = F.concat_ws(", ", *fields)
        return F.concat(
            F.lit("datetime.timedelta("),
            F.when(listed == F.lit(""), F.lit("0")).otherwise(listed),
            F.lit(")"),
        )

    return _timedelta_parts(td, text)


def datetime_repr(ts: Column, kind: str) -> Column:
    """``repr(dt)``: ``datetime.datetime(2024, 3, 5, 10, 30)`` (a trailing 0 microsecond
    dropped, then a trailing 0 second), ``datetime.date(2024, 3, 5)``."""
    return let([ts], lambda ts: _datetime_repr(ts, kind))


def _datetime_repr(ts: Column, kind: str) -> Column:
    fields = [F.year(ts), F.month(ts), F.dayofmonth(ts)]
    if kind == "date":
        listed = F.concat_ws(", ", *(f.cast("string") for f in fields))
        return F.concat(F.lit("datetime.date("), listed, F.lit(")"))
    us = F.pmod(F.unix_micros(ts), F.lit(1_000_000))
    second = F.second(ts)
    fields += [F.hour(ts), F.minute(ts)]
    tail = [
        F.when((us != F.lit(0)) | (second != F.lit(0)), second.cast("string")),
        F.when(us != F.lit(0), us.cast("string")),
    ]
    listed = F.concat_ws(", ", *(f.cast("string") for f in fields), *tail)
    return F.concat(F.lit("datetime.datetime("), listed, F.lit(")"))


def to_str(ctx: "Context", node: ast.AST, value: Value) -> Value:
    """``str(value)``."""
    if value.is_const and (value.const is None or isinstance(value.const, (int, float, str))):
        return literal(str(value.const))
    kind = value.type.kind
    if kind == "none":
        return literal("None")
    if kind == "str":
        column = value.column
    elif kind == "int":
        column = value.column.cast("string")
    elif kind == "bool":
        # A null stays null here, for the "None" below.
        column = F.when(value.column, F.lit("True")).when(~value.column, F.lit("False"))
    elif kind == "float":
        column = float_repr(value.column)
    elif kind == "num":
        column = F.coalesce(
            value.column.getField("i").cast("string"), float_repr(value.column.getField("f"))
        )
    elif kind == "datetime":
        column = _datetime_str(value.column)
    elif kind == "date":
        column = F.date_format(value.column, "yyyy-MM-dd")
    elif kind == "timedelta":
        column = _timedelta_str(value.column)
    elif kind in ("list", "tuple", "dict"):
        from mapwithstate.pyfunc.format_specs import convert

        return convert(ctx, node, value, ord("r"))
    elif kind == "set":
        from mapwithstate.pyfunc.sets import refused_for_order

        raise refused_for_order(ctx, node, "str() of a set")
    else:
        raise ctx.refuse(
            node,
            f"str() of a {value.type}",
            "str() works on str, int, float, bool, None, datetime, date, timedelta and lists, "
            "tuples and dicts of them; "
            "format other values with pyspark.sql.functions",
        )
    if value.nullable:
        column = F.coalesce(column, F.lit("None"))
    return Value(column, STR, False)
