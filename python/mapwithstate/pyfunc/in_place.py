"""The methods that change a local list or dict in place, and ``del`` of an item.

``xs.append(v)``, ``xs.extend(ys)``, ``xs.insert(i, v)``, ``xs.pop([i])``, ``xs.remove(v)``,
``xs.clear()``, ``xs.sort(key=..., reverse=...)``, ``xs.reverse()``; ``d.pop(k[, default])``,
``d.setdefault(k[, default])``, ``d.update(other)``, ``d.clear()``; ``del xs[i]``,
``del d[k]``. A compiled list or dict is a Column, so the change is a new array or map given
to the variable, which is right only where no other name, the state or a yielded row may hold
the same object: the rule of item assignment (:mod:`~mapwithstate.pyfunc.mutations`). A call
is taken where Python's order is plain: as a statement of its own, or as the whole value of an
assignment (``last = xs.pop()``); anywhere else it is refused with that way out.

Each method keeps Python's semantics: its exceptions (``IndexError: pop from empty list``,
``ValueError: list.remove(x): x not in list``, ``KeyError``), ``insert``'s clamped index, a
dict's insertion order (``update`` and ``setdefault`` change a present key where it is and put
a new one last), ``==`` between items as Python compares them (``remove(1)`` removes a
``1.0``), and a list of ints taking a float (``xs.append(0.5)``) becoming a list of numbers.
"""

import ast
from typing import TYPE_CHECKING, List, Optional, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.collection_variables import DEQUE_IN_PLACE, kind_of
from mapwithstate.pyfunc.dict_keys import looked_up_key, stored_key
from mapwithstate.pyfunc.paths import converted
from mapwithstate.pyfunc.pytypes import NONE, PyType, dict_of, list_of, to_spark, unify
from mapwithstate.pyfunc.sets import SET_IN_PLACE
from mapwithstate.pyfunc.values import Value, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = [
    "IN_PLACE_METHODS",
    "in_place_call",
    "call",
    "changed",
    "delete",
    "refusal",
    "setdefault",
    "extended",
    "LIST_CHANGES",
    "check_arity",
    "joined_item",
]

LIST_IN_PLACE = ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse")
DICT_IN_PLACE = ("pop", "setdefault", "update", "clear")
#: Every method name that changes a list, a dict or a set.
IN_PLACE_METHODS = frozenset(LIST_IN_PLACE + DICT_IN_PLACE + SET_IN_PLACE)

_WAY_OUT = (
    "call it as a statement of its own (xs.append(v)) or as an assignment's whole value "
    "(last = xs.pop()), on a local list, dict or set: xs = list(state.xs or [])"
)


def in_place_call(it: "Interpreter", node: ast.expr) -> Optional[ast.Call]:
    """``node`` as a call that changes a local list's or dict's items, or an item of one
    (``d[k].append(v)``, ``d.setdefault(k, []).append(v)``: see
    :mod:`~mapwithstate.pyfunc.nested`), or None."""
    from mapwithstate.pyfunc.nested import item_type

    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    owner = node.func.value
    if isinstance(owner, ast.Name):
        value = it.path.env.get(owner.id)
        kind = value.type.kind if isinstance(value, Value) else None
    else:
        inner = item_type(it, owner)
        kind = inner.kind if inner is not None else None
    name = node.func.attr
    if isinstance(owner, ast.Name) and name in DEQUE_IN_PLACE:
        variable = kind_of(it, owner)
        if variable is not None and variable.name == "deque":
            return node
    if (
        (kind == "list" and name in LIST_IN_PLACE)
        or (kind == "dict" and name in DICT_IN_PLACE)
        or (kind == "set" and name in SET_IN_PLACE)
    ):
        return node
    return None


def refusal(it: "Interpreter", node: ast.Call, base: Value, name: str) -> Optional[Exception]:
    """The refusal of a changing method called where :func:`in_place_call` does not take it
    (inside an expression, or on a value that is not a local variable), else None."""
    methods = {"list": LIST_IN_PLACE, "dict": DICT_IN_PLACE, "set": SET_IN_PLACE}.get(
        base.type.kind, ()
    )
    if name not in methods:
        return None
    return it.ctx.refuse(node, f"{base.type}.{name}() inside an expression", _WAY_OUT)


def call(it: "Interpreter", statement: ast.stmt, node: ast.Call) -> Tuple[str, Value, Value]:
    """Runs the changing call ``node`` of ``statement``: the variable that changes, its new
    value, and what the call returns."""
    from mapwithstate.pyfunc.mutations import owned_container
    from mapwithstate.pyfunc.nested import changed_item, is_item

    assert isinstance(node.func, ast.Attribute)
    method = node.func.attr
    if is_item(node.func.value):
        # An item of a local list or dict, changed inside it.
        return changed_item(it, statement, node.func.value, lambda inner: changed(it, node, inner))
    name, base = owned_container(
        it, statement, node.func.value, f"{method}() of an item", f".{method}()"
    )
    new, result = changed(it, node, base)
    return name, new, result


def changed(it: "Interpreter", node: ast.Call, base: Value) -> Tuple[Value, Value]:
    """The changing call ``node`` on the list or dict ``base``: its new value and what the
    call returns."""
    assert isinstance(node.func, ast.Attribute)
    method = node.func.attr
    # Python looks the method up before it evaluates the arguments: None has none.
    base = operators.attribute_of_none(it.ctx, node, base, method)
    kind = kind_of(it, node.func.value)
    if kind is not None and kind.name == "deque":
        from mapwithstate.pyfunc import deques
        from mapwithstate.pyfunc.builtins import method_argument

        args = [method_argument(it, a) for a in node.args]
        return deques.changed(it, node, kind, base, args)
    if kind is not None and kind.name == "Counter" and method == "update":
        from mapwithstate.pyfunc import counters
        from mapwithstate.pyfunc.builtins import method_argument

        return counters.update(it, node, base, [method_argument(it, a) for a in node.args])
    if method == "sort":
        return _sort(it, node, base), literal(None)
    if base.type.kind == "set":
        from mapwithstate.pyfunc import sets

        if any(isinstance(a, ast.Starred) for a in node.args):
            raise it.ctx.refuse(node, "*args in a call", "pass arguments one by one")
        return sets.in_place(it, node, base, method)
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        raise it.ctx.refuse(node, "*args or **kwargs in a call", "pass arguments one by one")
    if node.keywords and not (base.type.kind == "dict" and method == "update"):
        raise it.ctx.refuse(
            node,
            f"{base.type}.{method}() with keyword arguments",
            f"Python raises TypeError: {method}() takes no keyword arguments",
        )
    from mapwithstate.pyfunc.builtins import method_argument

    # A dict display appended or inserted into a list of structs is stored as one, as are
    # those of a list display extending it.
    element = base.type.args[0] if base.type.kind == "list" else None
    extended = base.type if element is not None else None
    stored = {"append": element, "insert": element, "extend": extended}.get(method)
    args = [method_argument(it, a, stored) for a in node.args]
    handler = (LIST_CHANGES if base.type.kind == "list" else _DICT)[method]
    return handler(it, node, base, args)


def delete(it: "Interpreter", node: ast.Delete) -> List[Tuple[str, Value]]:
    """``del xs[i]`` (``IndexError`` outside the list) and ``del d[k]`` (``KeyError`` without
    the key), each target in turn: the variables that change and their new values."""
    from mapwithstate.pyfunc.mutations import owned_container

    changed = []
    for target in node.targets:
        if not isinstance(target, ast.Subscript) or isinstance(target.slice, ast.Slice):
            what = "a slice" if isinstance(target, ast.Subscript) else type(target).__name__
            raise it.ctx.refuse(
                target,
                f"del of {what}",
                "del removes an item of a local list or dict (del xs[i], del d[k]); "
                "reassign a variable instead",
            )
        if not isinstance(target.value, ast.Name):
            raise it.ctx.refuse(
                target,
                f"del of an item of {type(target.value).__name__}",
                "copy it into a local first: xs = list(state.xs or []); del xs[i]",
            )
        name, base = owned_container(it, node, target.value, "del of an item", "[...] del")
        base = operators.none_check(
            it.ctx, node, base, "'NoneType' object does not support item deletion"
        )
        index = it.value(target.slice)
        if base.type.kind == "list":
            position = _position(it, node, base, index, "list assignment index out of range")
            new = Value(_without(base.column, position), base.type, False)
        else:
            new = Value(_without_key(it, node, base, index, None)[0], base.type, False)
        it.path.env[name] = it.ctx.share(new)
        changed.append((name, new))
    return changed


# ------------------------------------------------------------------ lists


def _append(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 1, 1, "append")
    typed, item = joined_item(it, node, base, args[0])
    return Value(F.concat(typed.column, F.array(item)), typed.type, False), literal(None)


def _extend(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 1, 1, "extend")
    return extended(it, node, base, args[0]), literal(None)


def extended(it: "Interpreter", node: ast.AST, base: Value, other: Value) -> Value:
    """The list ``base`` extended by ``other``'s items (``xs.extend(ys)``, ``xs += ys``)."""
    other = operators.none_check(it.ctx, node, other, "'NoneType' object is not iterable")
    if other.type.kind != "list":
        raise it.ctx.refuse(
            node, f"list.extend() of a {other.type}", "extend a list with a list's items"
        )
    joined = unify(base.type, other.type)
    if joined is None:
        raise it.ctx.refuse(
            node,
            f"a {other.type} extending a {base.type}",
            "a list is an array Column: one element type; convert the items explicitly",
        )
    column = F.concat(converted(base, joined), converted(other, joined))
    return Value(column, joined, False)


def _insert(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 2, 2, "insert")
    index = _int_index(it, node, args[0])
    typed, item = joined_item(it, node, base, args[1])
    # Python clamps: a negative index counts from the end, then anything outside goes to an end.
    length = F.size(typed.column).cast("bigint")
    shifted = F.when(index.column < 0, index.column + length).otherwise(index.column)
    position = F.least(F.greatest(shifted, F.lit(0).cast("bigint")), length)
    column = F.concat(
        F.filter(typed.column, lambda e, i: i.cast("bigint") < position),
        F.array(item),
        F.filter(typed.column, lambda e, i: i.cast("bigint") >= position),
    )
    return Value(column, typed.type, False), literal(None)


def _list_pop(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 0, 1, "pop")
    it.ctx.check(node, F.size(base.column) == 0, "IndexError", "pop from empty list")
    index = _int_index(it, node, args[0]) if args else literal(-1)
    position = _position(it, node, base, index, "pop index out of range")
    inside = (position >= 0) & (position < F.size(base.column))
    # Only inside the list: Spark's element_at fails outside it (the check above fails first).
    result = Value(
        F.when(inside, F.element_at(base.column, (position + 1).cast("int"))),
        base.type.args[0],
        True,
    )
    return Value(_without(base.column, position), base.type, False), result


def _remove(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 1, 1, "remove")
    element = base.type.args[0]
    matches = F.transform(base.column, lambda e: operators.equals(Value(e, element, True), args[0]))
    found = F.array_position(matches, F.lit(True))
    it.ctx.check(node, found == F.lit(0), "ValueError", "list.remove(x): x not in list")
    position = (found - F.lit(1)).cast("bigint")
    return Value(_without(base.column, position), base.type, False), literal(None)


def _list_clear(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 0, 0, "clear")
    return Value(F.filter(base.column, lambda e: F.lit(False)), base.type, False), literal(None)


def _reverse(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 0, 0, "reverse")
    return Value(F.reverse(base.column), base.type, False), literal(None)


def _sort(it: "Interpreter", node: ast.Call, base: Value) -> Value:
    """``xs.sort(key=..., reverse=...)``: ``sorted()``'s order (stable, Python's
    comparisons, TypeError between items Python cannot compare); no positional argument."""
    from mapwithstate.pyfunc.ordering import sort_by_keywords

    if node.args:
        raise it.ctx.refuse(
            node,
            "list.sort() with positional arguments",
            "Python raises TypeError: sort() takes no positional arguments; "
            "xs.sort(key=..., reverse=...)",
        )
    return sort_by_keywords(it, node, "sort", base)


# ------------------------------------------------------------------ dicts


def _dict_pop(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 1, 2, "pop")
    key = args[0]
    default = args[1] if len(args) > 1 else None
    column, found, value = _without_key(it, node, base, key, default)
    if default is None:
        return Value(column, base.type, False), value
    joined = unify(value.type, default.type)
    if joined is None:
        raise it.ctx.refuse(
            node,
            f"pop() with a {default.type} default for {value.type} values",
            "give the default the values' type",
        )
    result = F.when(found, converted(value, joined)).otherwise(converted(default, joined))
    return Value(column, base.type, False), Value(result, joined, True)


def setdefault(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    """``base.setdefault(*args)``: the dict after it, and the value it returns."""
    check_arity(it, node, args, 1, 2, "setdefault")
    key_type, value_type = base.type.args
    if key_type.kind == "none" and args[0].type.kind != "none":
        # An empty dict ({}, defaultdict(list)) takes its first key's type.
        key_type = args[0].type
        keyed = dict_of(key_type, value_type)
        base = Value(base.column.cast(to_spark(keyed)), keyed, base.nullable)
    key = _key(it, node, base, args[0])
    default = args[1] if len(args) > 1 else literal(None)
    joined = unify(value_type, default.type)
    if joined is None:
        raise it.ctx.refuse(
            node,
            f"setdefault() with a {default.type} default for {value_type} values",
            "give the default the values' type",
        )
    typed = Value(_values_as(base, joined), dict_of(key_type, joined), False)
    present = F.coalesce(F.map_contains_key(typed.column, key), F.lit(False))
    stored = converted(default, joined)
    column = F.when(present, typed.column).otherwise(
        F.map_concat(typed.column, F.create_map(key, stored))
    )
    result = F.when(present, F.element_at(typed.column, key)).otherwise(stored)
    return Value(column, typed.type, False), Value(result, joined, True)


def _update(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    if len(args) > 1:
        raise it.ctx.refuse(
            node,
            f"dict.update() with {len(args)} arguments",
            "Python raises TypeError: update expected at most 1 argument",
        )
    others = []
    if args:
        other = operators.none_check(it.ctx, node, args[0], "'NoneType' object is not iterable")
        if other.type.kind != "dict":
            raise it.ctx.refuse(
                node, f"dict.update() of a {other.type}", "update a dict from a dict"
            )
        others.append(other)
    if node.keywords:
        if base.type.args[0].kind != "str":
            raise it.ctx.refuse(
                node,
                f"dict.update(name=...) of a dict of {base.type.args[0]} keys",
                "keyword arguments are str keys; pass a dict",
            )
        pairs = [(k.arg, it.value(k.value)) for k in node.keywords]
        element = NONE
        for _, value in pairs:
            joined_element = unify(element, value.type)
            if joined_element is None:
                raise it.ctx.refuse(
                    node, "keyword values of different types", "a dict's values are one type"
                )
            element = joined_element
        entries: List[Column] = []
        for key_name, value in pairs:
            entries += [F.lit(key_name), converted(value, element)]
        others.append(Value(F.create_map(*entries), dict_of(base.type.args[0], element), False))
    current = base
    for other in others:
        joined = unify(current.type, other.type)
        if joined is None:
            raise it.ctx.refuse(
                node,
                f"a {other.type} updating a {current.type}",
                "a dict's keys and values are one Column type each; convert them explicitly",
            )
        merged = _merged(_values_as(current, joined.args[1]), _values_as(other, joined.args[1]))
        current = Value(merged, joined, False)
    return current, literal(None)


def _merged(mine: Column, theirs: Column) -> Column:
    """``mine.update(theirs)``: a present key changes where it is; the new ones follow, in
    ``theirs``' order."""

    def held(m: Column, k: Column) -> Column:
        return F.coalesce(F.map_contains_key(m, k), F.lit(False))

    kept = F.transform_values(
        mine, lambda k, v: F.when(held(theirs, k), F.element_at(theirs, k)).otherwise(v)
    )
    return F.map_concat(kept, F.map_filter(theirs, lambda k, v: ~held(mine, k)))


def _dict_clear(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value]
) -> Tuple[Value, Value]:
    check_arity(it, node, args, 0, 0, "clear")
    return Value(F.map_filter(base.column, lambda k, v: F.lit(False)), base.type, False), literal(
        None
    )


LIST_CHANGES = {
    "append": _append,
    "extend": _extend,
    "insert": _insert,
    "pop": _list_pop,
    "remove": _remove,
    "clear": _list_clear,
    "reverse": _reverse,
}
_DICT = {"pop": _dict_pop, "setdefault": setdefault, "update": _update, "clear": _dict_clear}


# ------------------------------------------------------------------ shared


def check_arity(
    it: "Interpreter", node: ast.Call, args: List[Value], low: int, high: int, name: str
) -> None:
    if not low <= len(args) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        raise it.ctx.refuse(
            node,
            f"{name}() with {len(args)} argument(s)",
            f"Python raises TypeError: {name}() takes {expected} argument(s)",
        )


def joined_item(
    it: "Interpreter", node: ast.Call, base: Value, item: Value
) -> Tuple[Value, Column]:
    """The list retyped to hold ``item`` too (a list of ints taking a float holds numbers;
    ``[]`` takes its first item's type), and ``item`` as one of its elements."""
    element = unify(base.type.args[0], item.type)
    if element is None:
        raise it.ctx.refuse(
            node,
            f"a {item.type} added to a {base.type}",
            "a list is an array Column: one element type; convert it explicitly",
        )
    typed = Value(converted(base, list_of(element)), list_of(element), False)
    if element.kind != "none" and base.type.args[0].kind == "none":
        typed = Value(base.column.cast(to_spark(list_of(element))), list_of(element), False)
    return typed, converted(item, element)


def _int_index(it: "Interpreter", node: ast.Call, index: Value) -> Value:
    if index.type.kind not in ("int", "bool"):
        raise it.ctx.refuse(node, f"index of type {index.type}", "indices are ints")
    index = operators.none_check(
        it.ctx, node, index, "'NoneType' object cannot be interpreted as an integer"
    )
    return Value(index.column.cast("bigint"), index.type, False)


def _position(it: "Interpreter", node: ast.AST, base: Value, index: Value, message: str) -> Column:
    """The 0-based position of ``index`` in the list (from the end where negative), failing
    with ``IndexError: message`` outside it."""
    if index.type.kind not in ("int", "bool"):
        raise it.ctx.refuse(node, f"index of type {index.type}", "indices are ints")
    index = operators.none_check(
        it.ctx, node, index, "list indices must be integers or slices, not NoneType"
    )
    length = F.size(base.column).cast("bigint")
    column = index.column.cast("bigint")
    position = F.when(column < 0, column + length).otherwise(column)
    it.ctx.check(node, (position < 0) | (position >= length), "IndexError", message)
    return position


def _without(column: Column, position: Column) -> Column:
    return F.filter(column, lambda e, i: i.cast("bigint") != position)


def _key(it: "Interpreter", node: ast.AST, base: Value, key: Value) -> Column:
    """``key`` as one of the dict's keys; a None key fails the query, as item assignment's."""
    return stored_key(it.ctx, node, base.type.args[0], key)


def _without_key(
    it: "Interpreter", node: ast.AST, base: Value, key: Value, default: Optional[Value]
) -> Tuple[Column, Column, Value]:
    """The dict without ``key``, whether it held it, and its value there; ``KeyError`` where
    it did not and no default is given (a None key is never held)."""
    column = looked_up_key(it.ctx, node, base.type.args[0], key)
    found = F.coalesce(F.map_contains_key(base.column, column), F.lit(False))
    if default is None:
        it.ctx.check(node, ~found, "KeyError", "key not in the dict")
    rest = F.map_filter(base.column, lambda k, v: ~F.coalesce(k == column, F.lit(False)))
    value = Value(F.when(found, F.element_at(base.column, column)), base.type.args[1], True)
    return rest, found, value


def _values_as(base: Value, value_type: PyType) -> Column:
    """The dict's map with its values as ``value_type`` (a type :func:`unify` made)."""
    own = base.type.args[1]
    if own == value_type:
        return base.column
    if own.kind == "none":
        return base.column.cast(to_spark(dict_of(base.type.args[0], value_type)))
    return F.transform_values(base.column, lambda k, v: converted(Value(v, own, True), value_type))
