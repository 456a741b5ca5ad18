"""``collections.Counter``: a dict of counts (a Spark map), with Counter's own semantics.

``Counter()``, ``Counter(iterable)`` (each distinct item with its count, in first-seen order:
a dict's insertion order), ``Counter(mapping)`` (a copy) and ``Counter(None)`` (empty);
``c[x]`` is 0 where ``x`` is missing (no ``KeyError``, nothing inserted); ``c[x] += n`` starts
from 0; ``c.update(iterable or mapping)`` adds the counts, a present key where it is and the
new ones last; ``c.most_common(n)`` is ``sorted(c.items(), key=count, reverse=True)[:n]``
(CPython's ``heapq.nlargest`` promises that order: ties keep insertion order); ``c.total()``
the sum of the counts. The rest (``get``, ``keys``, ``values``, ``items``, ``in``, ``len``,
iteration, ``pop``, ``clear``, storing into a MAP field) is a dict's. Which values are Counters
is known from the source (:mod:`~mapwithstate.pyfunc.collection_variables`).
"""

import ast
from typing import TYPE_CHECKING, Dict, List, Tuple, cast

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import iteration, operators
from mapwithstate.pyfunc.arguments import arity
from mapwithstate.pyfunc.dict_keys import NONE_KEY
from mapwithstate.pyfunc.pytypes import INT, NONE, PyType, dict_of, to_spark, unify
from mapwithstate.pyfunc.synthesized import evaluated
from mapwithstate.pyfunc.values import Value, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["construct", "item", "update", "method", "counted", "empty"]

#: The item types a Counter counts: hashable, and equal in Spark where they are in Python.
_COUNTED = ("int", "str", "bool", "datetime", "date", "timedelta")


def empty() -> Value:
    """An empty dict, typed by its first item as ``{}`` is."""
    return Value(F.create_map(), dict_of(NONE, NONE), False)


def construct(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``Counter()``, ``Counter(iterable)``, ``Counter(mapping)``; ``Counter(None)`` is empty."""
    arity(it, node, args, kwargs, 0, 1, "Counter")
    if not args or args[0].type.kind == "none":
        return empty()
    return counted(it, node, node.args[0], args[0])


def counted(it: "Interpreter", node: ast.AST, source: ast.AST, given: Value) -> Value:
    """The counts of ``given``: a mapping's copy, or an iterable's items counted."""
    if given.type.kind == "dict":
        if given.nullable:
            given = Value(
                F.coalesce(given.column, empty().column.cast(to_spark(given.type))),
                given.type,
                False,
            )
        return given
    # Counter(None) is empty: None is no iterable there.
    items = iteration.iterated(it, source, given.non_null(), "Counter()", order_free=False)
    if given.nullable:
        items = Value(
            F.coalesce(items.column, F.array().cast(to_spark(items.type))), items.type, False
        )
    element = items.type.args[0]
    if element.kind == "none":
        return empty()
    if element.kind not in _COUNTED:
        raise it.ctx.refuse(
            node,
            f"Counter() of {element} items",
            "a Counter counts ints, strs, bools, datetimes, dates or timedeltas (floats: "
            "Python keeps NaNs apart by identity)",
        )
    values = items.column
    it.ctx.check(node, F.exists(values, lambda e: e.isNull()), "NotImplementedError", NONE_KEY)
    keys = F.array_distinct(values)
    counts = F.transform(keys, lambda k: F.size(F.filter(values, lambda e: e == k)).cast("bigint"))
    return Value(F.map_from_arrays(keys, counts), dict_of(element, INT), False)


def item(it: "Interpreter", node: ast.AST, base: Value, key: Value) -> Value:
    """``c[key]``: the count, 0 where ``key`` is missing (a None key is missing)."""
    from mapwithstate.pyfunc.builtins import dict_get

    base = operators.none_check(it.ctx, node, base, "'NoneType' object is not subscriptable")
    if base.type.args[0].kind == "none":
        return literal(0)
    return dict_get(it, cast(ast.Call, node), base, [key, literal(0)], {})


def update(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    """``c.update(iterable or mapping)``: each count added to the key's (0 where missing), a
    present key where it is, the new ones last in their first-seen order."""
    if len(args) > 1 or node.keywords:
        raise it.ctx.refuse(
            node, "Counter.update() with several or keyword arguments", "c.update(iterable)"
        )
    if not args or args[0].type.kind == "none":
        return base, literal(None)
    other = counted(it, node, node.args[0], args[0])
    if base.type.args[0].kind == "none":
        return other, literal(None)
    joined = unify(base.type, other.type)
    if joined is None:
        raise it.ctx.refuse(
            node,
            f"a {other.type} updating a Counter of {base.type}",
            "a Counter's keys and counts are one Column type each; convert them explicitly",
        )
    mine, theirs = _as(base, joined), _as(other, joined)
    value_type = joined.args[1]
    if value_type.kind not in ("int", "float"):
        raise it.ctx.refuse(node, f"Counter.update() of {value_type} counts", "counts are numbers")

    def held(m: Column, k: Column) -> Column:
        return F.coalesce(F.map_contains_key(m, k), F.lit(False))

    def added(k: Column, v: Column) -> Column:
        extra = F.element_at(theirs, k)
        total = F.try_add(v, extra) if value_type.kind == "int" else v + extra
        return F.when(held(theirs, k), total).otherwise(v)

    kept = F.transform_values(mine, added)
    if value_type.kind == "int":
        # Python's counts are unbounded; a BIGINT's end fails the query.
        it.ctx.check(
            node,
            F.exists(F.map_values(kept), lambda v: v.isNull())
            & ~F.exists(F.map_values(mine), lambda v: v.isNull())
            & ~F.exists(F.map_values(theirs), lambda v: v.isNull()),
            "OverflowError",
            "int result does not fit in 64 bits (BIGINT)",
        )
    it.ctx.check(
        node,
        F.exists(F.map_values(mine), lambda v: v.isNull())
        | F.exists(F.map_values(theirs), lambda v: v.isNull()),
        "TypeError",
        "unsupported operand type(s) for +: 'NoneType' and 'int'",
    )
    column = F.map_concat(kept, F.map_filter(theirs, lambda k, v: ~held(mine, k)))
    return Value(column, joined, False), literal(None)


def _as(value: Value, joined: PyType) -> Column:
    return value.column if value.type == joined else value.column.cast(to_spark(joined))


def method(it: "Interpreter", node: ast.Call, base: Value, name: str) -> Value:
    """``c.most_common([n])`` and ``c.total()``, Counter's own reading methods."""
    if name == "total":
        if node.args or node.keywords:
            raise it.ctx.refuse(node, "Counter.total() with arguments", "c.total()")
        return evaluated(it, node, "sum(__mws_counter.values())", {"__mws_counter": base})
    assert name == "most_common"
    if len(node.args) > 1 or node.keywords:
        raise it.ctx.refuse(node, "most_common() with several arguments", "c.most_common(n)")
    ordered = "sorted(__mws_counter.items(), key=lambda __mws_kv: __mws_kv[1], reverse=True)"
    names = {"__mws_counter": base}
    if node.args:
        n = it.value(node.args[0])
        if n.type.kind != "none" and (n.type.kind not in ("int", "bool") or n.nullable):
            raise it.ctx.refuse(
                node,
                f"most_common() of a {n.type}" + (" that may be None" if n.nullable else ""),
                "most_common(n) with n an int",
            )
        if n.type.kind != "none":  # most_common(None) is all of them
            names["__mws_n"] = n
            # heapq.nlargest gives nothing for n <= 0, where a slice [:n] would drop from the end.
            ordered += "[:max(__mws_n, 0)]"
    return evaluated(it, node, ordered, names)
