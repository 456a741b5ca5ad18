"""The methods of ``datetime`` and ``date`` values a state function may call, as Python gives
them: ``date()``, ``weekday()``, ``isoweekday()``, ``isocalendar()`` (a tuple: index it or
unpack it), ``isoformat()``, ``timestamp()``,
``replace(...)`` (Python's range checks, as the constructor's) and ``strftime(format)`` of a
constant format, which f-string specs of datetimes (``f"{ts:%H:%M}"``) use too.

Fields are read in the session's time zone, where PySpark's naive datetimes are; so is
``timestamp()``, which Python takes in the process's local zone: the two agree when the
Python process runs in the session's time zone.
"""

import ast
import re
from typing import TYPE_CHECKING, Dict, List

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc.arguments import MethodHandler
from mapwithstate.pyfunc.pytypes import DATE, FLOAT, INT, STR
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context, Interpreter

__all__ = ["DATETIME_METHODS", "DATE_METHODS", "ISO_CALENDAR_FIELDS", "strftime"]

_MICROS = 1_000_000


def _no_arguments(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value], name: str
) -> None:
    if args or kwargs:
        raise it.ctx.refuse(node, f"{name}() with arguments", f"call {name}()")


def _date(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    _no_arguments(it, node, args, kwargs, "date")
    return Value(F.to_date(base.column), DATE, False)


def _weekday(iso: bool) -> MethodHandler:
    def handler(
        it: "Interpreter",
        node: ast.Call,
        base: Value,
        args: List[Value],
        kwargs: Dict[str, Value],
    ) -> Value:
        _no_arguments(it, node, args, kwargs, "isoweekday" if iso else "weekday")
        # Spark's dayofweek is 1 for Sunday; Python's weekday() 0 for Monday.
        monday_first = (F.dayofweek(base.column) + F.lit(5)) % F.lit(7)
        return Value((monday_first + F.lit(1 if iso else 0)).cast("bigint"), INT, False)

    return handler


def _isoformat(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    if base.type.kind == "date":
        _no_arguments(it, node, args, kwargs, "isoformat")
        return Value(F.date_format(base.column, "yyyy-MM-dd"), STR, False)
    separator = args[0] if args else kwargs.get("sep")
    if (
        len(args) > 1
        or set(kwargs) - {"sep"}
        or (
            separator is not None
            and not (
                separator.is_const
                and isinstance(separator.const, str)
                and len(separator.const) == 1
            )
        )
    ):
        raise it.ctx.refuse(
            node, "isoformat() with these arguments", "isoformat() or isoformat(sep=' ')"
        )
    sep = separator.const if separator is not None else "T"
    micros = F.unix_micros(base.column) % F.lit(_MICROS)
    whole = F.concat(
        F.date_format(base.column, "yyyy-MM-dd"),
        F.lit(sep),
        F.date_format(base.column, "HH:mm:ss"),
    )
    text = F.when(micros == 0, whole).otherwise(
        F.concat(whole, F.lit("."), F.date_format(base.column, "SSSSSS"))
    )
    return Value(text, STR, False)


def _timestamp(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """Python's ``_mktime() + microsecond / 1e6``: the whole seconds, then the fraction."""
    _no_arguments(it, node, args, kwargs, "timestamp")
    micros = F.unix_micros(base.column)
    fraction = F.pmod(micros, F.lit(_MICROS))
    seconds = ((micros - fraction) / F.lit(_MICROS)).cast("bigint").cast("double")
    return Value(seconds + fraction.cast("double") / F.lit(1e6), FLOAT, False)


_FIELDS = ("year", "month", "day", "hour", "minute", "second", "microsecond")


def _replace(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``replace(field=...)``: the constructor of the base's fields with those replaced, so
    Python's checks hold (``replace(day=31)`` of a February date raises ValueError)."""
    from mapwithstate.pyfunc.builtins import value_attribute
    from mapwithstate.pyfunc.datetimes import date_call, datetime_call

    names = _FIELDS if base.type.kind == "datetime" else _FIELDS[:3]
    if args or set(kwargs) - set(names):
        raise it.ctx.refuse(
            node, "replace() with these arguments", f"name the fields: {', '.join(names)}"
        )
    fields = {
        name: kwargs[name] if name in kwargs else value_attribute(it.ctx, node, base, name)
        for name in names
    }
    make = datetime_call if base.type.kind == "datetime" else date_call
    return make(it, node, [], fields)


#: strftime directives and the Spark datetime pattern each is (Python's C locale: English
#: names, as Spark's).
_PATTERNS = {
    "m": "MM",
    "d": "dd",
    "H": "HH",
    "I": "hh",
    "M": "mm",
    "S": "ss",
    "f": "SSSSSS",
    "y": "yy",
    "j": "DDD",
    "a": "EEE",
    "A": "EEEE",
    "b": "MMM",
    "h": "MMM",
    "B": "MMMM",
    "p": "a",
}


def strftime(ctx: "Context", node: ast.AST, base: Value, pattern: str) -> Value:
    """``base.strftime(pattern)`` of a constant pattern (a datetime or date, not None)."""
    parts: List[Column] = []
    for match in re.finditer(r"%(.?)|[^%]+", pattern):
        if not match.group(0).startswith("%"):
            parts.append(F.lit(match.group(0)))
            continue
        code = match.group(1)
        if code == "%":
            parts.append(F.lit("%"))
        elif code == "Y":
            # glibc's %Y does not pad: year 999 is "999".
            parts.append(F.year(base.column).cast("string"))
        elif code == "w":
            parts.append((F.dayofweek(base.column) - F.lit(1)).cast("string"))
        elif code == "u":
            parts.append(((F.dayofweek(base.column) + F.lit(5)) % F.lit(7) + 1).cast("string"))
        elif code in _PATTERNS:
            parts.append(F.date_format(base.column, _PATTERNS[code]))
        else:
            raise ctx.refuse(
                node,
                f"strftime directive %{code}",
                "supported: %Y %m %d %H %I %M %S %f %y %j %a %A %b %B %p %w %u %%",
            )
    if not parts:
        return Value(F.lit(""), STR, False)
    return Value(F.concat(*parts), STR, False)


def _strftime(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    if kwargs or len(args) != 1 or not (args[0].is_const and isinstance(args[0].const, str)):
        raise it.ctx.refuse(node, "strftime() of this argument", "a constant format string")
    return strftime(it.ctx, node, base, args[0].const)


#: The field names of ``isocalendar()``'s named tuple.
ISO_CALENDAR_FIELDS = ("year", "week", "weekday")


def _isocalendar(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``isocalendar()``: the named tuple ``(ISO year, ISO week, ISO weekday)``, whose fields
    read by name too (``iso.week``)."""
    from mapwithstate.pyfunc.tuples import make

    _no_arguments(it, node, args, kwargs, "isocalendar")
    day = F.to_date(base.column)
    year = F.extract(F.lit("YEAROFWEEK"), day).cast("bigint")
    week = F.weekofyear(day).cast("bigint")
    weekday = _weekday(True)(it, node, base, [], {})
    return make([Value(year, INT, False), Value(week, INT, False), weekday], ISO_CALENDAR_FIELDS)


DATETIME_METHODS: Dict[str, MethodHandler] = {
    "date": _date,
    "weekday": _weekday(False),
    "isoweekday": _weekday(True),
    "isocalendar": _isocalendar,
    "isoformat": _isoformat,
    "timestamp": _timestamp,
    "replace": _replace,
    "strftime": _strftime,
}
DATE_METHODS: Dict[str, MethodHandler] = {
    "weekday": _weekday(False),
    "isoweekday": _weekday(True),
    "isocalendar": _isocalendar,
    "isoformat": _isoformat,
    "replace": _replace,
    "strftime": _strftime,
}
