"""Unpacking a list into names: ``a, b = xs``, ``first, *rest = xs``, ``for a, b in pairs``.

A list's length is known only when the query runs, so the count of targets is checked there,
with CPython 3.11's ``ValueError`` texts (``too many values to unpack (expected 2)``, ``not
enough values to unpack (expected 2, got 1)``, ``... (expected at least 1, got 0)`` with a
starred target) and ``TypeError`` for a None list. The starred target takes the middle of the
list as a list, as Python's.
"""

import ast
from typing import TYPE_CHECKING, List, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context, Interpreter

__all__ = ["list_parts", "unpack_failures"]


def _star(names: Sequence[ast.expr]) -> int:
    """The index of the starred target, or -1."""
    return next((i for i, n in enumerate(names) if isinstance(n, ast.Starred)), -1)


def unpack_failures(
    ctx: "Context", target: ast.expr, names: Sequence[ast.expr], items: Column, nullable: bool
) -> None:
    """The query fails as Python does where ``items`` (a list Column) cannot be unpacked into
    ``names``."""
    if nullable:
        ctx.check(target, items.isNull(), "TypeError", "cannot unpack non-iterable NoneType object")
    for message in unpack_messages(names, items):
        ctx.check(target, message[0], "ValueError", message[1])


def unpack_messages(names: Sequence[ast.expr], items: Column) -> List["tuple[Column, Column]"]:
    """Each condition on ``items`` (not None) under which unpacking fails, with its message."""
    count = len(names)
    size = F.size(items)
    got = size.cast("string")
    if _star(names) < 0:
        return [
            (size > F.lit(count), F.lit(f"too many values to unpack (expected {count})")),
            (
                size < F.lit(count),
                F.concat(
                    F.lit(f"not enough values to unpack (expected {count}, got "), got, F.lit(")")
                ),
            ),
        ]
    least = count - 1
    return [
        (
            size < F.lit(least),
            F.concat(
                F.lit(f"not enough values to unpack (expected at least {least}, got "),
                got,
                F.lit(")"),
            ),
        )
    ]


def list_parts(
    it: "Interpreter", target: ast.expr, names: Sequence[ast.expr], value: Value, check: bool
) -> List[Value]:
    """The values ``names`` take from the list ``value``, in order (the starred one a list);
    with ``check``, the query fails where Python's unpacking raises (a caller that cannot
    check there checks beforehand, :func:`unpack_failures`)."""
    items = value.column
    if check:
        unpack_failures(it.ctx, target, names, items, value.nullable)
    element = value.type.args[0]
    star = _star(names)
    if star < 0:
        return [
            Value(F.try_element_at(items, F.lit(i + 1)), element, True) for i in range(len(names))
        ]
    after = len(names) - star - 1
    parts = [Value(F.try_element_at(items, F.lit(i + 1)), element, True) for i in range(star)]
    middle = F.slice(
        items, F.lit(star + 1), F.greatest(F.size(items) - F.lit(len(names) - 1), F.lit(0))
    )
    parts.append(Value(F.coalesce(middle, F.array().cast(items_type(value))), value.type, False))
    parts += [
        Value(F.try_element_at(items, F.lit(-(after - j))), element, True) for j in range(after)
    ]
    return parts


def items_type(value: Value) -> str:
    """The Spark type of the list ``value``, as SQL text."""
    from mapwithstate.pyfunc.pytypes import to_spark

    return to_spark(value.type).simpleString()
