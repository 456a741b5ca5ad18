"""Dict displays and ``dict(...)`` calls as dict values (Spark maps), with Python's semantics.

A dict display of string-literal keys is first a row (:class:`~mapwithstate.pyfunc.paths.Record`):
``return {"user": user, "n": n}`` emits it, field by field, each of its own type. Used as a
value instead — stored in the state (``state.update(counts={"a": 1})``), looked up
(``{"high": 3, "low": 1}.get(level, 0)``), passed to ``len``/``in``/``dict`` — it is a dict of
``str`` keys and one value type, which :func:`record_as_dict` makes. A display with any other
key (``{name: 0}``, ``{1: "one"}``, ``{**defaults, k: v}``) is a dict value from the start
(:func:`dict_display`).

What Python does, these do: keys and values are evaluated in source order, key before value; a
later equal key keeps the first one's position and takes the later value (``{1: "a", 1.0:
"b"}`` is ``{1: "b"}``); ``**d`` unpacks ``d``'s items in its order (``TypeError`` where ``d`` is
``None``). A ``None`` key is refused where it is a literal and fails the query with
``NotImplementedError`` where it arrives at run time: a Spark map holds no null key.
"""

import ast
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.paths import Record, converted
from mapwithstate.pyfunc.pytypes import (
    NONE,
    STR,
    PyType,
    dict_of,
    list_of,
    to_spark,
    tuple_of,
    unified,
)
from mapwithstate.pyfunc.values import Value, c_column, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context, Interpreter

__all__ = ["record_as_dict", "record_as_row", "dict_display", "keyword_dict", "captured_dict"]


def record_as_dict(ctx: "Context", node: ast.AST, record: Record) -> Value:
    """A row display used as a value: the dict of its fields (``str`` keys), ``None`` where
    the variable holding it is ``None`` (``alert = None`` ... ``alert = {...}``)."""
    names = list(record.fields)
    value_type = _joined(ctx, node, [record.fields[n].type for n in names], "values")
    if not names:
        column: Column = F.create_map()
    else:
        column = F.create_map(
            *[c for n in names for c in (F.lit(n), converted(record.fields[n], value_type))]
        )
    dict_type = dict_of(STR if names else NONE, value_type)
    if names:
        column = column.cast(to_spark(dict_type))
    if record.present is True:
        return Value(column, dict_type, False)
    return Value(F.when(c_column(record.present), column), dict_type, True)


def record_as_row(
    ctx: "Context", node: ast.AST, record: Record, row_type: PyType, what: str
) -> Value:
    """A row display stored where a struct is (a STRUCT state field, an element of an
    ARRAY<STRUCT> list): the struct of its fields by name, each stored as the field's type,
    ``None`` for a field it does not name; a key no field has is refused (Python's runner
    raises TypeError storing it). As Python's runner stores it: a Row."""
    from mapwithstate.pyfunc.interpreter import store

    names = [name for name, _ in row_type.args]
    unknown = [name for name in record.fields if name not in names]
    if unknown:
        raise ctx.refuse(
            node,
            f"unknown field(s) {', '.join(unknown)} for {what} "
            f"({to_spark(row_type).simpleString()})",
            f"give the struct's fields: {', '.join(names)}",
        )
    columns = []
    for name, field_type in row_type.args:
        spark_type = to_spark(field_type)
        given = record.fields.get(name)
        if given is None:
            column = F.lit(None).cast(spark_type)
        else:
            column = store(ctx, node, f"{what}.{name}", field_type, spark_type, given).column
        columns.append(column.alias(name))
    row = F.struct(*columns)
    if record.present is True:
        return Value(row, row_type, False)
    return Value(F.when(c_column(record.present), row), row_type, True)


def dict_display(it: "Interpreter", node: ast.Dict) -> Value:
    """A dict display with keys other than string literals, or with ``**`` unpacking."""
    parts: List[Tuple[Optional[Value], Value]] = []  # (key, value), or (None, a dict to unpack)
    for key_node, value_node in zip(node.keys, node.values, strict=True):
        if key_node is None:
            unpacked = it.value(value_node)
            if unpacked.type.kind != "dict":
                raise it.ctx.refuse(
                    value_node,
                    f"** of a {unpacked.type} in a dict display",
                    "** unpacks a dict: {**defaults, 'k': v}",
                )
            unpacked = operators.none_check(
                it.ctx, value_node, unpacked, "'NoneType' object is not a mapping"
            )
            parts.append((None, unpacked))
            continue
        key = it.value(key_node)
        if key.type.kind == "none" and not key.nullable:
            raise it.ctx.refuse(
                key_node,
                "None as a dict key",
                "a compiled dict (a Spark map) holds no None key; use another key",
            )
        parts.append((key, it.value(value_node)))
    return _dict_of_parts(it, node, parts)


def _dict_of_parts(
    it: "Interpreter", node: ast.AST, parts: List[Tuple[Optional[Value], Value]]
) -> Value:
    """The dict of ``key: value`` parts and ``(None, d)`` parts unpacking a dict ``d``, in
    order."""
    keys = [k.type if k is not None else v.type.args[0] for k, v in parts]
    values = [v.type if k is not None else v.type.args[1] for k, v in parts]
    key_type = _joined(it.ctx, node, keys, "keys")
    value_type = _joined(it.ctx, node, values, "values")
    if key_type.kind in ("num", "list", "dict"):
        raise it.ctx.refuse(
            node,
            f"a dict of {key_type} keys",
            "keys of one hashable type: str, int, float, bool, a date or a tuple of them",
        )
    dict_type = dict_of(key_type, value_type)
    constant = _constant_keys(parts)
    if constant is not None:
        # Keys known when compiling: Python's own dict decides which are equal (1 == 1.0).
        entries: Dict[Any, Tuple[Value, Value]] = {}
        for key, value in parts:
            assert key is not None
            first = entries.get(key.const, (key, value))[0]
            entries[key.const] = (first, value)
        column = F.create_map(
            *[
                c
                for k, v in entries.values()
                for c in (converted(k, key_type), converted(v, value_type))
            ]
        )
        return Value(column.cast(to_spark(dict_type)), dict_type, False)
    from mapwithstate.pyfunc.iteration import dict_of_pairs

    pair_type = tuple_of((key_type, value_type))
    lists: List[Column] = []
    for key, value in parts:
        if key is None:
            entries_column = F.map_entries(value.column).cast(
                to_spark(list_of(tuple_of(tuple(value.type.args))))
            )
            listed = Value(entries_column, list_of(tuple_of(tuple(value.type.args))), False)
            lists.append(converted(listed, list_of(pair_type)).cast(to_spark(list_of(pair_type))))
        else:
            pair = F.struct(
                converted(key, key_type).alias("_1"), converted(value, value_type).alias("_2")
            )
            lists.append(F.array(pair).cast(to_spark(list_of(pair_type))))
    pairs = Value(F.concat(*lists), list_of(pair_type), False)
    return dict_of_pairs(it, node, pairs)


def keyword_dict(it: "Interpreter", node: ast.Call) -> Any:
    """``dict(k=v, ...)``: the display ``{"k": v, ...}`` (a row where it is emitted);
    ``dict(row, k=v)``: that row with more fields; ``dict(d, k=v)`` and ``dict(pairs, k=v)``:
    the dict, updated by the keywords."""
    if len(node.args) > 1 or any(k.arg is None for k in node.keywords):
        raise it.ctx.refuse(node, "dict() call", "dict(mapping_or_pairs, key=value, ...)")
    first = it.expression(node.args[0]) if node.args else Record({})
    if isinstance(first, Record) and first.present is True:
        fields = dict(first.fields)
        for keyword in node.keywords:
            assert keyword.arg is not None
            fields[keyword.arg] = it.value(keyword.value)
        return Record(fields)
    from mapwithstate.pyfunc.iteration import dict_call

    if isinstance(first, Record):
        first = record_as_dict(it.ctx, node.args[0], first)
    if not isinstance(first, Value):
        raise it.ctx.refuse(node.args[0], "dict() of this value", "dict(d) or dict(pairs)")
    parts: List[Tuple[Optional[Value], Value]] = [(None, dict_call(it, node, [first], {}))]
    for keyword in node.keywords:
        assert keyword.arg is not None
        parts.append((literal(keyword.arg), it.value(keyword.value)))
    return _dict_of_parts(it, node, parts)


def captured_dict(ctx: "Context", node: ast.AST, found: Dict[Any, Any]) -> Value:
    """A module-level dict constant of constant keys and values, as a dict literal."""
    try:
        items = [(literal(k), literal(v)) for k, v in found.items()]
    except (TypeError, OverflowError):
        raise ctx.refuse(
            node,
            "captured dict of other than numbers, strings, bools, dates and None",
            "a module-level dict may hold constants of one key type and one value type",
        ) from None
    if any(k.type.kind == "none" for k, _ in items):
        raise ctx.refuse(node, "captured dict with a None key", "a Spark map holds no None key")
    key_type = _joined(ctx, node, [k.type for k, _ in items], "keys")
    value_type = _joined(ctx, node, [v.type for _, v in items], "values")
    if key_type.kind == "num":
        raise ctx.refuse(node, f"a dict of {key_type} keys", "keys of one type: int or float")
    dict_type = dict_of(key_type, value_type)
    if not items:
        return Value(F.create_map(), dict_type, False)
    column = F.create_map(
        *[c for k, v in items for c in (converted(k, key_type), converted(v, value_type))]
    )
    return Value(column.cast(to_spark(dict_type)), dict_type, False)


def _constant_keys(parts: List[Tuple[Optional[Value], Value]]) -> Optional[List[Any]]:
    """The keys' constants, where every part is ``key: value`` with a constant key."""
    if any(k is None or not k.is_const for k, _ in parts):
        return None
    return [k.const for k, _ in parts if k is not None]


def _joined(ctx: "Context", node: ast.AST, types: List[PyType], what: str) -> PyType:
    return unified(
        types,
        lambda joined, t: ctx.refuse(
            node,
            f"a dict of {joined} and {t} {what} used as a value",
            "a dict value (a Spark map) holds one key type and one value type; emit "
            "rows of mixed types with return/yield {...}",
        ),
    )
