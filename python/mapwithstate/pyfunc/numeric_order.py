"""Python's comparisons of numbers: an int and a float compare by their exact values.

Spark compares a BIGINT with a DOUBLE after casting the BIGINT to DOUBLE, which rounds an int
beyond 2**53 (``2**53 + 1 > 2.0**53`` is False in Spark, True in Python; ``2**63 - 1 <
9.223372036854776e18`` the other way round). Rounding is monotonic, so where the rounded int
differs from the float their order is the int's; where the two are equal the float is a whole
number of at most 2**63, compared with the int as a BIGINT. NaN is unequal and unordered to
everything, as in Python (Spark orders it above every number).

An int-or-float value (:data:`~mapwithstate.pyfunc.pytypes.NUM`: ``max(1, 2.5)``) is compared
by what it holds on each row.
"""

import ast
from typing import Callable, Dict, List, Optional, Tuple, Type

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc.values import Value

__all__ = ["order", "equal", "not_a_double"]

_ORDERS: Dict[Type[ast.AST], Callable[[Column, Column], Column]] = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
_MIRRORED: Dict[Type[ast.AST], Type[ast.AST]] = {
    ast.Lt: ast.Gt,
    ast.LtE: ast.GtE,
    ast.Gt: ast.Lt,
    ast.GtE: ast.LtE,
}
#: 2**63 as a double: the one whole double at which a rounded BIGINT ends that no BIGINT is.
_TWO_63 = float(1 << 63)
#: Below this magnitude every int is exactly a double.
_EXACT = float(1 << 53)

# One numeric alternative of a value: where it holds (None: wherever the ones before do not),
# its Column, whether it is an int (else a float), and its value when known at compile time.
_Part = Tuple[Optional[Column], Column, bool, object]


def _parts(value: Value) -> List[_Part]:
    const = value.const if value.is_const else None
    kind = value.type.kind
    if kind == "bool":
        return [(None, value.column.cast("bigint"), True, const)]
    if kind == "int":
        return [(None, value.column, True, const)]
    if kind == "float":
        return [(None, value.column, False, const)]
    assert kind == "num", value.type
    held = value.column.getField("i")
    return [(held.isNotNull(), held, True, None), (None, value.column.getField("f"), False, None)]


def _exact_as_double(part: _Part) -> bool:
    """Whether Spark's comparison as doubles is Python's for this side of an int and a float:
    an int known to be a double exactly, or a float known not to be a whole number that a
    rounded int could equal."""
    _, _, is_int, const = part
    if const is None or isinstance(const, bool):
        return const is not None
    if is_int:
        return abs(const) <= _EXACT  # type: ignore[arg-type]
    value = float(const)  # type: ignore[arg-type]
    return value != value or not value.is_integer() or abs(value) < _EXACT


def _int_float(op: Type[ast.AST], i: Column, f: Column, exact: bool) -> Column:
    """``i <op> f`` for a BIGINT ``i`` and a DOUBLE ``f``, neither null, NaN false."""
    rounded = i.cast("double")
    as_doubles = _ORDERS[op](rounded, f) & ~F.isnan(f)
    if exact:
        return as_doubles
    # Equal as doubles: f is whole and at most 2**63 (which every BIGINT is below).
    return (
        F.when(rounded != f, as_doubles)
        .when(f >= F.lit(_TWO_63), F.lit(op in (ast.Lt, ast.LtE)))
        .otherwise(_ORDERS[op](i, f.cast("bigint")))
    )


def _pair_order(op: Type[ast.AST], a: _Part, b: _Part) -> Column:
    exact = _exact_as_double(a) or _exact_as_double(b)
    if a[2] and b[2]:
        return _ORDERS[op](a[1], b[1])
    if not a[2] and not b[2]:
        return _ORDERS[op](a[1], b[1]) & ~(F.isnan(a[1]) | F.isnan(b[1]))
    if a[2]:
        return _int_float(op, a[1], b[1], exact)
    return _int_float(_MIRRORED[op], b[1], a[1], exact)


def _pair_equal(a: _Part, b: _Part) -> Column:
    if a[2] == b[2]:
        # NaN == NaN is true in Spark, false in Python.
        same = a[1] == b[1]
        return same if a[2] else same & ~F.isnan(a[1])
    i, f = (a[1], b[1]) if a[2] else (b[1], a[1])
    rounded = i.cast("double")
    if _exact_as_double(a) or _exact_as_double(b):
        return rounded == f
    return F.when((rounded == f) & (f < F.lit(_TWO_63)), i == f.cast("bigint")).otherwise(
        F.lit(False)
    )


def _by_parts(a: Value, b: Value, pair: Callable[[_Part, _Part], Column]) -> Column:
    """``pair`` of the alternatives ``a`` and ``b`` hold on each row, as one Column."""
    result: Optional[Column] = None
    cases = [(pa, pb) for pa in _parts(a) for pb in _parts(b)]
    for index, (pa, pb) in enumerate(cases):
        test = pair(pa, pb)
        if index == len(cases) - 1:
            return test if result is None else result.otherwise(test)
        # Only a NUM's int alternative has a guard, and it comes first: every pair but the
        # last (float with float) has one, and each holds where the pairs before do not.
        guards = [g for g in (pa[0], pb[0]) if g is not None]
        guard = guards[0] if len(guards) == 1 else guards[0] & guards[1]
        result = F.when(guard, test) if result is None else result.when(guard, test)
    raise AssertionError("no alternatives")  # pragma: no cover


def order(op: ast.AST, a: Value, b: Value) -> Column:
    """``a <op> b`` (``< <= > >=``) of two numbers (int, bool, float or int-or-float), neither
    None."""
    return _by_parts(a, b, lambda pa, pb: _pair_order(type(op), pa, pb))


def equal(a: Value, b: Value) -> Column:
    """``a == b`` of two numbers, neither None."""
    return _by_parts(a, b, _pair_equal)


def not_a_double(i: Column) -> Column:
    """Whether the BIGINT ``i`` is not exactly a double (beyond 2**53, and not rounded back to
    itself): a DOUBLE column would hold another number than Python's int. False for null."""
    rounded = i.cast("double")
    beyond = (i > F.lit(1 << 53)) | (i < F.lit(-(1 << 53)))
    rounded_away = F.when(rounded >= F.lit(_TWO_63), F.lit(True)).otherwise(
        rounded.cast("bigint") != i
    )
    return F.when(beyond, rounded_away).otherwise(F.lit(False))
