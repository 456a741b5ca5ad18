"""In-place changes one level down: an item of a local list or dict, changed inside it.

``d[k].append(v)``, ``d.setdefault(k, []).append(v)``, ``d[k].pop()``, ``xs[i].append(v)``,
``d[k][i] = v``, ``d[k][i] += v`` and ``d[k] += ys`` (a list item, which Python extends in
place): Python changes the inner object, which stays the owner's item; compiled, the owner's
Column takes the changed item in its place. Python's order holds: the owner and the key, the
item (``KeyError``, ``IndexError``; ``setdefault`` inserting its default), then the change as
on a local list or dict (:mod:`~mapwithstate.pyfunc.in_place`,
:mod:`~mapwithstate.pyfunc.mutations`, whose rules and failures it reuses).

The compiled change reaches the owner only, so it is exact only where no other name can hold
the inner object. On top of the owner's own rule (:func:`mutations.owned_container
<mapwithstate.pyfunc.mutations.owned_container>`: no other name holds the owner):

- the owner's items are its own: every assignment to it makes new inner objects (a display or
  a comprehension of new lists or dicts) or copies a state field's or a parameter's
  (``g = dict(state.groups or {})``, ``list(xss)``), and every item stored into it is a new
  object (``d[k] = [v]``, ``d.setdefault(k, [])``; never ``d[k] = ys`` nor ``d.extend(xss)``);
- before the change (in a loop: anywhere in it), the owner and its items are only read
  (``len(d[k])``, ``d[k][0]``, ``k in d``), never kept (``inner = d[k]``, ``yield {"xs":
  d[k]}``, ``for x in d[k]``, ``list(d)``, ``d.values()``);
- a copied state field or parameter shares its inner objects with the owner: after the change
  it may not be read on that path (the path records it, see ``PathState.stale``) until it
  holds a new value (``state.update(groups=g)``).

Anything else is refused, naming the use and the change. Deeper changes
(``d[a][b].append(v)``) are refused with the way out.
"""

import ast
from typing import TYPE_CHECKING, Callable, List, Optional, Set, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.pytypes import NONE, PyType, dict_of, list_of, to_spark, unify
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["is_item", "item_type", "changed_item", "stale_read"]

#: A change of the inner object: its new value and what the change returns.
Change = Callable[[Value], Tuple[Value, Optional[Value]]]

_HINT = (
    "copy the item into a local, change it and store it back: "
    "inner = list(d[k]); inner.append(v); d[k] = inner"
)
#: Calls whose result holds none of their argument's inner objects.
_SCALAR_CALLS = {"len", "bool", "any", "all", "str", "int", "float", "abs", "round"}
#: Methods of a dict or list whose result holds none of its inner objects.
_SCALAR_METHODS = {"keys", "count", "index"}
#: Methods changing a list or dict, whose results are not items it keeps (pop's item leaves).
_CHANGING_METHODS = {"append", "insert", "remove", "pop", "clear", "sort", "reverse"}
#: Calls that copy a state field or parameter into a new container (its items shared).
_COPIES = {"dict", "list"}


def is_item(node: ast.AST) -> bool:
    """Whether ``node`` reads an item of a container: ``d[k]`` (not a slice) or
    ``d.setdefault(k, ...)``."""
    if isinstance(node, ast.Subscript):
        return not isinstance(node.slice, ast.Slice)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "setdefault"
    )


def item_type(it: "Interpreter", node: ast.AST) -> Optional[PyType]:
    """The type of the item ``node`` is: ``d[k]`` (an item of a local list or dict, not a
    slice) or ``d.setdefault(k, ...)``, also deeper; None where ``node`` is neither."""
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        owner: ast.AST = node.value
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "setdefault"
    ):
        owner = node.func.value
    else:
        return None
    if isinstance(owner, ast.Name):
        base = it.path.env.get(owner.id)
        if not isinstance(base, Value):
            return None
        container = base.type
    else:
        found = item_type(it, owner)
        if found is None:
            return None
        container = found
    if container.kind == "list" and isinstance(node, ast.Subscript):
        return container.args[0]
    if container.kind == "dict":
        return container.args[1]
    return None


def changed_item(
    it: "Interpreter", statement: ast.stmt, item: ast.AST, change: Change
) -> Tuple[str, Value, Value]:
    """Runs ``change`` on the item ``item`` reads (``d[k]`` or ``d.setdefault(k, ...)``) of a
    local list or dict: the owner's variable, its new value, and what the change returns."""
    from mapwithstate.pyfunc.builtins import method_argument
    from mapwithstate.pyfunc.in_place import setdefault
    from mapwithstate.pyfunc.mutations import owned_container
    from mapwithstate.pyfunc.sequences import item as item_of

    is_setdefault = isinstance(item, ast.Call)
    container: Optional[ast.AST] = None
    if isinstance(item, ast.Call) and isinstance(item.func, ast.Attribute):
        container = item.func.value
    elif isinstance(item, ast.Subscript):
        container = item.value
    if not isinstance(container, ast.Name):
        raise it.ctx.refuse(
            statement,
            "an in-place change of an item of an item (two levels down)",
            _HINT,
        )
    name = container.id
    verb = "setdefault(...)" if is_setdefault else "[...]"
    owner_name, base = owned_container(
        it, statement, container, "in-place change of an item", f"{verb} changed in place"
    )
    _check_owner(it, name, statement)
    base = (
        operators.attribute_of_none(it.ctx, statement, base, "setdefault")
        if is_setdefault
        else operators.none_check(it.ctx, statement, base, "'NoneType' object is not subscriptable")
    )
    where: Column
    if isinstance(item, ast.Call):
        if item.keywords or any(isinstance(a, ast.Starred) for a in item.args):
            raise it.ctx.refuse(
                item, "setdefault() with keyword or starred arguments", "d.setdefault(k, [])"
            )
        if base.type.kind != "dict":
            raise it.ctx.refuse(item, f"setdefault() of a {base.type}", "setdefault is a dict's")
        args = [method_argument(it, a) for a in item.args]
        holder, inner = setdefault(it, item, base, args)
        key_type = holder.type.args[0]
        where = (
            args[0].column if args[0].type == key_type else args[0].column.cast(to_spark(key_type))
        )
    else:
        assert isinstance(item, ast.Subscript)
        holder = base
        inner, where = item_of(it, item, base, it.value(item.slice))
    # The change on the item read out of the owner: its checks, in Python's order, and what
    # it returns.
    new_inner, result = change(inner)
    element = holder.type.args[0] if holder.type.kind == "list" else holder.type.args[1]
    if element in (NONE, list_of(NONE)) and new_inner.type != element:
        # Items of no type yet (defaultdict(list)'s []) take the changed item's.
        joined = unify(element, new_inner.type)
        if joined is not None:
            retyped = (
                list_of(joined)
                if holder.type.kind == "list"
                else dict_of(holder.type.args[0], joined)
            )
            holder = Value(holder.column.cast(to_spark(retyped)), retyped, holder.nullable)
            element = joined
    from mapwithstate.pyfunc.mutations import stored

    stored(it, statement, holder, element, new_inner)

    def rebuilt(own: Column) -> Column:
        """The changed item made of the owner's own item in its place (``own``, a lambda
        variable), rather than of another copy of the owner: the change once more, its checks
        (made above) left out, as a loop's body inside its fold."""
        ctx = it.ctx
        saved = (ctx.failures, ctx.carriers, ctx.self_checks, ctx.guard)
        ctx.failures, ctx.carriers, ctx.self_checks, ctx.guard = [], [], False, True
        try:
            new, _ = change(Value(own, inner.type, inner.nullable))
            return stored(it, statement, holder, element, new)
        finally:
            ctx.failures, ctx.carriers, ctx.self_checks, ctx.guard = saved

    column: Column
    if holder.type.kind == "list":
        column = F.transform(
            holder.column,
            lambda e, i: F.when(i.cast("bigint") == where, rebuilt(e)).otherwise(e),
        )
    else:
        column = F.transform_values(
            holder.column, lambda k, v: F.when(k == where, rebuilt(v)).otherwise(v)
        )
    for root in _roots(it, name):
        it.path.stale.setdefault(root, (statement.lineno, name))
    nothing = Value(F.lit(None), PyType("none"), True, None)
    return owner_name, Value(column, holder.type, False), result or nothing


def stale_read(it: "Interpreter", node: ast.AST, key: str) -> None:
    """Refuses a read of ``key`` (a parameter, or ``state.<field>``) whose inner objects a
    change of a copy's items changed in place on this path."""
    found = it.path.stale.get(key)
    if found is None:
        return
    line, owner = found
    renewal = (
        f"state.update({key[len('state.') :]}={owner})"
        if key.startswith("state.")
        else f"{key} = {owner}"
    )
    raise it.ctx.refuse(
        node,
        f"{key} read after {owner}'s item was changed in place (line {line}), where {owner} "
        f"is a copy of {key}: Python's {key} holds the same inner list or dict",
        f"read {key} before the change, or give it the new value first ({renewal})",
    )


def _parameters(it: "Interpreter") -> Set[str]:
    return {a.arg for a in it.ctx.source.tree.args.args} - {"state", "rows"}


def _copied(it: "Interpreter", value: ast.expr) -> Optional[str]:
    """What ``value`` copies, if it copies a state field or a parameter (``dict(state.groups
    or {})``, ``list(xss)``): ``state.<field>`` or the parameter's name."""
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in _COPIES
        and len(value.args) == 1
        and not value.keywords
    ):
        return None
    node = value.args[0]
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2:
        empty = node.values[1]
        if (isinstance(empty, ast.List) and not empty.elts) or (
            isinstance(empty, ast.Dict) and not empty.keys
        ):
            node = node.values[0]
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "state"
    ):
        return f"state.{node.attr}"
    if isinstance(node, ast.Name) and node.id in _parameters(it):
        return node.id
    return None


def _new_items(value: ast.expr) -> bool:
    """Whether ``value`` makes a list or dict whose items are all new objects."""
    from mapwithstate.pyfunc.mutations import fresh

    if isinstance(value, ast.List):
        return all(fresh(e) for e in value.elts)
    if isinstance(value, ast.ListComp):
        return fresh(value.elt)
    if isinstance(value, ast.DictComp):
        return fresh(value.value)
    if isinstance(value, ast.IfExp):
        return _new_items(value.body) and _new_items(value.orelse)
    # An empty defaultdict(list): its items are the new lists it makes.
    func = value.func if isinstance(value, ast.Call) else None
    return (isinstance(func, ast.Name) and func.id == "defaultdict") or (
        isinstance(func, ast.Attribute) and func.attr == "defaultdict"
    )


def _assignments(it: "Interpreter", name: str) -> List[ast.expr]:
    """The values the function assigns ``name``."""
    values: List[ast.expr] = []
    for node in ast.walk(it.ctx.source.tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            values.append(node.value)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name):
            if node.target.id == name and node.value is not None:
                values.append(node.value)
    return values


def _roots(it: "Interpreter", name: str) -> Set[str]:
    """The state fields and parameters whose inner objects ``name``'s items may be."""
    return {r for r in (_copied(it, v) for v in _assignments(it, name)) if r is not None}


def _check_owner(it: "Interpreter", name: str, change: ast.stmt) -> None:
    """Refuses an owner whose items may be other objects' (see the module)."""
    from mapwithstate.pyfunc.mutations import fresh

    for value in _assignments(it, name):
        if not _new_items(value) and _copied(it, value) is None:
            raise it.ctx.refuse(
                value,
                f"{name} made of other lists' or dicts' items, changed in place on line "
                f"{change.lineno}",
                "make it a copy of a state field or parameter (g = dict(state.groups or {})) "
                "or of new items ([[] for _ in range(n)], {k: [v] for ...})",
            )
    for node in ast.walk(it.ctx.source.tree):
        stored: Optional[ast.expr] = None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
            for t in node.targets
        ):
            stored = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
        ):
            method, args = node.func.attr, node.args
            if method in ("extend", "update"):
                raise it.ctx.refuse(
                    node,
                    f"{name}.{method}() of another container's items, whose items "
                    f"{name} changes in place (line {change.lineno})",
                    f"add new items one by one: {name}[k] = list(v)",
                )
            position = {"setdefault": 1, "append": 0, "insert": 1}.get(method)
            if position is not None and len(args) > position:
                stored = args[position]
        if stored is not None and not fresh(stored):
            raise it.ctx.refuse(
                stored,
                f"an item of {name} that may be another name's object, where {name}'s "
                f"items change in place (line {change.lineno})",
                "store a new list or dict: list(ys), [v], {}",
            )
    kept = _kept_use(it, name, change)
    if kept is not None:
        raise it.ctx.refuse(
            kept,
            f"{name}'s item kept here may be changed in place later (line {change.lineno}), "
            "as Python's object is the same",
            "read the item where it is used (len(d[k]), d[k][0]) or copy it: list(d[k])",
        )


def _kept_use(it: "Interpreter", name: str, change: ast.stmt) -> Optional[ast.AST]:
    """A use of ``name`` before ``change`` (in a loop: anywhere in it) that may keep one of
    its items: anything but reading an item, a method's scalar result or a test."""
    from mapwithstate.pyfunc.mutations import before, parents, reads, returned

    ancestors = parents(it)
    limit = before(change, ancestors)
    for node in ast.walk(it.ctx.source.tree):
        if not (
            isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Load)
            and (node.lineno, node.col_offset) < limit
        ):
            continue
        parent = ancestors[id(node)]
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if not isinstance(parent.ctx, ast.Load):
                continue  # an item stored or deleted
            if isinstance(parent.slice, ast.Slice):
                return parent  # a slice holds the items themselves
            use: ast.AST = parent
        elif isinstance(parent, ast.Attribute):
            call = ancestors.get(id(parent))
            if parent.attr in _SCALAR_METHODS or parent.attr in _CHANGING_METHODS:
                continue
            if parent.attr not in ("get", "setdefault") or not (
                isinstance(call, ast.Call) and call.func is parent
            ):
                return parent
            use = call
        elif isinstance(parent, (ast.Compare, ast.FormattedValue)):
            continue
        elif isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name):
            if parent.func.id in _SCALAR_CALLS:
                continue
            return parent
        elif isinstance(parent, (ast.If, ast.IfExp, ast.Assert, ast.BoolOp, ast.UnaryOp)):
            continue
        elif returned(node, ancestors):
            continue
        else:
            return node
        holder = ancestors[id(use)]
        if isinstance(holder, ast.Attribute):
            continue  # a method of the item: d[k].append(v), len(d[k]) of its result
        if not reads(use, holder, ancestors):
            return use
    return None
