"""Which values of a state function are a ``collections.Counter``, ``defaultdict`` or
``deque``, and the uses of them the compiler follows.

Compiled, a Counter or a defaultdict is a dict (a Spark map) and a deque a list (an array):
what sets them apart is how some operations behave (``c[x]`` is 0 for a missing ``x``,
``d[k]`` inserts the default, ``append`` drops from the other end past ``maxlen``). A Column
does not carry that, so it is known from the source: a local variable is one of them where
every assignment to it is that constructor's call (``c = Counter(...)``), with the same
``defaultdict`` factory or ``maxlen`` each time (a constant, or an expression of parameters
the function never assigns, the same wherever it is read); and so is a constructor's call used
directly (``Counter(words).most_common(1)``). Any other assignment to such a variable is
refused, and so is every use where the type would show and the compiler does not follow it
(``str(c)``, ``c == d``, ``d + [x]``, ``other = c``, emitting or returning it): each refusal
names the way out (``dict(c)``, ``list(d)``).
"""

import ast
import builtins as py
import collections
import statistics
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from mapwithstate.pyfunc.source import NOT_FOUND, FunctionSource

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["Kind", "constructor", "kind_of", "variables", "DEQUE_IN_PLACE", "FACTORIES"]

#: The defaultdict factories compiled, and the default each makes (as Python source).
FACTORIES: Dict[Any, str] = {py.int: "0", py.float: "0.0", py.str: "''", py.list: "[]"}

#: The methods that change a deque, called as a statement (or ``x = d.pop()``).
DEQUE_IN_PLACE = (
    "append",
    "appendleft",
    "pop",
    "popleft",
    "extend",
    "extendleft",
    "clear",
    "remove",
    "reverse",
)
_METHODS = {
    "Counter": ("get", "keys", "values", "items", "most_common", "total", "update", "pop", "clear"),
    "defaultdict": ("get", "keys", "values", "items", "pop", "setdefault", "update", "clear"),
    "deque": DEQUE_IN_PLACE + ("count", "index"),
}
#: The builtins (and statistics functions) a Counter, defaultdict or deque may be passed to:
#: they read its items (a dict's keys) as they read a dict's or a list's.
_READERS = {
    id(f)
    for f in (
        py.len,
        py.list,
        py.sorted,
        py.sum,
        py.min,
        py.max,
        py.any,
        py.all,
        py.set,
        py.dict,
        py.reversed,
        py.enumerate,
        py.zip,
        collections.Counter,
        collections.deque,
    )
}
_READERS |= {
    id(getattr(statistics, name))
    for name in (
        "mean",
        "fmean",
        "median",
        "median_low",
        "median_high",
        "mode",
        "pvariance",
        "variance",
        "pstdev",
        "stdev",
    )
}
#: The methods of another value that keep their argument itself (its alias).
_KEEPING = ("append", "insert", "setdefault", "appendleft")


@dataclass(frozen=True)
class Kind:
    """A Counter, defaultdict or deque: ``name`` is its class's name, ``default`` a
    defaultdict's default as Python source (``"0"``, ``"[]"``), ``maxlen`` a deque's (None
    for no limit): a constant int, or the source of an expression known only at run time
    (``"n"``), which ``maxlen_expr`` is."""

    name: str
    default: Optional[str] = None
    maxlen: Optional[Union[int, str]] = None
    maxlen_expr: Optional[ast.expr] = field(default=None, compare=False, hash=False)

    def __str__(self) -> str:
        return self.name


def _resolved(source: FunctionSource, node: ast.expr) -> Any:
    """The object ``node`` (a free name or ``module.name``) names when compiling, or None."""
    if isinstance(node, ast.Name) and node.id not in source.local_names:
        found = source.lookup(node.id)
        return None if found is NOT_FOUND else found
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        module = _resolved(source, node.value)
        if isinstance(module, types.ModuleType):
            return getattr(module, node.attr, None)
    return None


def constructor(source: FunctionSource, node: ast.AST) -> Optional[Kind]:
    """The kind ``node`` makes where it is a call of ``Counter``, ``defaultdict`` or
    ``deque``, else None; a factory or ``maxlen`` the compiler does not take is refused."""
    if not isinstance(node, ast.Call):
        return None
    target = _resolved(source, node.func)
    if target is collections.Counter:
        return Kind("Counter")
    if target is collections.defaultdict:
        factory = _resolved(source, node.args[0]) if node.args else None
        if len(node.args) != 1 or node.keywords or id(factory) not in map(id, FACTORIES):
            raise source.error(
                node,
                "defaultdict() without one of the factories int, float, str, list",
                "defaultdict(int), defaultdict(float), defaultdict(str) or defaultdict(list), "
                "with no other argument; or a dict and d.get(k, default)",
            )
        return Kind("defaultdict", default=FACTORIES[factory])
    if target is collections.deque:
        given = node.args[1] if len(node.args) > 1 else None
        for keyword in node.keywords:
            if keyword.arg == "maxlen":
                given = keyword.value
            elif keyword.arg != "iterable":
                raise source.error(node, f"deque() with {keyword.arg}=", "deque(iterable, maxlen)")
        maxlen = _maxlen(source, given)
        if isinstance(maxlen, ast.expr):
            return Kind("deque", maxlen=ast.unparse(maxlen), maxlen_expr=maxlen)
        return Kind("deque", maxlen=maxlen)
    return None


def _maxlen(source: FunctionSource, node: Optional[ast.expr]) -> Union[None, int, ast.expr]:
    """A deque's ``maxlen``: None, a constant int (a literal or a module constant), or an
    expression with the same value wherever the function reads it (of literals, module
    constants and parameters the function never assigns), evaluated where it is used."""
    if node is None:
        return None
    value: Any = NOT_FOUND
    if isinstance(node, ast.Constant):
        value = node.value
    elif isinstance(node, ast.Name) and node.id not in source.local_names:
        value = source.lookup(node.id)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise source.error(
                node,
                f"deque(maxlen={value})",
                "Python raises ValueError: maxlen must be non-negative",
            )
        return value
    if _unchanging(source, node):
        return node
    raise source.error(
        node,
        "a deque's maxlen that may change during the call",
        "write maxlen as a literal, a module constant or an expression of parameters the "
        "function does not assign (maxlen=n); or keep a list and cap it: xs = (xs + [x])[-n:]",
    )


def _unchanging(source: FunctionSource, node: ast.expr) -> bool:
    """Whether ``node`` has one value throughout a call: literals, module constants and
    parameters never assigned, combined by arithmetic."""
    parameters = {a.arg for a in source.tree.args.args}
    assigned = {
        n.id
        for n in ast.walk(source.tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    for part in ast.walk(node):
        if isinstance(part, ast.Name):
            if part.id in assigned or part.id == "state":
                return False
            if part.id not in parameters and source.lookup(part.id) is NOT_FOUND:
                return False
        elif not isinstance(
            part, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load)
        ):
            return False
    return True


def variables(source: FunctionSource) -> Dict[str, Kind]:
    """The local variables holding a Counter, defaultdict or deque, by name (made once per
    source); refuses another assignment to one of them and every use not followed."""
    found: Dict[str, Kind] = {}
    first: Dict[str, ast.AST] = {}
    for node in ast.walk(source.tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            kind = constructor(source, node.value)
            name = node.targets[0].id
            if kind is None:
                continue
            if name in found and found[name] != kind:
                raise source.error(
                    node,
                    f"{name} assigned a {_described(kind)} and (line "
                    f"{getattr(first[name], 'lineno', 0)}) a {_described(found[name])}",
                    "use one name for each",
                )
            found.setdefault(name, kind)
            first.setdefault(name, node)
    for node in ast.walk(source.tree):
        _check_binding(source, node, found)
    parents = source.parents
    for node in ast.walk(source.tree):
        used: Optional[Kind] = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in found:
            used = found[node.id]
        elif isinstance(node, ast.Call):
            used = constructor(source, node)
        if used is not None:
            assert isinstance(node, ast.expr)
            _check_use(source, node, parents.get(id(node)), used, parents)
    return found


def _described(kind: Kind) -> str:
    if kind.name == "deque":
        return f"deque(maxlen={kind.maxlen})"
    if kind.name == "defaultdict":
        return f"defaultdict of {kind.default}"
    return kind.name


def _check_binding(source: FunctionSource, node: ast.AST, found: Dict[str, Kind]) -> None:
    """Refuses a binding of a Counter/defaultdict/deque variable that is not its
    constructor's call."""
    targets: List[ast.AST] = []
    if isinstance(node, ast.Assign):
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and constructor(source, node.value) is not None
        ):
            return
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.For)):
        targets = [node.target]
    elif isinstance(node, ast.comprehension):
        targets = [node.target]
    elif isinstance(node, ast.FunctionDef):
        targets = [ast.Name(id=a.arg) for a in node.args.args]
    for target in targets:
        for name in _bound(target):
            if name.id in found:
                kind = found[name.id]
                raise source.error(
                    node,
                    f"{name.id} (a {kind}) assigned another value",
                    f"a {kind} variable is assigned only {kind.name}(...): use another name "
                    "for the other value",
                )


def _bound(target: ast.AST) -> List[ast.Name]:
    """The names an assignment to ``target`` binds (not an item's or an attribute's owner)."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound(element)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []


def _check_use(
    source: FunctionSource,
    node: ast.expr,
    parent: Optional[ast.AST],
    kind: Kind,
    parents: Dict[int, ast.AST],
) -> None:
    """Refuses a use of a Counter/defaultdict/deque the compiler does not follow."""
    if parent is None:
        return
    construct = f"a {kind} used here"
    hint = _way_out(kind)
    if isinstance(parent, ast.Assign) and parent.value is node:
        if (
            isinstance(node, ast.Call)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0], ast.Name)
        ):
            return  # its variable's constructor
        construct = f"a {kind} assigned to another name"
    elif isinstance(parent, ast.Subscript) and parent.value is node:
        if kind.name == "deque" and isinstance(parent.slice, ast.Slice):
            raise source.error(
                parent,
                "a slice of a deque",
                "Python raises TypeError: sequence index must be integer; slice list(d)",
            )
        if kind.name == "Counter" and isinstance(parent.ctx, ast.Del):
            raise source.error(
                parent,
                "del of a Counter's item",
                "a Counter ignores a missing key where a dict raises: c.pop(k, None)",
            )
        if kind.name == "defaultdict" and isinstance(parent.ctx, ast.Load):
            if not _inserting_read(parent, parents):
                raise source.error(
                    parent,
                    "a defaultdict's d[k] read inside an expression",
                    f"reading d[k] inserts the default: write it as an assignment's whole "
                    f"value (x = d[k]), as d[k] += ..., d[k].append(...), or read with "
                    f"d.get(k, {kind.default}), which inserts nothing",
                )
        return
    elif isinstance(parent, ast.Attribute) and parent.value is node:
        if kind.name == "deque" and parent.attr == "maxlen":
            return
        call = parents.get(id(parent))
        called = isinstance(call, ast.Call) and call.func is parent
        key_function = isinstance(call, ast.keyword) and parent.attr == "get"
        if (called or key_function) and parent.attr in _METHODS[kind.name]:
            changes = parent.attr in ("update", "pop", "clear", "setdefault") + DEQUE_IN_PLACE
            if changes and not isinstance(node, ast.Name) and parent.attr not in ("count", "index"):
                raise source.error(parent, f"{kind}.{parent.attr}() of a new {kind}", hint)
            return
        raise source.error(
            parent,
            f"{kind}.{parent.attr}",
            f"supported: {', '.join(_METHODS[kind.name])}"
            + ("; d.maxlen" if kind.name == "deque" else ""),
        )
    elif isinstance(parent, ast.Call) and node in parent.args:
        func = parent.func
        target = _resolved(source, func)
        if target is not None and id(target) in _READERS:
            return
        if (
            isinstance(func, ast.Attribute)
            and func.attr not in _KEEPING
            and not (isinstance(func.value, ast.Name) and func.value.id == "state")
        ):
            return  # a method reading it: xs.extend(d), ", ".join(d)
        construct = f"a {kind} passed to {ast.unparse(func)}()"
    elif isinstance(parent, ast.keyword):
        call = parents.get(id(parent))
        stores = (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "update"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "state"
        )
        if stores and kind.name != "deque":
            return  # stored in a MAP field, as mapwithstate.testing stores a dict
        construct = f"a {kind} stored in the state" if stores else f"a {kind} as a keyword argument"
    elif isinstance(parent, ast.Compare):
        if node in parent.comparators and all(
            isinstance(op, (ast.In, ast.NotIn))
            for op, right in zip(parent.ops, parent.comparators, strict=True)
            if right is node
        ):
            return
        construct = f"a {kind} compared"
    elif isinstance(parent, ast.comprehension) and parent.iter is node:
        return
    elif isinstance(parent, ast.For) and parent.iter is node:
        return
    elif isinstance(parent, (ast.If, ast.IfExp, ast.Assert)) and parent.test is node:
        return
    elif isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
        return
    elif isinstance(parent, ast.Expr):
        return
    raise source.error(node, construct, hint)


def _inserting_read(subscript: ast.Subscript, parents: Dict[int, ast.AST]) -> bool:
    """Whether a defaultdict's ``d[k]`` is read where the compiler inserts the default: an
    assignment's whole value, or the owner of a method call made as a statement (``d[k].append
    (x)``)."""
    parent = parents.get(id(subscript))
    if isinstance(parent, ast.Assign) and parent.value is subscript:
        return True
    if isinstance(parent, ast.Attribute):
        call = parents.get(id(parent))
        return isinstance(call, ast.Call) and isinstance(parents.get(id(call)), ast.Expr)
    return False


def _way_out(kind: Kind) -> str:
    if kind.name == "deque":
        return (
            "a deque compiles as a list where it is read; pass list(d) where a list is "
            "wanted (to store, emit, compare, format or add to it)"
        )
    return (
        f"a {kind} compiles as a dict where it is read; pass dict(c) where a dict is wanted "
        "(to emit, compare or format it)"
    )


def kind_of(it: "Interpreter", node: ast.AST) -> Optional[Kind]:
    """The kind of Counter/defaultdict/deque ``node`` is (a variable holding one, or a
    constructor's call), else None."""
    source = it.ctx.source
    if isinstance(node, ast.Name):
        return source.collection_variables.get(node.id)
    return constructor(source, node)
