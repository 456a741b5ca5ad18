"""Python's operators over compiled values, with Python's semantics rather than SQL's.

``//`` and ``%`` floor (Spark's ``div`` and ``%`` truncate), ``/`` is always floating, ints
never overflow silently (a result beyond 64 bits fails the query: Python's int would not fit
the column), ``None`` in arithmetic or ordering fails the query with Python's ``TypeError``,
comparisons with NaN are false, ``==`` with ``None`` is a null-safe test, ``and``/``or`` return
an operand. Each runtime failure is registered with :meth:`Context.check`, under the path's
guard, so it fires only where Python would raise.
"""

import ast
import math
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import numeric_order, timedelta_arithmetic, tuples
from mapwithstate.pyfunc.pytypes import (
    BOOL,
    FLOAT,
    INT,
    NONE,
    NUM,
    STR,
    TIMEDELTA,
    PyType,
    unify,
)
from mapwithstate.pyfunc.server_functions import exact_int, int_power
from mapwithstate.pyfunc.values import NOTHING, Cond, Value, c_and, c_not, let

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context

__all__ = [
    "binary",
    "compare",
    "unary",
    "truthy",
    "none_check",
    "as_float",
    "int_result",
    "equals",
    "int_or_float_sum",
    "per_branch",
]

_SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}
_MIN_LONG = -(1 << 63)


def symbol(op: ast.AST) -> str:
    return _SYMBOLS.get(type(op), type(op).__name__)


def truthy(value: Value) -> Cond:
    """Python's ``bool(value)``: ``None``, ``0``, ``0.0``, ``""``, ``[]``, ``{}`` and a zero
    timedelta are false; never null."""
    if value.is_const:
        try:
            return bool(value.const)
        except Exception:  # noqa: BLE001 - a constant without a truth value is treated as data
            pass
    kind, column = value.type.kind, value.column
    if kind == "none":
        return False
    if kind == "bool":
        test = column
    elif kind in ("int", "float"):
        test = column != F.lit(0)
    elif kind == "num":
        test = as_float(value) != F.lit(0.0)
    elif kind == "str":
        test = F.length(column) > 0
    elif kind in ("list", "dict", "set"):
        test = F.size(column) > 0
    elif kind == "timedelta":
        test = column != F.lit(timedelta(0))
    elif kind == "tuple" and not value.type.args:
        return False
    else:
        return column.isNotNull() if value.nullable else True
    return F.coalesce(test, F.lit(False)) if value.nullable else test


def none_check(
    ctx: "Context", node: ast.AST, value: Value, what: str, exception: str = "TypeError"
) -> Value:
    """Fails the query with Python's ``exception`` where ``value`` is ``None`` (``what``
    describes the operation, e.g. ``unsupported operand type(s) for +: 'NoneType' and
    'int'``); the value is then known not to be ``None``."""
    if value.type.kind == "none":
        ctx.check(node, True, exception, what)
        return value
    if value.nullable:
        ctx.check(node, value.column.isNull(), exception, what)
    return value.non_null()


def attribute_of_none(ctx: "Context", node: ast.AST, value: Value, attr: str) -> Value:
    """Fails the query with Python's ``AttributeError`` where ``value`` is ``None`` and its
    attribute or method ``attr`` is looked up (``row.n``, ``d.get(...)``, ``ts.year``):
    ``'NoneType' object has no attribute 'attr'``. Python looks a method up before it
    evaluates the call's arguments, so callers check before compiling them."""
    return none_check(
        ctx, node, value, f"'NoneType' object has no attribute '{attr}'", "AttributeError"
    )


def as_float(value: Value) -> Column:
    """An int, bool, float or int-or-float value as a DOUBLE Column."""
    if value.type.kind == "num":
        return F.coalesce(value.column.getField("i").cast("double"), value.column.getField("f"))
    return value.column.cast("double") if value.type.kind != "float" else value.column


def int_or_float_sum(total: Column, empty: Column, start: Column) -> Column:
    """``sum()`` of floats from an int ``start`` as an int-or-float: the float ``total``, or
    ``start`` itself, an int, where there was nothing to add (``sum([])`` is ``0``, not
    ``0.0``)."""
    return F.struct(
        F.when(empty, start.cast("bigint")).alias("i"),
        F.when(~empty, total).alias("f"),
    )


def per_branch(
    ctx: "Context",
    value: Value,
    on_int: Callable[[Value], Value],
    on_float: Callable[[Value], Value],
) -> Value:
    """A function of an int-or-float ``value``: ``on_int`` of its int where it holds one,
    ``on_float`` of its float elsewhere, each under its branch's guard (their checks fire only
    there). The result is an int, a float, or again an int-or-float, as the two give."""
    holds_int = value.column.getField("i").isNotNull()
    saved = ctx.guard
    try:
        ctx.guard = c_and(saved, holds_int)
        a = on_int(Value(value.column.getField("i"), INT, False))
        ctx.guard = c_and(saved, c_not(holds_int))
        b = on_float(Value(value.column.getField("f"), FLOAT, False))
    finally:
        ctx.guard = saved
    if a.type.kind == b.type.kind and a.type.kind in ("int", "float", "bool", "str"):
        return Value(F.when(holds_int, a.column).otherwise(b.column), a.type, False)

    def parts(v: Value) -> Tuple[Column, Column]:
        if v.type.kind == "num":
            return v.column.getField("i"), v.column.getField("f")
        if v.type.kind == "float":
            return F.lit(None).cast("bigint"), v.column
        return v.column.cast("bigint"), F.lit(None).cast("double")

    (ai, af), (bi, bf) = parts(a), parts(b)
    return Value(
        F.struct(
            F.when(holds_int, ai).otherwise(bi).alias("i"),
            F.when(holds_int, af).otherwise(bf).alias("f"),
        ),
        NUM,
        False,
    )


def _as_int(value: Value) -> Column:
    return value.column.cast("bigint") if value.type.kind == "bool" else value.column


def int_result(ctx: "Context", node: ast.AST, exact: Column, operands: Cond) -> Value:
    """An int result from a ``try_*`` Column: null where the operands are not null means it
    does not fit in 64 bits, which fails the query (Python's int would not fit the column)."""
    ctx.check(
        node,
        c_and(operands, exact.isNull()),
        "OverflowError",
        "int result does not fit in 64 bits (BIGINT)",
    )
    return Value(exact, INT, False)


def _type_error(ctx: "Context", node: ast.AST, op: ast.AST, a: Value, b: Value) -> Exception:
    return ctx.refuse(
        node,
        f"operator {symbol(op)} between {a.type} and {b.type}",
        f"Python raises TypeError: unsupported operand type(s) for {symbol(op)}: "
        f"'{a.type}' and '{b.type}'",
    )


def binary(ctx: "Context", node: ast.AST, op: ast.operator, a: Value, b: Value) -> Value:
    """``a <op> b`` for an arithmetic or bitwise operator."""
    sym = symbol(op)
    message = f"unsupported operand type(s) for {sym}: '{{}}' and '{{}}'"
    if a.type.kind == "none" or b.type.kind == "none":
        ctx.check(node, True, "TypeError", message.format(a.type, b.type))
        return Value(F.lit(None), NONE, True)
    a_checked = none_check(ctx, node, a, message.format("NoneType", b.type))
    b_checked = none_check(ctx, node, b, message.format(a.type, "NoneType"))
    a, b = a_checked, b_checked
    ka, kb = a.type.kind, b.type.kind
    if ka == kb == "set":
        from mapwithstate.pyfunc import sets

        return sets.binary(ctx, node, op, a, b)
    if "num" in (ka, kb):
        if "timedelta" in (ka, kb):
            # td * n, n * td, td / n: as the int or the float the int-or-float holds.
            scaled = timedelta_arithmetic.binary(ctx, node, op, a, b)
            if scaled is not None:
                return scaled
        if {ka, kb} <= {"num", "float", "int", "bool"} and (
            "float" in (ka, kb) or isinstance(op, ast.Div)
        ):
            return _float_binary(ctx, node, op, as_float(a), as_float(b))
        if {ka, kb} <= {"num", "int", "bool"} and isinstance(op, _NUM_OPERATORS):
            return _num_binary(ctx, node, op, a, b)
        raise ctx.refuse(
            node,
            f"operator {sym} on a value that is an int or a float",
            "Python raises TypeError where it is a float; convert it with int(...) first"
            if {ka, kb} <= {"num", "int", "bool"}
            else f"Python raises TypeError: unsupported operand type(s) for {sym}",
        )
    if ka in ("int", "bool") and kb in ("int", "bool") and isinstance(op, ast.Pow):
        return _int_power(ctx, node, a, b)
    if (
        ka in ("int", "bool")
        and kb in ("int", "bool")
        and not (ka == kb == "bool" and isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)))
    ):
        return _int_binary(ctx, node, op, _as_int(a), _as_int(b))
    if ka == kb == "bool":
        column = {
            ast.BitAnd: a.column & b.column,
            ast.BitOr: a.column | b.column,
            ast.BitXor: a.column != b.column,
        }[type(op)]
        return Value(column, BOOL, False)
    if {ka, kb} <= {"int", "bool", "float"}:
        if isinstance(op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)):
            return _float_binary(ctx, node, op, as_float(a), as_float(b))
        raise _type_error(ctx, node, op, a, b)
    if isinstance(op, ast.Add):
        if ka == kb == "str":
            return Value(F.concat(a.column, b.column), STR, False)
        if ka == kb == "list":
            joined = unify(a.type, b.type)
            if joined is None:
                raise _type_error(ctx, node, op, a, b)
            from mapwithstate.pyfunc.paths import converted

            # Each side as the joined type: ints and floats (in lists of lists too) as
            # int-or-floats, an empty list as a list of the other's elements.
            return Value(F.concat(converted(a, joined), converted(b, joined)), joined, False)
        if ka == "datetime" and kb == "timedelta":
            return timedelta_arithmetic.checked_datetime(ctx, node, a.column + b.column, ka)
        if ka == kb == "timedelta":
            return Value(a.column + b.column, TIMEDELTA, False)
    if isinstance(op, ast.Sub):
        if ka == "datetime" and kb == "timedelta":
            return timedelta_arithmetic.checked_datetime(ctx, node, a.column - b.column, ka)
        if ka == kb == "datetime":
            return Value(a.column - b.column, TIMEDELTA, False)
        if ka == kb == "timedelta":
            return Value(a.column - b.column, TIMEDELTA, False)
    if isinstance(op, ast.Mult) and {ka, kb} == {"str", "int"}:
        text, times = (a, b) if ka == "str" else (b, a)
        return Value(
            F.repeat(text.column, F.greatest(times.column, F.lit(0)).cast("int")), STR, False
        )
    if isinstance(op, ast.Mult) and ka == "list" and kb in ("int", "bool"):
        return repeated(a, b)
    if isinstance(op, ast.Mult) and kb == "list" and ka in ("int", "bool"):
        return repeated(b, a)
    if "timedelta" in (ka, kb) or "date" in (ka, kb):
        moved = timedelta_arithmetic.binary(ctx, node, op, a, b)
        if moved is not None:
            return moved
    raise _type_error(ctx, node, op, a, b)


def repeated(items: Value, times: Value) -> Value:
    """``items * times``, Python's repetition of a list (empty for a count below one). A
    count past an array's limit makes Spark fail the query, where Python would raise
    ``MemoryError`` (an empty list repeated stays empty at any count)."""
    count = F.least(F.greatest(_as_int(times), F.lit(0)), F.lit((1 << 31) - 1)).cast("int")

    def repeat(xs: Column) -> Column:
        return F.when(F.size(xs) == 0, xs).otherwise(F.flatten(F.array_repeat(xs, count)))

    # The list in the plan once (it is read twice).
    return Value(let([items.column], repeat), items.type, False)


def _int_part(value: Value) -> Column:
    return value.column.getField("i") if value.type.kind == "num" else _as_int(value)


#: The operators of an int-or-float value with an int or another such value: an int where
#: both are ints, a float where either is.
_NUM_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow)


def _num_binary(ctx: "Context", node: ast.AST, op: ast.AST, a: Value, b: Value) -> Value:
    """``+ - * // % **`` where an operand is an int or a float: the int operation (its checks
    too) where both are ints, else the float one, as Python's result is. ``int ** int`` is
    itself an int or a float (by the exponent's sign), which the result keeps."""
    both_int = _int_part(a).isNotNull() & _int_part(b).isNotNull()
    saved = ctx.guard
    try:
        ctx.guard = c_and(saved, both_int)
        if isinstance(op, ast.Pow):
            exact = _int_power(ctx, node, Value(_int_part(a), INT, False), _int_value(b))
        else:
            exact = _int_binary(ctx, node, op, _int_part(a), _int_part(b))
        ctx.guard = c_and(saved, ~both_int)
        inexact = _float_binary(ctx, node, op, as_float(a), as_float(b)).column
    finally:
        ctx.guard = saved
    if exact.type.kind == "num":
        exact_int = exact.column.getField("i")
        exact_float: Column = exact.column.getField("f")
    elif exact.type.kind == "float":
        exact_int, exact_float = F.lit(None).cast("bigint"), exact.column
    else:
        exact_int, exact_float = exact.column, F.lit(None).cast("double")
    column = F.struct(
        F.when(both_int, exact_int).alias("i"),
        F.when(both_int, exact_float).otherwise(inexact).alias("f"),
    )
    return Value(column, NUM, False)


def _int_value(value: Value) -> Value:
    """The int ``value`` holds (an int-or-float value's ``i``), keeping a constant."""
    return Value(_int_part(value), INT, False, value.const if value.type.kind == "int" else NOTHING)


def _int_remainder(a: Column, b: Column) -> Tuple[Column, Column, Column]:
    """The divisor made safe (0 as 1; its check is elsewhere), Spark's truncated remainder,
    and whether Python's flooring result is one divisor further."""
    safe_b = F.when(b == F.lit(0), F.lit(1).cast("bigint")).otherwise(b)
    # Spark's % truncates toward zero: its result has the dividend's sign, Python's the
    # divisor's. Where they differ (a non-zero remainder of the other sign), Python's is
    # one divisor further and its quotient one less.
    remainder = F.when((a == F.lit(_MIN_LONG)) & (safe_b == F.lit(-1)), F.lit(0)).otherwise(
        a % safe_b
    )
    adjust = (remainder != F.lit(0)) & ((remainder < F.lit(0)) != (safe_b < F.lit(0)))
    return safe_b, remainder, adjust


def _int_mod(a: Column, b: Column) -> Column:
    """Python's ``a % b`` of BIGINTs (``b`` not 0)."""
    safe_b, remainder, adjust = _int_remainder(a, b)
    return F.when(adjust, remainder + safe_b).otherwise(remainder)


def _int_floor_div(a: Column, b: Column) -> Column:
    """Python's ``a // b`` of BIGINTs (``b`` not 0, the overflow checked elsewhere)."""
    safe_b, _, adjust = _int_remainder(a, b)
    quotient = F.call_function("div", a, F.when(safe_b == F.lit(-1), F.lit(1)).otherwise(safe_b))
    quotient = F.when(
        safe_b == F.lit(-1), F.when(a == F.lit(_MIN_LONG), F.lit(None)).otherwise(-a)
    ).otherwise(quotient)
    return F.when(adjust, quotient - F.lit(1)).otherwise(quotient).cast("bigint")


def _int_power(ctx: "Context", node: ast.AST, a: Value, b: Value) -> Value:
    """Python's ``a ** b`` of ints: exact for ``b >= 0`` (a result beyond 64 bits fails, as
    Python's int would not fit the column), a float for ``b < 0`` (``float(a) ** b``, as
    Python computes it), ``0 ** b`` for ``b < 0`` failing with ZeroDivisionError. For an
    exponent known when compiling the result is an int or a float, by squaring; for one known
    only at run time, an int or a float by its sign (the plugin's ``__mws_python_int_pow``)."""
    if not b.is_const:
        base, power = _as_int(a), _as_int(b)
        ctx.check(
            node,
            (base == F.lit(0)) & (power < F.lit(0)),
            "ZeroDivisionError",
            "0.0 cannot be raised to a negative power",
        )
        result = int_power(base, power)
        ctx.check(
            node,
            (power >= F.lit(0)) & result.getField("i").isNull(),
            "OverflowError",
            "int result does not fit in 64 bits (BIGINT)",
        )
        return Value(result, NUM, False)
    exponent = int(b.const)
    if exponent < 0:
        ctx.check(
            node,
            _as_int(a) == F.lit(0),
            "ZeroDivisionError",
            "0.0 cannot be raised to a negative power",
        )
        return Value(let([_as_int(a)], lambda base: _inverse_power(base, -exponent)), FLOAT, False)
    power = let(
        [_as_int(a)],
        lambda base: _power_by_squaring(base, exponent),
    )
    return int_result(ctx, node, power, True)


def _inverse_power(base: Column, exponent: int) -> Column:
    """``base ** -exponent`` (``exponent > 0``, ``base`` not 0) as Python computes it, libm's
    ``pow`` of the two as floats: where ``base ** exponent`` is an int a double holds exactly,
    one division, correctly rounded, as libm's ``pow`` is but in rare cases; else Java's
    ``Math.pow``, which may differ from libm's in the last bit."""
    magnitude = _power_by_squaring(base, exponent)
    exact = magnitude.isNotNull() & (F.abs(magnitude) <= F.lit(1 << 53)) & (magnitude != F.lit(0))
    return F.when(exact, F.lit(1.0) / magnitude.cast("double")).otherwise(
        F.pow(base.cast("double"), F.lit(float(-exponent)))
    )


def _power_by_squaring(base: Column, exponent: int) -> Column:
    """``base ** exponent`` of a BIGINT, null where it does not fit 64 bits: every square taken
    is at most the result in magnitude (or the base is -1, 0 or 1), so a null (an overflow)
    along the way means the result overflows."""
    if exponent > 64:
        # Beyond 2 ** 64 for any base but -1, 0 and 1, whose powers are exact.
        return (
            F.when(base.isin(0, 1), base)
            .when(base == F.lit(-1), F.lit(1 if exponent % 2 == 0 else -1).cast("bigint"))
            .otherwise(F.lit(None).cast("bigint"))
        )
    result: Column = F.lit(1).cast("bigint")
    square = base
    while exponent:
        if exponent & 1:
            result = F.try_multiply(result, square)
        exponent >>= 1
        if exponent:
            square = F.try_multiply(square, square)
    return result


def _exact_int(ctx: "Context", node: ast.AST, op: ast.AST, a: Column, b: Column) -> Value:
    """Python's ``a + b``, ``a - b`` or ``a * b`` of BIGINTs, failing beyond 64 bits: one
    exact operation that raises Python's OverflowError itself (``__mws_python_add`` and its
    peers). Its failure is registered too, ``exact IS NULL`` (false wherever the operands are
    not null, but evaluating it raises), so that the call's checks raise in Python's order;
    the compiler drops it from them where the outputs evaluate the value anyway. Where values
    may not raise when computed (:attr:`Context.self_checks`), Spark's ``try_*`` and a check."""
    if not ctx.self_checks:
        tried = {"+": F.try_add, "-": F.try_subtract, "*": F.try_multiply}
        return int_result(ctx, node, tried[symbol(op)](a, b), True)
    from mapwithstate.pyfunc.interpreter import Carrier

    text = "int result does not fit in 64 bits (BIGINT)"
    exact = exact_int(symbol(op), a, b, ctx.message(node, "OverflowError", text))
    carrier = Carrier(str(exact), (str(a), str(b)))
    ctx.check(node, exact.isNull(), "OverflowError", text, carrier=carrier)
    return Value(exact, INT, False)


def _int_binary(ctx: "Context", node: ast.AST, op: ast.AST, a: Column, b: Column) -> Value:
    if isinstance(op, (ast.Add, ast.Sub, ast.Mult)):
        return _exact_int(ctx, node, op, a, b)
    if isinstance(op, ast.Div):
        return _float_binary(ctx, node, op, a.cast("double"), b.cast("double"))
    if isinstance(op, (ast.FloorDiv, ast.Mod)):
        ctx.check(
            node,
            b == F.lit(0),
            "ZeroDivisionError",
            "integer division or modulo by zero"
            if isinstance(op, ast.FloorDiv)
            else "integer modulo by zero",
        )
        if isinstance(op, ast.Mod):
            return Value(let([a, b], _int_mod), INT, False)
        ctx.check(
            node,
            (a == F.lit(_MIN_LONG)) & (b == F.lit(-1)),
            "OverflowError",
            "int result does not fit in 64 bits (BIGINT)",
        )
        return Value(let([a, b], _int_floor_div), INT, False)
    if isinstance(op, ast.BitAnd):
        return Value(a.bitwiseAND(b), INT, False)
    if isinstance(op, ast.BitOr):
        return Value(a.bitwiseOR(b), INT, False)
    if isinstance(op, ast.BitXor):
        return Value(a.bitwiseXOR(b), INT, False)
    if isinstance(op, (ast.LShift, ast.RShift)):
        return _int_shift(ctx, node, op, a, b)
    raise ctx.refuse(node, f"operator {symbol(op)} on ints", "use +, -, *, /, //, %, &, |, ^")


def _int_shift(ctx: "Context", node: ast.AST, op: ast.AST, a: Column, n: Column) -> Value:
    """Python's ``a << n`` and ``a >> n`` of BIGINTs: a negative count raises ValueError;
    ``>>`` floors (Java's ``>>``, and past 63 bits the sign: 0 or -1); ``<<`` is exact, a
    result beyond 64 bits failing with OverflowError."""
    ctx.check(node, n < F.lit(0), "ValueError", "negative shift count")
    count = F.greatest(F.least(n, F.lit(63)), F.lit(0)).cast("int")
    if isinstance(op, ast.RShift):
        return Value(let([a, count], partial(F.call_function, "shiftright")), INT, False)

    def shifted(value: Column, bits: Column) -> Column:
        result = F.call_function("shiftleft", value, bits)
        back = F.call_function("shiftright", result, bits)
        fits = (value == F.lit(0)) | ((n <= F.lit(63)) & (back == value))
        return F.when(fits, result)

    exact = let([a, count], shifted)
    ctx.check(
        node,
        (n >= F.lit(0)) & exact.isNull(),
        "OverflowError",
        "int result does not fit in 64 bits (BIGINT)",
    )
    return Value(exact, INT, False)


def _float_remainder(a: Column, b: Column) -> Tuple[Column, Column, Column]:
    """The divisor made safe (0.0 as 1.0; its check is elsewhere), the remainder of
    truncation (Java's ``%`` on doubles, C's ``fmod``) and whether Python's flooring result is
    one divisor further, as CPython's ``float_divmod`` computes them."""
    safe_b = F.when(b == F.lit(0.0), F.lit(1.0)).otherwise(b)
    fmod = a % safe_b
    adjust = (fmod != F.lit(0.0)) & ((safe_b < F.lit(0.0)) != (fmod < F.lit(0.0)))
    return safe_b, fmod, adjust


def _float_mod(a: Column, b: Column) -> Column:
    """Python's ``a % b`` of DOUBLEs (``b`` not 0.0)."""
    safe_b, fmod, adjust = _float_remainder(a, b)

    def signed(mod: Column) -> Column:
        # A zero remainder takes the divisor's sign (CPython's copysign(0.0, b)).
        zero = F.when(safe_b < 0, F.lit(-0.0)).otherwise(F.lit(0.0))
        return F.when(mod == F.lit(0.0), zero).otherwise(mod)

    return let([F.when(adjust, fmod + safe_b).otherwise(fmod)], signed)


def _float_floor_div(a: Column, b: Column) -> Column:
    """Python's ``a // b`` of DOUBLEs (``b`` not 0.0), CPython's ``float_floor_div``: the
    quotient of ``divmod``, floored, and a zero quotient signed as ``a / b`` is."""
    safe_b, fmod, adjust = _float_remainder(a, b)

    def floored(div: Column, negative: Column) -> Column:
        # Spark's floor of a DOUBLE is a BIGINT (failing past its range under ANSI): exact
        # below 2**52, where a double may have a fraction; from there on a double is whole (or
        # infinite, or NaN) and is its own floor.
        floor = F.when(F.abs(div) < F.lit(_FRACTIONAL_BELOW), F.floor(div).cast("double"))
        floor = F.coalesce(floor, div)
        floor = F.when(div - floor > F.lit(0.5), floor + F.lit(1.0)).otherwise(floor)
        zero = F.when(negative, F.lit(-0.0)).otherwise(F.lit(0.0))
        return F.when(div == F.lit(0.0), zero).otherwise(floor)

    div = (a - fmod) / safe_b
    # a / b is negative, or -0.0, where exactly one of a and b has its sign bit.
    negative = is_negative(a) != (safe_b < F.lit(0.0))
    return let([F.when(adjust, div - F.lit(1.0)).otherwise(div), negative], floored)


#: Below this magnitude a double may have a fraction; from it on, every double is whole.
_FRACTIONAL_BELOW = float(1 << 52)


def is_negative(x: Column) -> Column:
    """Whether the DOUBLE ``x`` has its sign bit: below zero, or ``-0.0``, whose power ``-1``
    is ``-inf`` (Java's ``StrictMath.pow``, Spark's ``pow``; Spark's ``atan2`` and comparisons
    make ``-0.0`` and ``0.0`` one). False for NaN."""
    return (x < F.lit(0.0)) | ((x == F.lit(0.0)) & (F.pow(x, F.lit(-1.0)) < F.lit(0.0)))


def is_fractional(x: Column) -> Column:
    """Whether the DOUBLE ``x`` is finite and not a whole number (false for NaN and the
    infinities, as C's ``x != floor(x)`` is for CPython)."""
    # Spark's floor of a DOUBLE is a BIGINT (and fails past its range under ANSI): only the
    # doubles that may have a fraction are floored.
    small = F.when(F.abs(x) < F.lit(_FRACTIONAL_BELOW), x)
    return F.coalesce(F.floor(small).cast("double") != small, F.lit(False))


def _float_binary(ctx: "Context", node: ast.AST, op: ast.AST, a: Column, b: Column) -> Value:
    if isinstance(op, ast.Add):
        return Value(a + b, FLOAT, False)
    if isinstance(op, ast.Sub):
        return Value(a - b, FLOAT, False)
    if isinstance(op, ast.Mult):
        return Value(a * b, FLOAT, False)
    zero = b == F.lit(0.0)
    if isinstance(op, ast.Div):
        ctx.check(node, zero, "ZeroDivisionError", "division by zero")
        return Value(a / F.when(zero, F.lit(1.0)).otherwise(b), FLOAT, False)
    if isinstance(op, (ast.FloorDiv, ast.Mod)):
        ctx.check(
            node,
            zero,
            "ZeroDivisionError",
            "float floor division by zero" if isinstance(op, ast.FloorDiv) else "float modulo",
        )
        floor_op = _float_mod if isinstance(op, ast.Mod) else _float_floor_div
        return Value(let([a, b], floor_op), FLOAT, False)
    if isinstance(op, ast.Pow):
        return Value(_float_power(ctx, node, a, b), FLOAT, False)
    raise ctx.refuse(node, f"operator {symbol(op)} on floats", "Python raises TypeError")


def _float_power(ctx: "Context", node: ast.AST, a: Column, b: Column) -> Column:
    """Python's ``a ** b`` of DOUBLEs, CPython's ``float_pow``: its special cases first (``1 **
    nan`` and ``(-1) ** inf`` are 1.0 where Java's ``pow`` gives NaN; ``0.0 ** -inf`` is inf),
    ZeroDivisionError for zero to a negative finite power, and where Python's result is a
    complex (a finite negative base, a fractional exponent) the query fails, naming it: a
    complex fits no column. OverflowError where a finite base and exponent overflow."""
    infinite = F.lit(float("inf"))
    ctx.check(
        node,
        (a == F.lit(0.0)) & (b < F.lit(0.0)) & (b != -infinite),
        "ZeroDivisionError",
        "0.0 cannot be raised to a negative power",
    )
    ctx.check(
        node,
        (a < F.lit(0.0)) & (a != -infinite) & is_fractional(b),
        "ValueError",
        "a negative number raised to a fractional power is complex",
    )

    def power(x: Column, y: Column) -> Column:
        one = (x == F.lit(1.0)) | ((F.abs(x) == F.lit(1.0)) & (F.abs(y) == infinite))
        return F.when(y == F.lit(0.0), F.lit(1.0)).when(one, F.lit(1.0)).otherwise(F.pow(x, y))

    result = let([a, b], power)
    ctx.check(
        node,
        (F.abs(result) == infinite) & (F.abs(a) != infinite) & (F.abs(b) != infinite),
        "OverflowError",
        "(34, 'Numerical result out of range')",
    )
    return result


_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def compare(ctx: "Context", node: ast.AST, op: ast.AST, a: Value, b: Value) -> Value:
    """``a <op> b`` for one comparison operator (a chain is compared pairwise by the caller)."""
    if isinstance(op, (ast.Is, ast.IsNot)):
        other = b if a.type.kind == "none" else a if b.type.kind == "none" else None
        if other is None:
            raise ctx.refuse(
                node,
                "'is' between values that are not None",
                "use == (identity of values has no meaning in a column)",
            )
        if other.type.kind == "none":
            # Known when compiling: code under ``x is not None`` for an x always None never
            # runs (nor is it compiled: a loop's first typing pass, before x has a type).
            known = isinstance(op, ast.Is)
            return Value(F.lit(known), BOOL, False, known)
        test = other.column.isNull()
        return Value(test if isinstance(op, ast.Is) else ~test, BOOL, False)
    if isinstance(op, (ast.In, ast.NotIn)):
        test = _contains(ctx, node, b, a)
        return Value(test if isinstance(op, ast.In) else ~test, BOOL, False)
    if isinstance(op, (ast.Eq, ast.NotEq)):
        test = _equals(a, b)
        return Value(test if isinstance(op, ast.Eq) else ~test, BOOL, False)
    if not isinstance(op, _ORDER):
        raise ctx.refuse(node, f"comparison {type(op).__name__}", "use < <= > >= == != in is")
    sym = symbol(op)
    if a.type.kind == "none" or b.type.kind == "none" or a.nullable or b.nullable:
        message = f"'{sym}' not supported between instances of '{{}}' and '{{}}'"
        if a.type.kind == "none" or b.type.kind == "none":
            ctx.check(node, True, "TypeError", message.format(a.type, b.type))
            return Value(F.lit(False), BOOL, False)
        a = none_check(ctx, node, a, message.format("NoneType", b.type))
        b = none_check(ctx, node, b, message.format(a.type, "NoneType"))
    numeric = {a.type.kind, b.type.kind} <= {"int", "float", "bool", "num"}
    if a.type.kind == b.type.kind == "set":
        from mapwithstate.pyfunc import sets

        return Value(sets.compare(ctx, node, op, a, b), BOOL, False)
    if numeric:
        if not (a.type.kind in ("int", "bool") and b.type.kind in ("int", "bool")):
            # Exact between an int and a float, as Python compares them.
            return Value(numeric_order.order(op, a, b), BOOL, False)
        left, right = _as_int(a), _as_int(b)
        nan = None
    elif a.type.kind == b.type.kind == "tuple":
        return Value(
            tuples.order(
                ctx,
                node,
                op,
                a,
                b,
                lambda o, x, y: compare(ctx, node, o, x, y),
                _equals,
            ),
            BOOL,
            False,
        )
    elif a.type == b.type and a.type.kind in ("str", "datetime", "date", "timedelta", "list"):
        left, right, nan = a.column, b.column, None
    else:
        raise ctx.refuse(
            node,
            f"ordering {a.type} with {b.type}",
            f"Python raises TypeError: '{sym}' not supported between instances "
            f"of '{a.type}' and '{b.type}'",
        )
    test = {
        ast.Lt: left < right,
        ast.LtE: left <= right,
        ast.Gt: left > right,
        ast.GtE: left >= right,
    }[type(op)]
    if nan is not None:
        test = test & ~nan
    return Value(test, BOOL, False)


def equals(a: Value, b: Value) -> Column:
    """Python's ``a == b`` of two values, as a Column (never null)."""
    return _equals(a, b)


def _equals(a: Value, b: Value) -> Column:
    """Python's ``a == b``: None equals only None, NaN equals nothing, values of unrelated
    types are unequal."""
    ka, kb = a.type.kind, b.type.kind
    if ka == "none" or kb == "none":
        if ka == kb:
            return F.lit(True)
        other = b if ka == "none" else a
        return other.column.isNull()
    if ka == kb == "tuple":
        return tuples.equals(a, b, _equals)
    if ka == kb == "set" and unify(a.type, b.type) is not None:
        from mapwithstate.pyfunc import sets

        return sets.equals(a, b)
    numeric = {ka, kb} <= {"int", "float", "bool", "num"}
    if not numeric and a.type != b.type and unify(a.type, b.type) is None:
        return (
            F.when(a.column.isNull() & b.column.isNull(), True).otherwise(False)
            if a.nullable and b.nullable
            else F.lit(False)
        )
    if ka == kb == "float":
        test = a.column.eqNullSafe(b.column)
        return test & ~F.coalesce(F.isnan(a.column), F.lit(False))
    if numeric and not (ka in ("int", "bool") and kb in ("int", "bool")):
        # An int and a float (or an int-or-float): equal by exact value, as in Python.
        exact = numeric_order.equal(a, b)
        if not (a.nullable or b.nullable):
            return exact
        either = a.column.isNull() | b.column.isNull()
        return F.when(either, a.column.isNull() & b.column.isNull()).otherwise(exact)
    if numeric:
        return _as_int(a).eqNullSafe(_as_int(b))
    if a.nullable or b.nullable:
        return a.column.eqNullSafe(b.column)
    return a.column == b.column


def _contains(ctx: "Context", node: ast.AST, container: Value, item: Value) -> Column:
    kind = container.type.kind
    if kind == "str":
        container = none_check(ctx, node, container, "argument of type 'NoneType' is not iterable")
        if item.type.kind != "str":
            raise ctx.refuse(
                node,
                f"{item.type} in str",
                "Python raises TypeError: 'in <string>' requires string as left operand",
            )
        item = none_check(
            ctx, node, item, "'in <string>' requires string as left operand, not NoneType"
        )
        return F.coalesce(F.instr(container.column, item.column) > 0, F.lit(False)) | (
            item.column == F.lit("")
        )
    if kind == "list":
        container = none_check(ctx, node, container, "argument of type 'NoneType' is not iterable")
        element = container.type.args[0]
        return F.exists(container.column, lambda e: _equals(Value(e, element, True), item))
    if kind == "set":
        from mapwithstate.pyfunc import sets

        container = none_check(ctx, node, container, "argument of type 'NoneType' is not iterable")
        return sets.contains(ctx, node, container, item)
    if kind == "dict":
        container = none_check(ctx, node, container, "argument of type 'NoneType' is not iterable")
        from mapwithstate.pyfunc.dict_keys import key_column

        key = key_column(container.type.args[0], item)
        return F.coalesce(F.map_contains_key(container.column, key), F.lit(False))
    if kind == "tuple":
        container = none_check(ctx, node, container, "argument of type 'NoneType' is not iterable")
        return tuples.contains(ctx, container, item, _equals)
    raise ctx.refuse(
        node, f"'in' on {container.type}", "'in' works on str, list, tuple, set and dict values"
    )


def unary(ctx: "Context", node: ast.AST, op: ast.unaryop, a: Value) -> Value:
    if isinstance(op, ast.Not):
        return Value(_cond_column(c_not(truthy(a))), BOOL, False)
    name = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}[type(op)]
    a = none_check(ctx, node, a, f"bad operand type for unary {name}: 'NoneType'")
    kind = a.type.kind
    if kind in ("int", "bool"):
        column = _as_int(a)
        if isinstance(op, ast.USub):
            ctx.check(
                node,
                column == F.lit(_MIN_LONG),
                "OverflowError",
                "int result does not fit in 64 bits (BIGINT)",
            )
            return Value(
                F.when(column == F.lit(_MIN_LONG), F.lit(None)).otherwise(-column).cast("bigint"),
                INT,
                False,
            )
        if isinstance(op, ast.UAdd):
            return Value(column, INT, False)
        return Value(F.bitwise_not(column), INT, False)
    if kind in ("float", "timedelta") and not isinstance(op, ast.Invert):
        return Value(-a.column if isinstance(op, ast.USub) else a.column, a.type, False)
    if kind == "num":

        def of_float(f: Value) -> Value:
            if isinstance(op, ast.Invert):
                ctx.check(node, True, "TypeError", "bad operand type for unary ~: 'float'")
                return Value(F.lit(None).cast("bigint"), INT, False)
            return unary(ctx, node, op, f)

        a = ctx.share(a)
        return per_branch(ctx, a, lambda i: unary(ctx, node, op, i), of_float)
    raise ctx.refuse(
        node,
        f"unary {name} on {a.type}",
        f"Python raises TypeError: bad operand type for unary {name}",
    )


def _cond_column(cond: Cond) -> Column:
    return F.lit(cond) if isinstance(cond, bool) else cond


def boolean(
    ctx: "Context", node: ast.AST, op: ast.boolop, values: List[Value], conds: List[Cond]
) -> Value:
    """Folds evaluated operands of ``and``/``or`` (``conds``: each one's truthiness) into the
    operand Python returns: ``a or b`` is ``a`` if ``a`` is true, else ``b``."""
    result = values[-1]
    joined: Optional[PyType] = result.type
    for value in values[:-1]:
        joined = unify(joined, value.type) if joined is not None else None
    if joined is None:
        raise ctx.refuse(
            node,
            f"'{'and' if isinstance(op, ast.And) else 'or'}' of "
            f"{', '.join(str(v.type) for v in values)}",
            "and/or return an operand, which must all have one type; compare "
            "explicitly or convert with bool(...)",
        )
    from mapwithstate.pyfunc.paths import merge_values

    for value, cond in zip(reversed(values[:-1]), reversed(conds[:-1]), strict=False):
        if isinstance(op, ast.Or) and _is_falsy_default(value, result):
            result = Value(_or_default(value, result), value.type, False)
            continue
        if isinstance(op, ast.Or):
            # `a or b` gives `a` only where `a` is true, so never a None there.
            merged = merge_values(
                cond, value.non_null() if value.type.kind != "none" else value, result
            )
        else:
            merged = merge_values(c_not(cond), value, result)
        # Every operand's type unifies with the later ones' (checked above), so they merge.
        assert merged is not None
        result = merged
    return result


def _is_falsy_default(value: Value, default: Value) -> bool:
    """Whether ``value or default`` is ``coalesce``: ``default`` is the one false value of
    ``value``'s type (``x or 0`` for an int, ``s or ""`` for a str), so that where ``value``
    is false but not ``None`` it already equals ``default``. A float's false values are
    ``0.0`` and ``-0.0``, which :func:`_or_default` makes ``0.0``."""
    if value.is_const or not default.is_const or value.type != default.type:
        return False
    kind, const = value.type.kind, default.const
    if kind == "float":
        return const == 0.0 and math.copysign(1.0, const) > 0
    return kind in ("int", "bool", "str", "timedelta") and not const


def _or_default(value: Value, default: Value) -> Column:
    """``value or default`` for a ``default`` that :func:`_is_falsy_default` accepts: one
    ``coalesce``, not a truthiness test. For a float, adding ``0.0`` turns ``-0.0`` into
    ``0.0`` (IEEE 754) and leaves every other value, NaN included, as it is."""
    column = value.column + F.lit(0.0) if value.type.kind == "float" else value.column
    return F.coalesce(column, default.column)
