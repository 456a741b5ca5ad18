"""``datetime(...)``, ``date(...)`` and ``timedelta(...)`` built from values known only at run
time, with Python's checks, and ``timedelta``'s methods.

A constant call is Python's own value, a literal (PySpark's, a naive datetime in the local time
zone). Otherwise CPython's order of failures holds: each argument in turn ``None``
(``TypeError``) or beyond a C int (``OverflowError``), then each field out of its range
(``ValueError``: month 13, February 30, hour 24); a ``timedelta`` beyond 999999999 days fails
with ``OverflowError``, as does one Python holds but a DAY TO SECOND interval does not. The
fields of a ``datetime`` are taken in the session's time zone (Spark's ``make_timestamp``),
the zone ``ts.hour`` and ``ts.day`` read them in.
"""

import ast
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.arguments import MethodHandler
from mapwithstate.pyfunc.pytypes import DATE, DATETIME, FLOAT, TIMEDELTA
from mapwithstate.pyfunc.server_functions import fail_on_error
from mapwithstate.pyfunc.timedelta_arithmetic import interval, interval_of_micros, micros
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_column, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["datetime_call", "date_call", "timedelta_call", "TIMEDELTA_METHODS"]

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_DATE_FIELDS = ("year", "month", "day")
_TIME_FIELDS = ("hour", "minute", "second", "microsecond")
#: The range of each time field, as CPython's ``check_time_args`` tests them.
_TIME_RANGES = {"hour": 23, "minute": 59, "second": 59, "microsecond": 999_999}


def _constant(
    it: "Interpreter",
    node: ast.Call,
    cls: type,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Optional[Value]:
    """The call's value where every argument is a constant, else None."""
    if not (all(a.is_const for a in args) and all(v.is_const for v in kwargs.values())):
        return None
    try:
        made = cls(*[a.const for a in args], **{k: v.const for k, v in kwargs.items()})
    except (TypeError, ValueError, OverflowError) as e:
        raise it.ctx.refuse(
            node, f"{cls.__name__}(...)", f"Python raises {type(e).__name__}: {e}"
        ) from e
    if getattr(made, "tzinfo", None) is not None:
        raise it.ctx.refuse(
            node,
            "datetime with tzinfo",
            "use naive datetimes, as PySpark returns them in the session's time zone",
        )
    return literal(made)


def _fields(
    it: "Interpreter",
    node: ast.Call,
    name: str,
    names: Tuple[str, ...],
    required: int,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Dict[str, Column]:
    """The int arguments of ``name(...)`` by field, checked as CPython parses them (``"i"``
    format, in order): ``None`` fails with TypeError, an int beyond 32 bits with
    OverflowError; a float or a str is refused (Python raises TypeError)."""
    if len(args) > len(names):
        raise it.ctx.refuse(
            node, f"{name}() with {len(args)} arguments", f"{name}() takes at most {len(names)}"
        )
    given = dict(zip(names, args, strict=False))
    for keyword in kwargs:
        if keyword not in names or keyword in given:
            raise it.ctx.refuse(
                node,
                f"{name}({keyword}=)",
                f"{name}'s fields are {', '.join(names)}, each given once",
            )
    given.update(kwargs)
    missing = [n for n in names[:required] if n not in given]
    if missing:
        raise it.ctx.refuse(
            node,
            f"{name}() without {', '.join(missing)}",
            f"Python raises TypeError: {name}() needs {', '.join(names[:required])}",
        )
    fields: Dict[str, Column] = {}
    for field in names:
        if field not in given:
            continue
        value = given[field]
        if value.type.kind not in ("int", "bool", "none"):
            raise it.ctx.refuse(
                node,
                f"{name}({field}=<{value.type}>)",
                f"Python raises TypeError: '{value.type}' object cannot be interpreted as an "
                "integer",
            )
        value = operators.none_check(
            it.ctx, node, value, "'NoneType' object cannot be interpreted as an integer"
        )
        column = value.column.cast("bigint")
        it.ctx.check(
            node,
            column > F.lit(_INT_MAX),
            "OverflowError",
            "signed integer is greater than maximum",
        )
        it.ctx.check(
            node, column < F.lit(_INT_MIN), "OverflowError", "signed integer is less than minimum"
        )
        fields[field] = column
    return fields


def _days_in_month(year: Column, month: Column) -> Column:
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    return (
        F.when(month == 2, F.when(leap, F.lit(29)).otherwise(F.lit(28)))
        .when(month.isin(4, 6, 9, 11), F.lit(30))
        .otherwise(F.lit(31))
    )


def _date_checks(it: "Interpreter", node: ast.Call, fields: Dict[str, Column]) -> Cond:
    """CPython's ``check_date_args``, in its order; the condition that all hold."""
    year, month, day = (fields[f] for f in _DATE_FIELDS)
    year_ok = (year >= 1) & (year <= 9999)
    month_ok = (month >= 1) & (month <= 12)
    it.ctx.check(node, ~year_ok, "ValueError", "year is out of range (1..9999)")
    it.ctx.check(node, ~month_ok, "ValueError", "month must be in 1..12")
    day_ok = (day >= 1) & (day <= _days_in_month(year, month))
    it.ctx.check(node, year_ok & month_ok & ~day_ok, "ValueError", "day is out of range for month")
    return year_ok & month_ok & day_ok


def datetime_call(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``datetime(year, month, day[, hour[, minute[, second[, microsecond]]]])``."""
    constant = _constant(it, node, datetime, args, kwargs)
    if constant is not None:
        return constant
    if len(args) > 7 or any(k in ("tzinfo", "fold") for k in kwargs):
        raise it.ctx.refuse(
            node,
            "datetime with tzinfo or fold",
            "use naive datetimes, as PySpark returns them in the session's time zone",
        )
    fields = _fields(it, node, "datetime", _DATE_FIELDS + _TIME_FIELDS, 3, args, kwargs)
    valid = _date_checks(it, node, fields)
    for field in _TIME_FIELDS:
        if field in fields:
            column, top = fields[field], _TIME_RANGES[field]
            ok = (column >= 0) & (column <= F.lit(top))
            it.ctx.check(node, ~ok, "ValueError", f"{field} must be in 0..{top}")
            valid = c_and(valid, ok)
    zero = F.lit(0).cast("bigint")
    hour, minute, second, micro = (fields.get(f, zero) for f in _TIME_FIELDS)
    seconds = (second * F.lit(1_000_000) + micro).cast("decimal(16,0)") / F.lit(1_000_000)
    made = F.make_timestamp(
        fields["year"].cast("int"),
        fields["month"].cast("int"),
        fields["day"].cast("int"),
        hour.cast("int"),
        minute.cast("int"),
        seconds.cast("decimal(16,6)"),
    )
    return Value(F.when(c_column(valid), made), DATETIME, False)


def date_call(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``date(year, month, day)``."""
    constant = _constant(it, node, date, args, kwargs)
    if constant is not None:
        return constant
    fields = _fields(it, node, "date", _DATE_FIELDS, 3, args, kwargs)
    valid = _date_checks(it, node, fields)
    made = F.make_date(*(fields[f].cast("int") for f in _DATE_FIELDS))
    return Value(F.when(c_column(valid), made), DATE, False)


#: Each unit of ``timedelta(...)`` in microseconds, in the order CPython adds them up (its
#: ``TypeError`` for a ``None`` names the first).
_TIMEDELTA_UNITS = {
    "microseconds": 1,
    "milliseconds": 1_000,
    "seconds": 1_000_000,
    "minutes": 60_000_000,
    "hours": 3_600_000_000,
    "days": 86_400_000_000,
    "weeks": 7 * 86_400_000_000,
}
_TIMEDELTA_POSITIONS = ("days", "seconds", "microseconds", "milliseconds", "minutes", "hours")


def timedelta_call(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``timedelta(days, seconds, microseconds, milliseconds, minutes, hours, weeks)``: of
    ints, the exact sum of the units in microseconds; with floats, CPython's rounding of their
    fractions (:func:`_timedelta_of_floats`). It fails where Python's days pass 999999999
    (OverflowError) or where a DAY TO SECOND interval cannot hold it."""
    names = _TIMEDELTA_POSITIONS + ("weeks",)
    if len(args) > len(names):
        raise it.ctx.refuse(node, "timedelta() with too many arguments", "at most 7")
    given = dict(zip(names, args, strict=False))
    for key in kwargs:
        if key not in _TIMEDELTA_UNITS or key in given:
            raise it.ctx.refuse(node, f"timedelta({key}=)", f"units are {', '.join(names)}")
    given.update(kwargs)
    if all(v.is_const for v in given.values()):
        try:
            return literal(timedelta(**{k: v.const for k, v in given.items()}))
        except (TypeError, ValueError, OverflowError) as e:
            raise it.ctx.refuse(
                node, "timedelta(...)", f"Python raises {type(e).__name__}: {e}"
            ) from e
    if any(v.type.kind in ("float", "num") for v in given.values()):
        return _timedelta_of_floats(it, node, given)
    total: Column = F.lit(0).cast("decimal(20,0)")
    for unit, factor in _TIMEDELTA_UNITS.items():
        if unit not in given:
            continue
        value = given[unit]
        if value.type.kind not in ("int", "bool", "none"):
            raise it.ctx.refuse(
                node,
                f"timedelta({unit}=<{value.type}>)",
                f"Python raises TypeError: unsupported type for timedelta {unit} component",
            )
        value = operators.none_check(
            it.ctx, node, value, f"unsupported type for timedelta {unit} component: NoneType"
        )
        # At most 2**63 weeks: 5.6e30 microseconds, seven of them well within DECIMAL(38,0).
        term = value.column.cast("decimal(20,0)") * F.lit(factor).cast("decimal(13,0)")
        total = (total + term).cast("decimal(38,0)")
    column = interval(it.ctx, node, total)
    return Value(column, TIMEDELTA, False)


def _timedelta_of_floats(it: "Interpreter", node: ast.Call, given: Dict[str, Value]) -> Value:
    """``timedelta(...)`` where a unit is a float known only at run time: the plugin's
    ``__mws_python_timedelta``, CPython's ``delta_new`` (whole parts exact, the fractions
    summed in doubles and rounded half to even once; its TypeError for a None unit, ValueError
    for NaN, OverflowError for an infinity), in CPython's order of the units."""
    units: List[str] = []
    ints: List[Column] = []
    floats: List[Column] = []
    no_int, no_float = F.lit(None).cast("bigint"), F.lit(None).cast("double")
    for unit in _TIMEDELTA_UNITS:
        if unit not in given:
            continue
        value = given[unit]
        kind = value.type.kind
        if kind in ("int", "bool", "none"):
            units.append(f"{unit}=i")
            ints.append(value.column.cast("bigint"))
            floats.append(no_float)
        elif kind == "float":
            units.append(f"{unit}=f")
            ints.append(no_int)
            floats.append(value.column.cast("double"))
        elif kind == "num":
            units.append(f"{unit}=n")
            ints.append(value.column.getField("i"))
            floats.append(value.column.getField("f"))
        else:
            raise it.ctx.refuse(
                node,
                f"timedelta({unit}=<{value.type}>)",
                f"Python raises TypeError: unsupported type for timedelta {unit} component",
            )
    result = F.call_function(
        "__mws_python_timedelta", F.lit(",".join(units)), F.array(*ints), F.array(*floats)
    )
    fail_on_error(it.ctx, node, result)
    return Value(interval_of_micros(result.getField("micros")), TIMEDELTA, False)


def _total_seconds(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``td.total_seconds()``: the interval's microseconds over 10**6, as Python divides."""
    if args or kwargs:
        raise it.ctx.refuse(node, "total_seconds() with arguments", "call total_seconds()")
    # A DAY TO SECOND interval added to the epoch is exact in microseconds; below 2**53 of
    # them (285 years) the division of two exact doubles rounds as Python's int division.
    return Value(micros(base.column).cast("double") / F.lit(1_000_000.0), FLOAT, False)


TIMEDELTA_METHODS: Dict[str, MethodHandler] = {"total_seconds": _total_seconds}
