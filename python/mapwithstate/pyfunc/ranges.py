"""``range(...)``: Python's range of ints, as a loop's iterable, a value, ``len`` and ``in``.

As a value (a ``for`` loop's iterable, a comprehension's, ``list(range(n))``, ``sum``,
``sorted``, ``zip``, indexing...) a range is its ints as a list, made when the query runs
(Spark's ``sequence``): a range longer than an array holds fails the query. ``len(range(...))``
and ``x in range(...)`` are Python's arithmetic on the bounds instead and make no list, so a
huge range costs nothing there. The step may be computed: a zero step fails the query with
Python's ``ValueError``.
"""

import ast
import builtins as py
from typing import TYPE_CHECKING, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mapwithstate.pyfunc.arguments import int_argument
from mapwithstate.pyfunc.pytypes import BOOL, INT, list_of
from mapwithstate.pyfunc.values import Value, let

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["is_range", "range_list", "range_length", "range_contains"]

#: Wide enough for any difference of two 64-bit ints (len and in compute without overflow).
_WIDE = "decimal(21,0)"
_MAX_LONG = (1 << 63) - 1


def is_range(it: "Interpreter", node: ast.expr) -> bool:
    """Whether ``node`` is a call of the builtin ``range``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    if node.func.id in it.path.env:
        return False
    return it.ctx.source.lookup(node.func.id) is py.range


def _bounds(it: "Interpreter", call: ast.Call) -> Tuple[Column, Column, Column]:
    """``start, stop, step`` of ``call`` as BIGINT Columns, each checked as Python checks
    them: an int (a float is refused: Python raises TypeError), not None, a nonzero step."""
    if call.keywords or not 1 <= len(call.args) <= 3:
        raise it.ctx.refuse(
            call,
            "range() with these arguments",
            "range(stop), range(start, stop) or range(start, stop, step), positionally",
        )
    values = [it.value(arg) for arg in call.args]
    columns = [
        int_argument(it, a, v, "range() argument") for a, v in zip(call.args, values, strict=True)
    ]
    if len(columns) == 1:
        return F.lit(0).cast("bigint"), columns[0], F.lit(1).cast("bigint")
    if len(columns) == 2:
        return columns[0], columns[1], F.lit(1).cast("bigint")
    step = values[2]
    if step.is_const and not step.const:
        raise it.ctx.refuse(
            call.args[2],
            "range() with a zero step",
            "Python raises ValueError: range() arg 3 must not be zero",
        )
    if not step.is_const:
        it.ctx.check(call.args[2], columns[2] == 0, "ValueError", "range() arg 3 must not be zero")
    return columns[0], columns[1], columns[2]


#: The builtins that take a range as the iterable it is (its ints), as they take a list.
_CONSUMERS = frozenset(
    {
        "list",
        "tuple",
        "set",
        "frozenset",
        "sorted",
        "reversed",
        "enumerate",
        "zip",
        "sum",
        "min",
        "max",
        "any",
        "all",
    }
)


def _consumed(it: "Interpreter", call: ast.Call) -> bool:
    """Whether ``call`` stands where Python iterates it or indexes it, so that its ints as a
    list do exactly what the range does: a loop's or a comprehension's iterable, an argument
    of :data:`_CONSUMERS`, ``range(...)[i]``. Elsewhere a range is no list (``range(3) ==
    [0, 1, 2]`` is False, ``range(3) + [3]`` raises, ``str`` differs)."""
    parent = it.ctx.source.parents.get(id(call))
    if isinstance(parent, (ast.For, ast.comprehension)):
        return parent.iter is call
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name):
        return parent.func.id in _CONSUMERS and any(a is call for a in parent.args)
    if isinstance(parent, ast.Subscript):
        return parent.value is call and not isinstance(parent.slice, ast.Slice)
    return False


def range_list(it: "Interpreter", call: ast.Call) -> Value:
    """The ints of ``range(...)`` as a list, in order (empty where Python's range is), where
    it is iterated or indexed; elsewhere refused."""
    if not _consumed(it, call):
        raise it.ctx.refuse(
            call,
            "range() used as a value",
            "a range is not a list (range(3) == [0, 1, 2] is False, range(3) + [3] raises): "
            "iterate it, index it, take len(...) or in, or make the list: list(range(...))",
        )
    empty = F.array().cast(T.ArrayType(T.LongType()))

    def ints(start: Column, stop: Column, step: Column) -> Column:
        return (
            F.when((step > 0) & (stop > start), F.sequence(start, stop - 1, step))
            .when((step < 0) & (stop < start), F.sequence(start, stop + 1, step))
            .otherwise(empty)
        )

    # Each bound in the plan once (a computed bound is read four times).
    return Value(let(list(_bounds(it, call)), ints), list_of(INT), False)


def range_length(it: "Interpreter", call: ast.Call) -> Value:
    """``len(range(...))`` from the bounds (no list made). Past 64 bits Python raises
    OverflowError, as the query does."""
    one = F.lit(1).cast(_WIDE)
    zero = F.lit(0).cast(_WIDE)

    def count(span: Column, stride: Column) -> Column:
        # ceil(span / stride) for span, stride > 0, by an exact division (Spark rounds a
        # decimal quotient to its scale, which a floor of it would take for the next int).
        rest = span - one
        return (rest - F.pmod(rest, stride)) / stride + one

    def length(start: Column, stop: Column, step: Column) -> Column:
        start, stop, step = start.cast(_WIDE), stop.cast(_WIDE), step.cast(_WIDE)
        # A zero step counts nothing (the query fails with ValueError there).
        return (
            F.when((step > 0) & (stop > start), count(stop - start, step))
            .when((step < 0) & (stop < start), count(start - stop, -step))
            .otherwise(zero)
        )

    counted = let(list(_bounds(it, call)), length)
    it.ctx.check(
        call,
        counted > F.lit(_MAX_LONG).cast(_WIDE),
        "OverflowError",
        "Python int too large to convert to C ssize_t",
    )
    fits = F.when(counted <= F.lit(_MAX_LONG).cast(_WIDE), counted)
    return Value(fits.cast("bigint"), INT, False)


def range_contains(it: "Interpreter", node: ast.AST, item: Value, call: ast.Call) -> Value:
    """``item in range(...)``: Python's test on the bounds (an int inside them, on a step),
    no list made. None is in no range (Python compares it with each int)."""
    if item.type.kind not in ("int", "bool", "none"):
        raise it.ctx.refuse(
            node,
            f"{item.type} in range(...)",
            "test an int (convert it with int(...)); Python compares other values with each int",
        )
    bounds = list(_bounds(it, call))
    if item.type.kind == "none":
        return Value(F.lit(False), BOOL, False)
    zero = F.lit(0).cast(_WIDE)

    def inside(x: Column, start: Column, stop: Column, step: Column) -> Column:
        x, start, stop, step = (c.cast(_WIDE) for c in (x, start, stop, step))
        up = (start <= x) & (x < stop) & (F.pmod(x - start, step) == zero)
        down = (stop < x) & (x <= start) & (F.pmod(start - x, -step) == zero)
        return F.coalesce(
            F.when(step > 0, up).when(step < 0, down).otherwise(F.lit(False)), F.lit(False)
        )

    return Value(let([item.column.cast("bigint"), *bounds], inside), BOOL, False)
