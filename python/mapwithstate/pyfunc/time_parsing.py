"""Datetimes and dates parsed from text or built from epoch numbers: ``datetime.strptime(s,
FORMAT)``, ``datetime.fromisoformat(s)``, ``date.fromisoformat(s)``,
``datetime.fromtimestamp(x)`` and ``date.fromtimestamp(x)``, with Python's values and
Python's exceptions.

The parsers are the plugin's (``__mws_python_strptime``, ``__mws_python_datetime_fromisoformat``,
``__mws_python_date_fromisoformat``: CPython's ``_strptime`` and C ``fromisoformat`` ported),
which give the naive datetime's fields or Python's ``ValueError`` message; the fields are taken
in the session's time zone, where PySpark's naive datetimes are. ``fromtimestamp`` reads the
epoch seconds in the session's time zone too (Python: the process's local zone), a float's
fraction rounded half to even to microseconds as CPython does. ``datetime.now()``,
``date.today()`` and the like are refused: a state function must give the same result when
replayed.
"""

import ast
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.pytypes import DATE, DATETIME
from mapwithstate.pyfunc.server_functions import fail_on_error, python_round
from mapwithstate.pyfunc.values import Value, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["class_method", "STRPTIME_DIRECTIVES"]

#: The strptime directives the plugin parses (those strftime supports, bar ``%h``).
STRPTIME_DIRECTIVES = "YmdHIMSfyjaAbBpwu%"
#: The class methods that read the clock: refused, a replay would give other results.
_CLOCK = ("now", "today", "utcnow")
#: ``time_t``'s range as a double compares with it (CPython's ``_Py_InIntegralTypeRange``).
_TIME_T = 2.0**63
#: The seconds past which glibc's ``localtime`` fails (the year no longer fits a C int): Python
#: raises OSError there.
_LOCALTIME_MAX = 67_768_036_191_676_799
_LOCALTIME_MIN = -67_768_040_609_740_800
#: The seconds a TIMESTAMP holds without overflowing its microseconds.
_SPARK_SECONDS = 9_223_372_036_854


Handler = Callable[["Interpreter", ast.Call, type, List[Value], Dict[str, Value]], Value]


def _one_argument(
    it: "Interpreter", node: ast.Call, name: str, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    if kwargs or len(args) != 1:
        raise it.ctx.refuse(node, f"{name}() with these arguments", f"call {name}(x)")
    return args[0]


def _text(it: "Interpreter", node: ast.Call, name: str, value: Value, position: int) -> Value:
    """A str argument, failing with Python's TypeError where it is None."""
    if value.type.kind not in ("str", "none"):
        raise it.ctx.refuse(
            node,
            f"{name}() of a {value.type}",
            f"Python raises TypeError: {name}() takes a str",
        )
    message = (
        f"strptime() argument {position} must be str, not None"
        if name.endswith("strptime")
        else "fromisoformat: argument must be str"
    )
    return operators.none_check(it.ctx, node, value, message)


def _parsed(it: "Interpreter", node: ast.Call, result: Column, kind: str) -> Value:
    """The plugin's parse ``result`` (``local``, or ``error``: Python's exception and
    message) as a datetime or date, the query failing with the error."""
    fail_on_error(it.ctx, node, result)
    local = result.getField("local")
    column = local.cast("timestamp") if kind == "datetime" else local.cast("date")
    return Value(column, DATETIME if kind == "datetime" else DATE, False)


def _constant(it: "Interpreter", node: ast.Call, make: Callable[[], object]) -> Value:
    """Python's own value of a call of constants, or a refusal naming its exception."""
    try:
        made = make()
    except (TypeError, ValueError, OverflowError, OSError) as e:
        raise it.ctx.refuse(node, "this call", f"Python raises {type(e).__name__}: {e}") from e
    if getattr(made, "tzinfo", None) is not None:
        raise it.ctx.refuse(
            node, "an aware datetime", "a state function holds naive datetimes: drop the offset"
        )
    return literal(made)


def _check_format(it: "Interpreter", node: ast.Call, fmt: str) -> None:
    """Refuses a format the plugin does not parse, or one Python refuses."""
    seen = set()
    i = 0
    while i < len(fmt):
        if fmt[i] != "%":
            i += 1
            continue
        if i + 1 == len(fmt):
            raise it.ctx.refuse(
                node, "strptime format", f"Python raises ValueError: stray % in format '{fmt}'"
            )
        directive = fmt[i + 1]
        if directive not in STRPTIME_DIRECTIVES:
            raise it.ctx.refuse(
                node,
                f"strptime directive %{directive}",
                "supported: " + " ".join(f"%{d}" for d in STRPTIME_DIRECTIVES),
            )
        if directive != "%" and directive in seen:
            raise it.ctx.refuse(
                node,
                f"strptime directive %{directive} twice",
                "Python's re raises error (a group named twice): give each directive once",
            )
        seen.add(directive)
        i += 2


def _strptime(
    it: "Interpreter", node: ast.Call, cls: type, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    if kwargs or len(args) != 2:
        raise it.ctx.refuse(node, "strptime() with these arguments", "datetime.strptime(s, FORMAT)")
    s, fmt = args
    if not (fmt.is_const and isinstance(fmt.const, str)):
        raise it.ctx.refuse(
            node, "strptime() of a format known only at run time", "a constant format string"
        )
    _check_format(it, node, fmt.const)
    if s.is_const and isinstance(s.const, str):
        return _constant(it, node, lambda: datetime.strptime(s.const, fmt.const))
    s = _text(it, node, "datetime.strptime", s, 1)
    result = F.call_function("__mws_python_strptime", s.column, F.lit(fmt.const))
    return _parsed(it, node, result, "datetime")


def _fromisoformat(
    it: "Interpreter", node: ast.Call, cls: type, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    kind = cls.__name__
    s = _one_argument(it, node, f"{kind}.fromisoformat", args, kwargs)
    if s.is_const and isinstance(s.const, str):
        text = s.const
        return _constant(it, node, lambda: cls.fromisoformat(text))  # type: ignore[attr-defined]
    s = _text(it, node, f"{kind}.fromisoformat", s, 0)
    result = F.call_function(f"__mws_python_{kind}_fromisoformat", s.column)
    return _parsed(it, node, result, kind)


def _epoch_seconds(it: "Interpreter", node: ast.Call, name: str, x: Value) -> Value:
    """A fromtimestamp argument: an int or a float, failing with Python's errors for None,
    NaN and what ``time_t`` cannot hold."""
    if x.type.kind not in ("int", "bool", "float", "none"):
        raise it.ctx.refuse(
            node,
            f"{name}() of a {x.type}",
            "an int or a float of epoch seconds (an int-or-float: float(x))",
        )
    x = operators.none_check(
        it.ctx, node, x, "'NoneType' object cannot be interpreted as an integer"
    )
    if x.type.kind == "float":
        it.ctx.check(node, F.isnan(x.column), "ValueError", "Invalid value NaN (not a number)")
    return x


def _out_of_range(it: "Interpreter", node: ast.Call, seconds: Column) -> Column:
    """The checks of whole epoch ``seconds`` (a DOUBLE) beyond what Python's
    ``fromtimestamp`` holds: ``time_t``'s range, ``localtime``'s, a TIMESTAMP's (beyond which
    the year is out of Python's range too); the condition that the seconds are within a
    TIMESTAMP's."""
    it.ctx.check(
        node,
        (seconds >= F.lit(_TIME_T)) | (seconds < F.lit(-_TIME_T)),
        "OverflowError",
        "timestamp out of range for platform time_t",
    )
    within_time_t = (seconds < F.lit(_TIME_T)) & (seconds >= F.lit(-_TIME_T))
    localtime_fails = (seconds > F.lit(float(_LOCALTIME_MAX))) | (
        seconds < F.lit(float(_LOCALTIME_MIN))
    )
    it.ctx.check(
        node,
        within_time_t & localtime_fails,
        "OSError",
        "[Errno 75] Value too large for defined data type",
    )
    spark = F.abs(seconds) < F.lit(float(_SPARK_SECONDS))
    it.ctx.check(
        node, within_time_t & ~localtime_fails & ~spark, "ValueError", "year is out of range"
    )
    return spark


def _year_check(it: "Interpreter", node: ast.Call, column: Column, within: Column) -> None:
    year = F.year(column)
    it.ctx.check(
        node,
        within & ((year < F.lit(1)) | (year > F.lit(9999))),
        "",
        F.concat(F.lit("ValueError: year "), year.cast("string"), F.lit(" is out of range")),
    )


def _fromtimestamp(
    it: "Interpreter", node: ast.Call, cls: type, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    kind = cls.__name__
    x = _one_argument(it, node, f"{kind}.fromtimestamp", args, kwargs)
    if x.is_const and x.const is not None:
        value = x.const
        return _constant(it, node, lambda: cls.fromtimestamp(value))  # type: ignore[attr-defined]
    x = _epoch_seconds(it, node, f"{kind}.fromtimestamp", x)
    if x.type.kind == "float":
        whole = F.when(x.column < 0, F.ceil(x.column)).otherwise(F.floor(x.column)).cast("double")
        if kind == "date":
            # CPython floors a float for a date (_PyTime_ROUND_FLOOR).
            seconds = F.floor(x.column).cast("double")
            within = _out_of_range(it, node, seconds)
            column = F.to_date(F.timestamp_seconds(F.when(within, seconds).cast("bigint")))
            _year_check(it, node, column, within)
            return Value(F.when(within, column), DATE, False)
        # CPython's _PyTime_DoubleToDenominator: the fraction's microseconds rounded half to
        # even, carried into the seconds.
        fraction = python_round((x.column - whole) * F.lit(1e6), 0)
        seconds = (
            F.when(fraction >= F.lit(1e6), whole + F.lit(1.0))
            .when(fraction < F.lit(0.0), whole - F.lit(1.0))
            .otherwise(whole)
        )
        micros_part = (
            F.when(fraction >= F.lit(1e6), fraction - F.lit(1e6))
            .when(fraction < F.lit(0.0), fraction + F.lit(1e6))
            .otherwise(fraction)
        )
        within = _out_of_range(it, node, seconds)
        micros = F.when(
            within, seconds.cast("bigint") * F.lit(1_000_000) + micros_part.cast("bigint")
        )
    else:
        seconds = x.column.cast("bigint")
        within = _out_of_range(it, node, seconds.cast("double"))
        micros = F.when(within, seconds * F.lit(1_000_000))
    column = F.timestamp_micros(micros)
    _year_check(it, node, column, within)
    if kind == "date":
        return Value(F.to_date(column), DATE, False)
    return Value(column, DATETIME, False)


_METHODS: Dict[str, Handler] = {
    "strptime": _strptime,
    "fromisoformat": _fromisoformat,
    "fromtimestamp": _fromtimestamp,
}


def class_method(it: "Interpreter", node: ast.Call, cls: type, name: str) -> Optional[Value]:
    """``datetime.<name>(...)`` or ``date.<name>(...)`` where this module compiles it, else
    ``None`` (the caller refuses what it does not know)."""
    if name in _CLOCK:
        raise it.ctx.refuse(
            node,
            f"{cls.__name__}.{name}()",
            "a state function must give the same result when replayed: use state.batch_time "
            "(the batch's time) or an event-time column",
        )
    handler = _METHODS.get(name)
    if handler is None or not hasattr(cls, name):
        return None
    if (
        node.keywords
        and any(k.arg is None for k in node.keywords)
        or any(isinstance(a, ast.Starred) for a in node.args)
    ):
        raise it.ctx.refuse(node, "*args or **kwargs in a call", "pass arguments one by one")
    args = [it.value(a) for a in node.args]
    kwargs = {k.arg: it.value(k.value) for k in node.keywords if k.arg is not None}
    return handler(it, node, cls, args, kwargs)
