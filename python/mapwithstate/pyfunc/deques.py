"""``collections.deque``: a list (a Spark array) and its ``maxlen``, a constant or an
expression of parameters (``maxlen=n``: None is no limit, a negative one fails with Python's
``ValueError: maxlen must be non-negative``).

``deque()``, ``deque(iterable)``, ``deque(iterable, maxlen)`` keep the last ``maxlen`` items;
``append``/``extend`` drop from the left past ``maxlen``, ``appendleft``/``extendleft`` from
the right, as Python's do; ``pop``/``popleft`` fail with ``IndexError: pop from an empty
deque``; ``clear``, ``remove``, ``reverse``, ``count``, ``index``, ``d[i]``, ``d[i] = v``,
``len``, ``in``, iteration, truthiness and the builtins over it (``list(d)``, ``sum``,
``min``, ``max``, ``sorted``) are a list's. Where a deque is not a list in Python (slicing,
``d + [x]``, ``==`` with a list, storing or emitting it: ``mapwithstate.testing`` stores a
list, and refuses a deque) it is refused when compiling, naming ``list(d)``. Which values are
deques, and their ``maxlen``, is known from the source
(:mod:`~mapwithstate.pyfunc.collection_variables`).
"""

import ast
from typing import TYPE_CHECKING, Dict, List, Tuple, Union

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import iteration, operators
from mapwithstate.pyfunc.arguments import arity
from mapwithstate.pyfunc.collection_variables import Kind
from mapwithstate.pyfunc.paths import converted
from mapwithstate.pyfunc.pytypes import NONE, list_of, to_spark
from mapwithstate.pyfunc.values import Value, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["construct", "changed"]

_EMPTY = "pop from an empty deque"


#: A deque's ``maxlen`` where it is used: None (no limit), a constant, or a BIGINT Column
#: (null: no limit).
Limit = Union[None, int, Column]


def limit(it: "Interpreter", node: ast.AST, kind: Kind) -> Limit:
    """``kind``'s ``maxlen``: a run-time one evaluated here (it has one value throughout a
    call), refused unless an int or None."""
    if kind.maxlen_expr is None:
        assert not isinstance(kind.maxlen, str)
        return kind.maxlen
    value = it.value(kind.maxlen_expr)
    if value.type.kind == "none":
        return None
    if value.type.kind not in ("int", "bool"):
        raise it.ctx.refuse(
            node,
            f"deque() with a maxlen of type {value.type}",
            "Python raises TypeError: an integer is required",
        )
    return value.column.cast("bigint")


def kept_last(column: Column, maxlen: Limit) -> Column:
    """The last ``maxlen`` items (all for None)."""
    if maxlen is None:
        return column
    if isinstance(maxlen, Column):
        size = F.size(column)
        kept = F.slice(column, (size - maxlen + 1).cast("int"), maxlen.cast("int"))
        return F.when(maxlen.isNull() | (size <= maxlen), column).otherwise(kept)
    if maxlen == 0:
        return F.filter(column, lambda e: F.lit(False))
    size = F.size(column)
    return F.when(size > maxlen, F.slice(column, size - F.lit(maxlen - 1), maxlen)).otherwise(
        column
    )


def kept_first(column: Column, maxlen: Limit) -> Column:
    """The first ``maxlen`` items (all for None)."""
    if maxlen is None:
        return column
    if isinstance(maxlen, Column):
        kept = F.slice(column, 1, maxlen.cast("int"))
        return F.when(maxlen.isNull() | (F.size(column) <= maxlen), column).otherwise(kept)
    if maxlen == 0:
        return F.filter(column, lambda e: F.lit(False))
    return F.when(F.size(column) > maxlen, F.slice(column, 1, maxlen)).otherwise(column)


def construct(
    it: "Interpreter", node: ast.Call, kind: Kind, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``deque()``, ``deque(iterable[, maxlen])``: the iterable's last ``maxlen`` items."""
    arity(it, node, args, kwargs, 0, 2, "deque", ("iterable", "maxlen"))
    given = args[0] if args else kwargs.get("iterable")
    if given is None:
        maxlen = limit(it, node, kind)
        if isinstance(maxlen, Column):
            it.ctx.check(node, maxlen < F.lit(0), "ValueError", "maxlen must be non-negative")
        return Value(F.array(), list_of(NONE), False)
    source = (
        node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "iterable")
    )
    items = iteration.iterated(it, source, given, "deque()")
    maxlen = limit(it, node, kind)
    if isinstance(maxlen, Column):
        it.ctx.check(node, maxlen < F.lit(0), "ValueError", "maxlen must be non-negative")
    return Value(kept_last(items.column, maxlen), items.type, False)


def changed(
    it: "Interpreter", node: ast.Call, kind: Kind, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    """The deque ``base`` after ``node``'s changing method, and what the method returns."""
    from mapwithstate.pyfunc import in_place

    assert isinstance(node.func, ast.Attribute)
    method = node.func.attr
    if method in ("append", "extend"):
        new, result = in_place.LIST_CHANGES[method](it, node, base, args)
        return Value(kept_last(new.column, limit(it, node, kind)), new.type, False), result
    if method in ("appendleft", "extendleft"):
        in_place.check_arity(it, node, args, 1, 1, method)
        if method == "appendleft":
            typed, item = in_place.joined_item(it, node, base, args[0])
            column = F.concat(F.array(item), typed.column)
        else:
            # Each item goes first in turn: the iterable's items reversed, then the deque's.
            typed = in_place.extended(it, node, base, args[0])
            other = operators.none_check(it.ctx, node, args[0], "'NoneType' object is not iterable")
            column = F.concat(F.reverse(converted(other, typed.type)), converted(base, typed.type))
        return Value(kept_first(column, limit(it, node, kind)), typed.type, False), literal(None)
    if method in ("pop", "popleft"):
        in_place.check_arity(it, node, args, 0, 0, method)
        it.ctx.check(node, F.size(base.column) == 0, "IndexError", _EMPTY)
        size = F.size(base.column)
        if method == "pop":
            item = F.when(size > 0, F.element_at(base.column, -1))
            rest = F.slice(base.column, 1, F.greatest(size - 1, F.lit(0)))
        else:
            item = F.when(size > 0, F.element_at(base.column, 1))
            rest = F.slice(base.column, 2, F.greatest(size - 1, F.lit(0)))
        rest = F.when(size > 1, rest).otherwise(F.array().cast(to_spark(base.type)))
        return Value(rest, base.type, False), Value(item, base.type.args[0], True)
    return in_place.LIST_CHANGES[method](it, node, base, args)
