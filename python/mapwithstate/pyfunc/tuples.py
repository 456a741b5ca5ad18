"""Tuples: fixed-arity values of possibly different element types, with Python's semantics.

A tuple compiles to a Spark struct whose fields ``_1``, ``_2``, ... are its elements by
position (its arity is part of its type, :func:`~mapwithstate.pyfunc.pytypes.tuple_of`). A
tuple display ``(a, b)`` keeps its elements' own values (``Value.parts``) so that ``a, b = b,
a`` or ``t[0]`` of a display reads them as they were, constants and nullability included.

What Python does, this module does: ``t[i]`` for an int literal ``i`` (negative counting from
the end; out of range the query fails with ``IndexError`` where it runs), a slice with literal
bounds, ``len``, truthiness (a non-empty tuple is true), ``==`` element by element (tuples of
other arities are unequal), ``<`` and friends lexicographically (the first unequal elements
decide, the shorter tuple is smaller where one is a prefix of the other, ``TypeError`` where
the deciding elements do not compare), ``in``, iteration over a tuple of one element type, and
unpacking into names (``k, v = pair``; nested targets too) with the arity checked at compile
time. A tuple is never stored in the state nor emitted (see
:func:`~mapwithstate.pyfunc.interpreter.store`).
"""

import ast
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Sequence, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc.pytypes import (
    NONE,
    PyType,
    list_of,
    to_spark,
    tuple_field,
    tuple_of,
    unified,
)
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_not, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context, Interpreter

__all__ = [
    "make",
    "element",
    "elements",
    "subscript",
    "equals",
    "order",
    "contains",
    "as_list",
    "bind",
    "unpack",
    "undecided_by_none",
]


def make(parts: Sequence[Value], names: Tuple[str, ...] = ()) -> Value:
    """The tuple of ``parts``, in order; ``names``: a named tuple's field names."""
    columns = [p.column.alias(tuple_field(i)) for i, p in enumerate(parts)]
    column = F.struct(*columns) if columns else F.struct()
    kind = tuple_of(tuple(p.type for p in parts), names)
    return Value(column, kind, False, parts=tuple(parts))


def element(value: Value, index: int) -> Value:
    """Element ``index`` (0-based, in range) of a tuple known not to be ``None``."""
    if value.parts is not None:
        return value.parts[index]
    return Value(value.column.getField(tuple_field(index)), value.type.args[index], True)


def elements(value: Value) -> List[Value]:
    return [element(value, i) for i in range(len(value.type.args))]


def subscript(it: "Interpreter", node: ast.Subscript, base: Value) -> Value:
    """``t[i]`` or ``t[a:b:c]`` of a tuple known not to be ``None``: the index and bounds must
    be int literals (an element's type depends on its position), unless the elements share
    one type."""
    arity = len(base.type.args)
    if isinstance(node.slice, ast.Slice):
        bounds = [
            None if b is None else it.value(b) for b in (node.slice.lower, node.slice.upper)
        ] + [None if node.slice.step is None else it.value(node.slice.step)]
        if not all(
            b is None or (b.is_const and isinstance(b.const, (int, type(None)))) for b in bounds
        ):
            raise it.ctx.refuse(
                node.slice,
                "a slice of a tuple with bounds that are not int literals",
                "write the bounds as literals (t[1:], t[:-1]); a tuple's elements have "
                "their own types",
            )
        lower, upper, step = (None if b is None else b.const for b in bounds)
        if step == 0:
            it.ctx.check(node, True, "ValueError", "slice step cannot be zero")
            return literal(None)
        picked = range(arity)[slice(lower, upper, step)]
        return make([element(base, i) for i in picked])
    index = it.value(node.slice)
    if index.is_const and isinstance(index.const, int):
        position = index.const + arity if index.const < 0 else index.const
        if not 0 <= position < arity:
            it.ctx.check(node, True, "IndexError", "tuple index out of range")
            return literal(None)
        return element(base, position)
    if index.type.kind not in ("int", "bool"):
        raise it.ctx.refuse(node, f"index of type {index.type}", "indices are ints")
    listed = as_list(it.ctx, node, base, "an index that is not an int literal into")
    from mapwithstate.pyfunc import operators

    index = operators.none_check(
        it.ctx, node, index, "tuple indices must be integers or slices, not NoneType"
    )
    size = F.lit(arity).cast("bigint")
    where = F.when(index.column < 0, index.column + size).otherwise(index.column)
    inside = (where >= 0) & (where < size)
    it.ctx.check(node, ~inside, "IndexError", "tuple index out of range")
    safe = F.when(inside, where + 1).otherwise(F.lit(1)).cast("int")
    return Value(F.when(inside, F.element_at(listed.column, safe)), listed.type.args[0], True)


def _null_safe(a: Value, b: Value, test: Column) -> Column:
    """``test`` of two values that may each be ``None``: ``None == None`` only."""
    if not (a.nullable or b.nullable):
        return test
    either = a.column.isNull() | b.column.isNull()
    return F.when(either, a.column.isNull() & b.column.isNull()).otherwise(test)


def equals(a: Value, b: Value, equal: Callable[[Value, Value], Column]) -> Column:
    """Python's ``a == b`` of two tuples (``equal``: ``==`` of two elements): equal arities
    and every element equal."""
    if len(a.type.args) != len(b.type.args):
        return _null_safe(a, b, F.lit(False))
    test: Column = F.lit(True)
    for x, y in zip(elements(a.non_null()), elements(b.non_null()), strict=True):
        test = test & equal(x, y)
    return _null_safe(a, b, test)


def order(
    ctx: "Context",
    node: ast.AST,
    op: ast.AST,
    a: Value,
    b: Value,
    compare: Callable[[ast.AST, Value, Value], Value],
    equal: Callable[[Value, Value], Column],
) -> Column:
    """``a <op> b`` of two tuples not ``None``, as Python compares them: the first position
    whose elements are unequal decides, by ``compare`` of those elements (its failures under
    the guard that they are reached); where none is, the lengths."""
    n, m = len(a.type.args), len(b.type.args)
    by_lengths: Dict[type, bool] = {ast.Lt: n < m, ast.LtE: n <= m, ast.Gt: n > m}
    by_length = by_lengths.get(type(op), n >= m)
    outer = ctx.guard
    same: Cond = True
    decided: List[Any] = []
    try:
        for x, y in zip(elements(a), elements(b), strict=False):
            unequal = ~equal(x, y)
            ctx.guard = c_and(outer, c_and(same, unequal))
            decided.append((unequal, compare(op, x, y).column))
            same = c_and(same, c_not(unequal))
    finally:
        ctx.guard = outer
    result: Column = F.lit(by_length)
    for unequal, test in reversed(decided):
        result = F.when(unequal, test).otherwise(result)
    return result


def undecided_by_none(a: Column, b: Column, key: PyType) -> Column:
    """Whether comparing the tuples ``a`` and ``b`` (of type ``key``, neither null) reaches
    a position where one element is ``None`` and the other is not: Python raises
    ``TypeError`` there."""
    result: Column = F.lit(False)
    same: Column = F.lit(True)
    for i in range(len(key.args)):
        x, y = a.getField(tuple_field(i)), b.getField(tuple_field(i))
        result = result | (same & (x.isNull() != y.isNull()))
        same = same & x.eqNullSafe(y)
    return result


def contains(
    ctx: "Context", container: Value, item: Value, equal: Callable[[Value, Value], Column]
) -> Column:
    """``item in container`` of a tuple not ``None``: equal to one of its elements."""
    test: Column = F.lit(False)
    for x in elements(container):
        test = test | equal(x, item)
    return test


def as_list(ctx: "Context", node: ast.AST, value: Value, use: str) -> Value:
    """A tuple not ``None`` as the list of its elements (for iteration), where they share one
    type; refused otherwise (``use``: what needs the list, e.g. ``a for loop over``)."""
    from mapwithstate.pyfunc.paths import converted

    element_type = unified(
        value.type.args,
        lambda _joined, _t: ctx.refuse(
            node,
            f"{use} a tuple of {', '.join(map(str, value.type.args))}",
            "a list is one Column type: index the tuple's elements by literals instead "
            "(t[0], t[1])",
        ),
    )
    parts = elements(value)
    if not parts:
        return Value(F.array(), list_of(NONE), False)
    columns = [converted(p, element_type) for p in parts]
    if element_type.kind != "none":
        columns = [c.cast(to_spark(element_type)) for c in columns]
    return Value(F.array(*columns), list_of(element_type), False)


def _arity_error(target: ast.expr, names: Sequence[ast.expr], arity: int) -> str:
    if arity > len(names):
        return f"too many values to unpack (expected {len(names)})"
    return f"not enough values to unpack (expected {len(names)}, got {arity})"


def bind(
    it: "Interpreter", target: ast.expr, element_type: PyType, value: Value, check: bool = True
) -> Dict[str, Value]:
    """The names ``target`` (a name, or a tuple or list of targets) takes from ``value``, an
    element of type ``element_type``: a tuple's elements (or a row's fields) in order, their
    count checked here, as Python's ``ValueError`` would be certain. With ``check``, the
    query fails with ``TypeError`` where the tuple is None (a caller that cannot check there
    checks beforehand)."""
    if isinstance(target, ast.Name):
        return {target.id: value}
    names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else None
    starred = [n for n in names or [] if isinstance(n, ast.Starred)]
    if names is not None and len(starred) == 1 and element_type.kind != "list":
        raise it.ctx.refuse(
            target,
            f"a starred target unpacking a {element_type}",
            "a starred target unpacks a list (first, *rest = xs); index a tuple instead",
        )
    if names is None or len(starred) > 1:
        raise it.ctx.refuse(
            target,
            f"the target {ast.unparse(target)!r}",
            "unpack into names: for k, v in d.items(), a, b = pair",
        )
    if element_type.kind == "row":
        # A record's columns, by position (a loop over records of several columns).
        fields = list(element_type.args)
        if len(fields) != len(names):
            raise it.ctx.refuse(
                target,
                f"unpacking a row of {len(fields)} fields into {len(names)} targets",
                "give as many targets as the row has fields",
            )
        parts = [Value(value.column.getField(n), t, True) for n, t in fields]
    elif element_type.kind == "tuple":
        if len(element_type.args) != len(names):
            raise it.ctx.refuse(
                target,
                f"unpacking a tuple of {len(element_type.args)} into {len(names)} targets",
                f"Python raises ValueError: {_arity_error(target, names, len(element_type.args))}",
            )
        parts = elements(Value(value.column, element_type, False, parts=value.parts))
    elif element_type.kind == "list":
        from mapwithstate.pyfunc.list_unpacking import list_parts

        parts = list_parts(it, target, names, value, check)
        names = [n.value if isinstance(n, ast.Starred) else n for n in names]
    else:
        raise it.ctx.refuse(
            target,
            f"unpacking a {element_type} into {', '.join(map(ast.unparse, names))!r}",
            "unpack a tuple or a list (a, b = pair; first, *rest = xs)",
        )
    if check and value.nullable and element_type.kind == "tuple":
        it.ctx.check(
            target,
            value.column.isNull(),
            "TypeError",
            "cannot unpack non-iterable NoneType object",
        )
    bound: Dict[str, Value] = {}
    for name, part in zip(names, parts, strict=True):
        part_type = part.type
        bound.update(bind(it, name, part_type, part, check))
    return bound


def unpack(it: "Interpreter", target: ast.expr, value: Any) -> Dict[str, Value]:
    """``a, b = value`` (``value`` computed first, as Python does): the names and values."""
    if not isinstance(value, Value):
        raise it.ctx.refuse(
            target, f"unpacking a {type(value).__name__}", "unpack a tuple: a, b = b, a"
        )
    if value.parts is None:
        value = it.ctx.share(value)
    return bind(it, target, value.type, value)
