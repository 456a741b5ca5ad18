"""Arithmetic of timedeltas and dates beyond ``datetime ± timedelta``, exact as Python's.

A timedelta is a DAY TO SECOND interval: a count of microseconds, which is what CPython's
``timedelta`` arithmetic works on too. ``td * n`` and ``td // n`` are that count multiplied
and floored, ``td / n`` rounded half to even (CPython's ``_divide_and_round``), ``td // td``
an int, ``td % td`` a timedelta, ``td / td`` a float; ``divmod`` follows from ``//`` and
``%``. A ``date`` moves by whole days, and only by the timedelta's ``days`` field (its floor
in days): ``date + timedelta(hours=-1)`` is the day before, ``date - timedelta(hours=1)`` the
same day, as CPython computes ``date - td`` as ``date + timedelta(-td.days)``. Results beyond
CPython's ranges fail with its ``OverflowError``: a timedelta past 999999999 days, a date or
datetime outside years 1..9999.

``td * x`` and ``td / x`` of a float are the plugin's (``__mws_python_timedelta_multiply`` and
``_divide``): CPython rounds the exact product of the microseconds and the float's binary
fraction, which needs more digits than a SQL decimal holds.
"""

import ast
from decimal import Decimal
from typing import TYPE_CHECKING, Optional

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc.pytypes import DATE, DATETIME, FLOAT, INT, TIMEDELTA
from mapwithstate.pyfunc.server_functions import fail_on_error
from mapwithstate.pyfunc.values import Value, let

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context

__all__ = [
    "binary",
    "micros",
    "whole_days",
    "interval",
    "interval_of_micros",
    "checked_datetime",
    "DAY",
]

#: A day in microseconds.
DAY = 86_400_000_000
#: CPython's bound on a timedelta's days.
MAX_DAYS = 999_999_999
#: What an int's floor division or modulo by zero says, for timedeltas too.
_INT_ZERO = "integer division or modulo by zero"


def micros(column: Column) -> Column:
    """A DAY TO SECOND interval's microseconds (BIGINT): the interval added to the epoch is
    exact in microseconds."""
    return F.unix_micros(F.timestamp_micros(F.lit(0)) + column)


def interval(ctx: "Context", node: ast.AST, total: Column) -> Column:
    """The timedelta of ``total`` microseconds (an exact DECIMAL(38,0)), failing where
    Python's days pass 999999999 (OverflowError) or where a DAY TO SECOND interval cannot
    hold it."""
    within = (total >= F.lit(Decimal(-MAX_DAYS * DAY))) & (
        total < F.lit(Decimal((MAX_DAYS + 1) * DAY))
    )
    ctx.check(node, ~within, "OverflowError", f"days must have magnitude <= {MAX_DAYS}")
    fits = (total >= F.lit(Decimal(-(1 << 63)))) & (total < F.lit(Decimal(1 << 63)))
    ctx.check(
        node,
        within & ~fits,
        "OverflowError",
        "timedelta does not fit a DAY TO SECOND interval (106751991 days)",
    )
    return interval_of_micros(F.when(fits, total).cast("bigint"))


def _made(count: Column) -> Column:
    # Whole days and the rest, both of the total's sign: neither overflows on its own.
    days = F.call_function("div", count, F.lit(DAY)).cast("int")
    rest = (count % F.lit(DAY)).cast("decimal(20,0)") / F.lit(1_000_000)
    return F.make_dt_interval(days=days, secs=rest.cast("decimal(18,6)"))


def interval_of_micros(count: Column) -> Column:
    """The DAY TO SECOND interval of a BIGINT count of microseconds."""
    return let([count], _made)


def checked_datetime(ctx: "Context", node: ast.AST, column: Column, kind: str) -> Value:
    """A datetime or date result (``kind``), failing with CPython's ``OverflowError: date
    value out of range`` outside years 1..9999."""
    year = F.year(column)
    ctx.check(
        node,
        (year < F.lit(1)) | (year > F.lit(9999)),
        "OverflowError",
        "date value out of range",
    )
    return Value(column, DATETIME if kind == "datetime" else DATE, False)


def _decimal(column: Column) -> Column:
    return column.cast("decimal(38,0)")


def _floor_div(a: Column, b: Column) -> Column:
    """Python's ``a // b`` of DECIMAL(38,0) integers (``b`` not 0)."""

    def floored(a: Column, b: Column) -> Column:
        safe = F.when(b == F.lit(0), F.lit(1)).otherwise(b)
        quotient = F.call_function("div", a, safe).cast("decimal(38,0)")
        # ``div`` truncates toward zero: one less where the true quotient is negative.
        below = (quotient * safe != a) & ((a < F.lit(0)) != (safe < F.lit(0)))
        return F.when(below, quotient - F.lit(1)).otherwise(quotient).cast("decimal(38,0)")

    return let([a, b], floored)


def whole_days(td: Column) -> Column:
    """``td.days``: the interval's floor in whole days (INT)."""
    return _floor_div(_decimal(micros(td)), F.lit(DAY).cast("decimal(38,0)")).cast("int")


def _divide_and_round(a: Column, b: Column) -> Column:
    """CPython's ``_divide_and_round(a, b)`` of DECIMAL(38,0) integers: ``a / b`` rounded half
    to even (``b`` not 0)."""

    def rounded(a: Column, b: Column, q: Column) -> Column:
        r2 = ((a - q * b) * F.lit(2)).cast("decimal(38,0)")
        greater = F.when(b > F.lit(0), r2 > b).otherwise(r2 < b)
        odd = F.pmod(q, F.lit(2)) == F.lit(1)
        return F.when(greater | ((r2 == b) & odd), q + F.lit(1)).otherwise(q).cast("decimal(38,0)")

    return let([a, b], lambda a, b: let([a, b, _floor_div(a, b)], rounded))


def binary(ctx: "Context", node: ast.AST, op: ast.operator, a: Value, b: Value) -> Optional[Value]:
    """``a <op> b`` where an operand is a timedelta or a date and Python defines it beyond
    ``datetime ± timedelta`` (which :func:`operators.binary` makes); ``None`` where Python
    does not define it (its caller raises Python's TypeError)."""
    ka, kb = a.type.kind, b.type.kind
    if isinstance(op, (ast.Add, ast.Sub)) and ka == "date" and kb == "timedelta":
        days = whole_days(b.column)
        # CPython: date - td is date + timedelta(-td.days), not date + (-td).
        moved = F.date_add(a.column, days if isinstance(op, ast.Add) else -days)
        return checked_datetime(ctx, node, moved, "date")
    if isinstance(op, ast.Add) and ka == "timedelta" and kb == "date":
        return binary(ctx, node, op, b, a)
    if isinstance(op, ast.Sub) and ka == kb == "date":
        return Value(F.make_dt_interval(days=F.datediff(a.column, b.column)), TIMEDELTA, False)
    if isinstance(op, ast.Add) and ka == "timedelta" and kb == "datetime":
        return checked_datetime(ctx, node, b.column + a.column, "datetime")
    if ka != "timedelta" and not (kb == "timedelta" and isinstance(op, ast.Mult)):
        return None
    if isinstance(op, ast.Mult):
        td, n = (a, b) if ka == "timedelta" else (b, a)
        if n.type.kind in ("float", "num"):
            return _by_float(ctx, node, td, n, divide=False)
        if n.type.kind not in ("int", "bool"):
            return None
        count = _decimal(n.column.cast("bigint"))
        product = (_decimal(micros(td.column)) * count).cast("decimal(38,0)")
        return Value(interval(ctx, node, product), TIMEDELTA, False)
    if not isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)):
        return None
    if kb in ("float", "num") and isinstance(op, ast.Div):
        return _by_float(ctx, node, a, b, divide=True)
    if kb not in ("int", "bool", "timedelta") or (kb != "timedelta" and isinstance(op, ast.Mod)):
        return None
    dividend = _decimal(micros(a.column))
    divisor = _decimal(micros(b.column) if kb == "timedelta" else b.column.cast("bigint"))
    zero = divisor == F.lit(0)
    # CPython divides a timedelta by a timedelta as ints' true division, by an int as
    # microseconds' floor division.
    message = "division by zero" if isinstance(op, ast.Div) and kb == "timedelta" else _INT_ZERO
    ctx.check(node, zero, "ZeroDivisionError", message)
    if isinstance(op, ast.Div) and kb == "timedelta":
        # Python's int / int, correctly rounded: exact doubles below 2**53 microseconds.
        quotient = micros(a.column).cast("double") / micros(b.column).cast("double")
        return Value(F.when(~zero, quotient), FLOAT, False)
    if isinstance(op, ast.Div):
        return Value(interval(ctx, node, _divide_and_round(dividend, divisor)), TIMEDELTA, False)
    floor = _floor_div(dividend, divisor)
    if isinstance(op, ast.FloorDiv) and kb == "timedelta":
        return Value(floor.cast("bigint"), INT, False)
    if isinstance(op, ast.FloorDiv):
        return Value(interval(ctx, node, floor), TIMEDELTA, False)
    remainder = let([dividend, divisor, floor], lambda a, b, q: (a - q * b).cast("decimal(38,0)"))
    return Value(interval(ctx, node, remainder), TIMEDELTA, False)


def _by_float(ctx: "Context", node: ast.AST, td: Value, x: Value, divide: bool) -> Value:
    """``td * x`` or ``td / x`` of a float (or an int-or-float): the plugin's exact product or
    quotient of the microseconds and the float's binary fraction, rounded half to even, with
    Python's errors (NaN, an infinity, a zero divisor, a result beyond its range or a DAY TO
    SECOND interval's); an int-or-float that holds an int multiplies or divides as an int."""
    name = "__mws_python_timedelta_divide" if divide else "__mws_python_timedelta_multiply"
    count = micros(td.column)
    if x.type.kind == "num":
        # An int-or-float that holds an int multiplies or divides as that int (td / 0 fails
        # with Python's ZeroDivisionError there).
        num = x.column
        result = F.call_function(name, count, num.getField("f"), num.getField("i"))
    else:
        result = F.call_function(name, count, x.column.cast("double"), F.lit(None).cast("bigint"))
    fail_on_error(ctx, node, result)
    return Value(interval_of_micros(result.getField("micros")), TIMEDELTA, False)
