"""What a loop, a comprehension or an iterable's builtin iterates, as the list Python would
walk: a list itself, a dict's keys (in its insertion order: a Spark map keeps its entries'
order, and item assignment appends a new key last), a tuple's elements (of one type); and the
builtins and dict views that pair things up, compiled to lists of tuples: ``d.items()``,
``d.keys()``, ``d.values()``, ``zip(a, b, ...)`` (the shortest wins), ``enumerate(xs[,
start])``, ``reversed(xs)``. A str iterates as its characters (one per code point). Also dicts
built from pairs: ``dict(pairs)`` and ``{k: v for ...}``, where a later duplicate key
overwrites the value in place, keeping the key's first position, as Python's dict does.

A view is a list once compiled: ``d.keys()`` iterates, measures and tests membership as
Python's view does; it is not a live view of later changes (a change makes a new map).
"""

import ast
from typing import TYPE_CHECKING, Dict, List, Union

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators, tuples
from mapwithstate.pyfunc.arguments import arity
from mapwithstate.pyfunc.dict_keys import NONE_KEY
from mapwithstate.pyfunc.pytypes import (
    INT,
    STR,
    PyType,
    dict_of,
    list_of,
    to_spark,
    tuple_field,
    tuple_of,
)
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = [
    "iterated",
    "characters",
    "zip_call",
    "enumerate_call",
    "reversed_call",
    "dict_call",
    "dict_comprehension",
    "dict_of_pairs",
    "DICT_VIEWS",
]

_NOT_ITERABLE = "'NoneType' object is not iterable"


def iterated(
    it: "Interpreter", node: ast.AST, value: Value, use: str, order_free: bool = False
) -> Value:
    """The list ``value`` iterates as, in Python's order (``use``: what iterates it, for
    errors); the query fails with ``TypeError`` where ``value`` is ``None``. A set iterates
    only where its order cannot show (``order_free``: ``sum``, ``len``, ``sorted``, a set
    comprehension...), as its elements in any order; elsewhere it is refused."""
    kind = value.type.kind
    if kind == "set":
        from mapwithstate.pyfunc.sets import refused_for_order

        if not order_free:
            raise refused_for_order(it.ctx, node, f"{use} over a set")
        value = operators.none_check(it.ctx, node, value, _NOT_ITERABLE)
        return Value(value.column, list_of(value.type.args[0]), False)
    if kind not in ("list", "dict", "tuple", "str", "none"):
        raise it.ctx.refuse(
            node,
            f"{use} over a {value.type}",
            "iterate a list, a dict (its keys), d.items(), d.values(), zip(...), "
            "enumerate(...), reversed(...), a tuple or a str",
        )
    value = operators.none_check(it.ctx, node, value, _NOT_ITERABLE)
    if kind == "none":
        raise it.ctx.refuse(node, f"{use} over None", f"Python raises TypeError: {_NOT_ITERABLE}")
    if kind == "dict":
        return Value(F.map_keys(value.column), list_of(value.type.args[0]), False)
    if kind == "tuple":
        return tuples.as_list(it.ctx, node, value, f"{use} over")
    if kind == "str":
        return characters(value.column)
    return value


def characters(text: Column) -> Value:
    """The list of a str's characters, one string per code point as Python's iteration gives
    them (a character beyond the BMP is one, not two UTF-16 units): Java's ``.`` matches a
    code point, and ``(?s)`` makes it match line breaks too."""
    return Value(F.regexp_extract_all(text, F.lit("(?s)."), 0), list_of(STR), False)


def _pairs(column: Column, elements: List[PyType]) -> Value:
    """A list of structs of ``len(elements)`` fields as the list of tuples they are, by
    position (a cast renames a struct's fields)."""
    pair_list = list_of(tuple_of(tuple(elements)))
    return Value(column.cast(to_spark(pair_list)), pair_list, False)


def _items(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 0, 0, "items")
    return _pairs(F.map_entries(base.column), list(base.type.args))


def _keys(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 0, 0, "keys")
    return Value(F.map_keys(base.column), list_of(base.type.args[0]), False)


def _values(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 0, 0, "values")
    return Value(F.map_values(base.column), list_of(base.type.args[1]), False)


#: ``d.items()``, ``d.keys()``, ``d.values()``: a dict known not to be ``None``.
DICT_VIEWS = {"items": _items, "keys": _keys, "values": _values}


def zip_call(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``zip(a, b, ...)``: tuples of the iterables' items, as many as the shortest has
    (``strict=False`` is the default)."""
    strict = kwargs.pop("strict", None)
    if strict is not None and not (strict.is_const and strict.const is False):
        raise it.ctx.refuse(
            node,
            "zip() with strict=",
            "zip(a, b[, c]): the shortest wins; compare the lengths with an assert instead",
        )
    if kwargs or not args:
        raise it.ctx.refuse(
            node,
            "zip() with " + (f"{', '.join(kwargs)}=" if kwargs else "no iterables"),
            "zip(a, b[, c]): the shortest wins (strict= is not supported: compare the "
            "lengths with an assert)",
        )
    lists = [
        it.ctx.share(iterated(it, a, v, "zip()")) for a, v in zip(node.args, args, strict=True)
    ]
    shortest = F.least(*[F.size(v.column) for v in lists]) if len(lists) > 1 else None
    zipped = F.arrays_zip(*[v.column for v in lists])
    if shortest is not None:
        zipped = F.slice(zipped, 1, shortest)
    return _pairs(zipped, [v.type.args[0] for v in lists])


def enumerate_call(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``enumerate(xs[, start])``: tuples of a count from ``start`` and an item."""
    arity(it, node, args, kwargs, 1, 2, "enumerate", ("start",))
    values = iterated(it, node.args[0], args[0], "enumerate()")
    start_value = args[1] if len(args) > 1 else kwargs.get("start")
    start = F.lit(0).cast("bigint")
    if start_value is not None:
        from mapwithstate.pyfunc.arguments import int_argument

        start = int_argument(it, node, start_value, "enumerate() start")
    pairs = F.transform(
        values.column,
        lambda x, i: F.struct(
            (i.cast("bigint") + start).alias(tuple_field(0)), x.alias(tuple_field(1))
        ),
    )
    return _pairs(pairs, [INT, values.type.args[0]])


def reversed_call(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``reversed(xs)``: a list, a dict's keys or a tuple's elements, last first."""
    arity(it, node, args, kwargs, 1, 1, "reversed")
    values = iterated(it, node.args[0], args[0], "reversed()")
    return Value(F.reverse(values.column), values.type, False)


def dict_call(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``dict(d)``: a copy of a dict (a map Column: the same value); ``dict(pairs)``: the
    dict of (key, value) tuples (``zip(keys, values)``, ``d.items()``, a list of pairs)."""
    arity(it, node, args, kwargs, 1, 1, "dict")
    values = operators.none_check(it.ctx, node, args[0], _NOT_ITERABLE)
    if values.type.kind == "dict":
        return values
    if values.type.kind == "list":
        return dict_of_pairs(it, node, values)
    raise it.ctx.refuse(
        node,
        f"dict() of a {values.type}",
        "dict() copies a dict or makes one of (key, value) tuples: dict(zip(keys, values))",
    )


def dict_of_pairs(it: "Interpreter", node: ast.AST, pairs: Value) -> Value:
    """The dict of a list of (key, value) tuples: each key once, at its first position, with
    its last value."""
    pair = pairs.type.args[0]
    if pair.kind == "none":
        raise it.ctx.refuse(
            node, "dict() of an empty list", "give the dict's types: start from state.m or {}"
        )
    if pair.kind != "tuple" or len(pair.args) != 2:
        raise it.ctx.refuse(
            node,
            f"dict() of a list of {pair}",
            "make a dict of (key, value) tuples: dict(zip(keys, values)), {k: v for k, v in pairs}",
        )
    key_type, value_type = pair.args
    # Read by the checks and twice by the dict: named once if large.
    pairs = it.ctx.share(pairs)
    if key_type.kind in ("none", "num", "list", "dict"):
        raise it.ctx.refuse(
            node,
            f"a dict of {key_type} keys",
            "keys of one hashable type: str, int, float, bool, a date or a tuple of them",
        )
    it.ctx.check(
        node,
        F.exists(pairs.column, lambda e: e.isNull()),
        "TypeError",
        "cannot convert dictionary update sequence element: 'NoneType' object is not iterable",
    )
    first, second = tuple_field(0), tuple_field(1)
    it.ctx.check(
        node,
        F.exists(pairs.column, lambda e: e.getField(first).isNull()),
        "NotImplementedError",
        NONE_KEY,
    )
    entries = F.filter(pairs.column, lambda e: e.isNotNull() & e.getField(first).isNotNull())
    keys = F.array_distinct(F.transform(entries, lambda e: e.getField(first)))
    values = F.transform(
        keys,
        lambda k: F.element_at(F.filter(entries, lambda e: e.getField(first) == k), -1).getField(
            second
        ),
    )
    return Value(F.map_from_arrays(keys, values), dict_of(key_type, value_type), False)


def dict_comprehension(it: "Interpreter", node: ast.DictComp) -> Value:
    """``{k: v for ... in ... if ...}``: the comprehension of ``(k, v)`` tuples (the key
    computed before the value, as Python does), made a dict."""
    from mapwithstate.pyfunc.sequences import comprehension

    pair = ast.copy_location(ast.Tuple(elts=[node.key, node.value], ctx=ast.Load()), node)
    listed: Union[ast.ListComp, ast.GeneratorExp] = ast.copy_location(
        ast.ListComp(elt=pair, generators=node.generators), node
    )
    return dict_of_pairs(it, node, comprehension(it, listed))
