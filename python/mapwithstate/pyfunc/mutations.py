"""Augmented assignment to an item: ``xs[i] += v`` on a list, ``d[k] += v`` on a dict.

Python changes the list or dict in place, so every name holding the same object sees the
change; a compiled value is a Column, and the new array or map goes to the one variable. So the
compiler makes the change only where no other name, nor the state, nor a yielded row, can hold
the object: the variable is a parameter, or every assignment to it makes a new list (a
display, a list or dict comprehension, a concatenation, a slice, ``list()``, ``sorted()``,
``dict()``, a ``str`` method); and before the change it is used only where Python reads it
(an index, an iteration, ``len``, an operand, a call's argument), never where the object itself
would be kept (assigned to another name, stored with ``state.update``, yielded). Anything else is
refused with the way out: build the new list, ``xs = xs[:i] + [xs[i] + 1] + xs[i + 1:]``.

Python's order holds: the container and the index, then the item (``IndexError``,
``KeyError``, ``TypeError`` for ``None``), then the value, the operation and its failures.
"""

import ast
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, Union, cast

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.collection_variables import Kind, kind_of
from mapwithstate.pyfunc.dict_displays import record_as_dict
from mapwithstate.pyfunc.dict_keys import stored_key
from mapwithstate.pyfunc.paths import Record
from mapwithstate.pyfunc.pytypes import PyType, dict_of, to_spark, unify
from mapwithstate.pyfunc.sequences import item
from mapwithstate.pyfunc.struct_targets import as_expected
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["assign_item", "augment_item", "owned_container", "fresh", "reads"]

_HINT = "build the new list or dict instead: xs = xs[:i] + [xs[i] + 1] + xs[i + 1:]"
#: Builtins whose result never is their argument itself.
_READING_CALLS = {"len", "sum", "any", "all", "sorted", "list", "dict", "str", "bool", "int"}
_READING_CALLS |= {"set"}
_READING_CALLS |= {"zip", "enumerate", "reversed"}
_READING_CALLS |= {"Counter", "deque", "mean", "fmean", "median", "median_low", "median_high"}
_READING_CALLS |= {"mode", "pvariance", "variance", "pstdev", "stdev"}
#: Calls that make a new list.
_FRESH_CALLS = {"list", "sorted", "dict", "set", "Counter", "defaultdict", "deque"}
#: Methods that keep an argument itself in their list or dict.
_KEEPING_METHODS = {"append", "insert", "setdefault"}


def augment_item(it: "Interpreter", node: ast.AugAssign) -> Tuple[str, Value]:
    """The variable ``node`` changes and its new value: ``xs[i] op= v``, ``d[k][i] op= v``
    (an item of an item, see :mod:`~mapwithstate.pyfunc.nested`), and ``d[k] += ys`` of a
    list item, which Python extends in place."""
    from mapwithstate.pyfunc.nested import changed_item, is_item, item_type

    target = node.target
    assert isinstance(target, ast.Subscript)
    variable = kind_of(it, target.value)
    if variable is not None and variable.name in ("Counter", "defaultdict"):
        return _augmented_with_default(it, node, target, variable)
    inner = item_type(it, target)
    if inner is not None and inner.kind in ("list", "dict"):
        if not (inner.kind == "list" and isinstance(node.op, ast.Add)):
            raise it.ctx.refuse(
                node,
                f"augmented assignment {operators.symbol(node.op)}= to an item that is a "
                f"{inner.name}",
                "Python changes that inner object in place; of those only a list's += "
                "(extend) compiles: " + _HINT,
            )
        name, new, _ = changed_item(
            it, node, target, lambda items: (_extended(it, node, items), None)
        )
        return name, new
    if is_item(target.value) and not isinstance(target.slice, ast.Slice):
        name, new, _ = changed_item(
            it, node, target.value, lambda base: (_augmented(it, node, base), None)
        )
        return name, new
    name, base = _owned_container(it, node, target, f"{operators.symbol(node.op)}=")
    return name, _augmented(it, node, base)


def _augmented_with_default(
    it: "Interpreter", node: ast.AugAssign, target: ast.Subscript, variable: Kind
) -> Tuple[str, Value]:
    """``c[k] op= v`` of a Counter (from 0 where ``k`` is missing) or a defaultdict (from
    its default, which Python inserts first: the key goes last either way)."""
    from mapwithstate.pyfunc import counters, default_dicts
    from mapwithstate.pyfunc.builtins import dict_get

    base = it.value(target.value)
    key = it.value(target.slice)
    if variable.name == "Counter":
        current = counters.item(it, node, base, key)
    else:
        fallback = it.value(default_dicts.default(variable, node))
        current = (
            fallback
            if base.type.args[0].kind == "none"
            else dict_get(it, cast(ast.Call, node), base, [key, fallback], {})
        )
    new = operators.binary(it.ctx, node, node.op, current, it.value(node.value))
    name, changed = assign_item(it, cast(ast.Assign, node), target, new)
    assert isinstance(changed, Value)
    return name, changed


def _extended(it: "Interpreter", node: ast.AugAssign, items: Value) -> Value:
    """``items += value`` of a list: extended in place (``TypeError`` for ``None``)."""
    from mapwithstate.pyfunc.in_place import extended

    items = operators.none_check(
        it.ctx, node, items, "unsupported operand type(s) for +=: 'NoneType' and 'list'"
    )
    return extended(it, node, items, it.value(node.value))


def _augmented(it: "Interpreter", node: ast.AugAssign, base: Value) -> Value:
    """``base`` (a list or dict) with ``node``'s item changed by its operator."""
    target = node.target
    assert isinstance(target, ast.Subscript)
    base = operators.none_check(it.ctx, node, base, "'NoneType' object is not subscriptable")
    current, where = item(it, target, base, it.value(target.slice))
    element = base.type.args[0] if base.type.kind == "list" else base.type.args[1]
    if element.kind in ("list", "dict"):
        raise it.ctx.refuse(
            node,
            f"augmented assignment to an item that is a {element.name}",
            "Python changes that inner object in place; " + _HINT,
        )
    new = operators.binary(it.ctx, node, node.op, current, it.value(node.value))
    value = stored(it, node, base, element, new)
    column: Column
    if base.type.kind == "list":
        column = F.transform(
            base.column,
            lambda e, i: F.when(i.cast("bigint") == where, value).otherwise(e),
        )
    else:
        column = F.transform_values(
            base.column, lambda k, v: F.when(k == where, value).otherwise(v)
        )
    return Value(column, base.type, False)


def _owned_container(
    it: "Interpreter",
    node: ast.stmt,
    target: ast.Subscript,
    what: str,
    row_key: Optional[str] = None,
) -> Tuple[str, Any]:
    """The variable whose list or dict ``target`` changes an item of, and its value."""
    verb = "augmented assignment" if isinstance(node, ast.AugAssign) else "assignment"
    if isinstance(target.slice, ast.Slice):
        raise it.ctx.refuse(node, f"{verb} to a slice", _HINT)
    return owned_container(it, node, target.value, f"{verb} to an item", f"[...] {what}", row_key)


def owned_container(
    it: "Interpreter",
    node: ast.stmt,
    container: ast.expr,
    construct: str,
    change: str,
    row_key: Optional[str] = None,
) -> Tuple[str, Any]:
    """The variable ``container`` names, whose list or dict ``node`` changes in place, and its
    value: a local no other name, nor the state, nor a yielded row may hold (see the module).
    ``construct`` names the kind of change in refusals (``assignment to an item``), ``change``
    how it follows the variable's name (``[...] +=``, ``.append()``). A dict display's
    variable is a dict here, but a row (:class:`Record`) where ``row_key``, a string-literal
    key it is given, keeps it one (``row["n"] = n``)."""
    if not isinstance(container, ast.Name):
        described = (
            f"state.{container.attr}"
            if isinstance(container, ast.Attribute)
            and isinstance(container.value, ast.Name)
            and container.value.id == "state"
            else type(container).__name__
        )
        raise it.ctx.refuse(
            node,
            f"{construct} of {described}",
            "Python would change that object in place; copy it into a local first, "
            "xs = list(state.xs or []); xs[i] += 1; state.update(xs=xs)",
        )
    name = container.id
    for statement in ast.walk(it.ctx.source.tree):
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Tuple)
            and any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
        ):
            raise it.ctx.refuse(
                statement,
                f"item assignment to a tuple ({name}{change} on line {node.lineno})",
                "Python raises TypeError: 'tuple' object does not support item assignment",
            )
    base = it.name(container)
    keeps_row = isinstance(base, Record) and base.present is True and row_key is not None
    if isinstance(base, Record) and not keeps_row:
        base = record_as_dict(it.ctx, container, base)
    changeable = isinstance(base, Value) and base.type.kind in ("list", "dict", "set")
    if not keeps_row and not changeable:
        kind = base.type if isinstance(base, Value) else type(base).__name__
        raise it.ctx.refuse(
            node,
            f"{construct} of a {kind}",
            "Python raises TypeError: 'tuple' object does not support item assignment"
            if isinstance(base, Value) and base.type.kind == "tuple"
            else "Python raises TypeError: only a list's or a dict's items can be assigned",
        )
    shared = _shared_use(it, name, node)
    if shared is not None:
        raise it.ctx.refuse(
            shared,
            f"{name}{change} (line {node.lineno}) where {name} may "
            "be the same object as another name's, the state's or a yielded row's",
            _HINT,
        )
    return name, base


def assign_item(
    it: "Interpreter", node: ast.Assign, target: ast.Subscript, value: Value
) -> Tuple[str, Union[Value, Record]]:
    """``xs[i] = v`` of a list (``IndexError`` outside it) or ``d[k] = v`` of a dict (a new
    key goes last, as Python's insertion order), or ``d[k][i] = v`` of an item (see
    :mod:`~mapwithstate.pyfunc.nested`): the variable that changes and its new value.
    ``value`` is evaluated first, as Python does. A row display's variable given a
    string-literal key stays a row (``row["n"] = n``; a present key keeps its position)."""
    from mapwithstate.pyfunc.nested import changed_item, is_item

    if is_item(target.value) and not isinstance(target.slice, ast.Slice):
        name, new, _ = changed_item(
            it, node, target.value, lambda base: (_assigned(it, node, target, base, value), None)
        )
        return name, new
    row_key = (
        target.slice.value
        if isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)
        else None
    )
    name, base = _owned_container(it, node, target, "=", row_key)
    if isinstance(base, Record):
        if not isinstance(value, Value):
            raise it.ctx.refuse(node, f"a {type(value).__name__} stored in a row", _HINT)
        assert row_key is not None
        return name, Record({**base.fields, row_key: value})
    return name, _assigned(it, node, target, base, value)


def _assigned(
    it: "Interpreter", node: ast.stmt, target: ast.Subscript, base: Value, value: Any
) -> Value:
    """``base`` (a list or dict) with ``target``'s item set to ``value``."""
    element_type = base.type.args[0] if base.type.kind == "list" else base.type.args[-1]
    if isinstance(value, Record) and element_type.kind == "row":
        value = as_expected(it, node, value, element_type)
    if not isinstance(value, Value):
        raise it.ctx.refuse(
            node, f"a {type(value).__name__} stored as an item", "store a number, str or list"
        )
    base = operators.none_check(
        it.ctx, node, base, "'NoneType' object does not support item assignment"
    )
    index = it.value(target.slice)
    kind = base.type.kind
    if kind == "dict" and base.type.args[0].kind == "none" and index.type.kind != "none":
        # An empty dict display's variable ({} or dict()) takes its first item's types.
        typed = dict_of(index.type, value.type)
        base = Value(base.column.cast(to_spark(typed)), typed, base.nullable)
    element = base.type.args[0] if kind == "list" else base.type.args[1]
    new = stored(it, node, base, element, value)
    column: Column
    if kind == "list":
        if index.type.kind not in ("int", "bool"):
            raise it.ctx.refuse(node, f"index of type {index.type}", "indices are ints")
        index = operators.none_check(
            it.ctx, node, index, "list indices must be integers or slices, not NoneType"
        )
        length = F.size(base.column)
        position = F.when(index.column < 0, index.column + length).otherwise(index.column)
        inside = (position >= 0) & (position < length)
        it.ctx.check(node, ~inside, "IndexError", "list assignment index out of range")
        column = F.transform(
            base.column, lambda e, i: F.when(i.cast("bigint") == position, new).otherwise(e)
        )
        return Value(column, base.type, False)
    # Python takes None as a key; a Spark map holds none: the query fails rather than lose
    # the item.
    key = stored_key(it.ctx, node, base.type.args[0], index)
    present = F.coalesce(F.map_contains_key(base.column, key), F.lit(False))
    # (With a None key the dict is left as it is: the check above fails the query first.)
    column = (
        F.when(
            present,
            F.transform_values(base.column, lambda k, v: F.when(k == key, new).otherwise(v)),
        )
        .when(key.isNotNull(), F.map_concat(base.column, F.create_map(key, new)))
        .otherwise(base.column)
    )
    return Value(column, base.type, False)


def stored(it: "Interpreter", node: ast.stmt, base: Value, element: PyType, value: Value) -> Column:
    """``value`` as an item of ``base`` (of ``element`` items) holds it."""
    if unify(element, value.type) != element:
        raise it.ctx.refuse(
            node,
            f"a {value.type} stored into a {base.type.kind} of {element}",
            "a list's or dict's values are one Column type; convert it explicitly",
        )
    return value.column if value.type == element else value.column.cast(to_spark(element))


def fresh(node: Optional[ast.expr]) -> bool:
    """Whether ``node`` makes a new list (or is no list at all)."""
    if node is None or isinstance(
        node,
        (ast.List, ast.ListComp, ast.Dict, ast.DictComp, ast.Set, ast.SetComp, ast.Constant),
    ):
        return True
    if isinstance(node, ast.BinOp):
        return True
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Slice)
    if isinstance(node, ast.IfExp):
        return fresh(node.body) and fresh(node.orelse)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in _FRESH_CALLS
        # A str method (split) or a pyspark.sql.functions call: a new value; dict.get,
        # dict.setdefault and pop give an item of the container's own.
        return isinstance(func, ast.Attribute) and func.attr not in ("get", "setdefault", "pop")
    return False


def reads(node: ast.AST, parent: ast.AST, ancestors: Dict[int, ast.AST]) -> bool:
    """Whether this use of the variable only reads the object (Python keeps no reference to
    it past the expression)."""
    if isinstance(parent, ast.Subscript):
        return parent.value is node
    if isinstance(parent, ast.comprehension):
        return parent.iter is node
    if isinstance(parent, ast.Call):
        if node not in parent.args:
            return False
        func = parent.func
        if isinstance(func, ast.Name):
            # max(xs) is an item; max(xs, ys) may be xs itself.
            return func.id in _READING_CALLS or (
                func.id in ("min", "max") and len(parent.args) == 1
            )
        # ys.append(xs) keeps xs itself in ys; ys.extend(xs) and other methods read it.
        return isinstance(func, ast.Attribute) and func.attr not in _KEEPING_METHODS
    if isinstance(parent, (ast.Attribute, ast.Compare, ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(parent, ast.FormattedValue):
        return True
    if isinstance(parent, ast.AugAssign):
        return parent.value is node
    if isinstance(parent, (ast.If, ast.IfExp, ast.Assert)):
        return getattr(parent, "test", None) is node or getattr(parent, "msg", None) is node
    # A row returned ends the call: no change follows on its path.
    return returned(parent, ancestors)


def parents(it: "Interpreter") -> Dict[int, ast.AST]:
    """Each node's parent in the function's tree, by the node's id."""
    return it.ctx.source.parents


def before(change: ast.AST, ancestors: Dict[int, ast.AST]) -> Tuple[int, int]:
    """The source position every use that may run before ``change`` precedes: the change's,
    or inside a loop the loop's end (its body's uses may come before the change's next run)."""
    limit = (getattr(change, "lineno", 0), getattr(change, "col_offset", 0))
    walk: Optional[ast.AST] = change
    while walk is not None:
        if isinstance(walk, ast.For):
            limit = max(limit, (walk.end_lineno or walk.lineno, walk.end_col_offset or 0))
        walk = ancestors.get(id(walk))
    return limit


def returned(node: ast.AST, ancestors: Dict[int, ast.AST]) -> bool:
    """Whether ``node`` is in a ``return`` (which ends the call: no change follows)."""
    walk: Optional[ast.AST] = node
    while walk is not None:
        if isinstance(walk, ast.Return):
            return True
        walk = ancestors.get(id(walk))
    return False


def _shared_use(it: "Interpreter", name: str, change: ast.stmt) -> Optional[ast.AST]:
    """Where the function may make ``name``'s object another's before ``change``: an
    assignment that is not a new list, or a use that keeps the object; None if nowhere."""
    tree = it.ctx.source.tree
    ancestors = parents(it)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            if not fresh(node.value):
                return node
        if isinstance(node, ast.NamedExpr) and node.target.id == name:
            if not fresh(node.value):
                return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id == name and not fresh(node.value):
                return node
        if isinstance(node, (ast.comprehension, ast.For)) and any(
            isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.target)
        ):
            return node
    limit = before(change, ancestors)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Load)
            and (node.lineno, node.col_offset) < limit
            and not reads(node, ancestors[id(node)], ancestors)
        ):
            return node
    return None
