"""``map()`` and ``filter()`` as the generator expressions they are.

``map(f, xs)`` yields ``f(x)`` for each item, lazily, and ``filter(f, xs)`` each item ``f``
holds true for (``filter(None, xs)``: each true item); ``map(f, a, b)`` calls ``f(x, y)`` over
``zip(a, b)``, stopping at the shortest. A generator expression means the same, so the
function's tree is rewritten before it compiles: every consumer of an iterable (``list``,
``sum``, ``",".join``, ``any``, ...) then takes them as it takes a generator, with its
laziness (``any(map(...))`` stops at the first true item). Unpacked (``h, m =
map(int, s.split(":"))``), it is the list of the items, with the unpacking's length check.
Iterated by a comprehension or a ``for`` loop, the item is mapped where the iteration
reaches it (``for x in map(f, xs)`` is ``for item in xs: x = f(item)``), so a failure
interleaves with the body's as Python's would.

``f`` is a lambda (its parameters are the comprehension's targets), a name (``str``,
``float``, a local lambda, ``math.sqrt``) or ``str.<method>`` (``str.strip``: called on the
item). The rewrite applies only where ``map``/``filter`` are Python's builtins (not a local
or module name shadowing them).
"""

import ast
import builtins
from typing import Any, Dict, List, Optional

__all__ = ["rewritten"]

_ITEM = "__mws_mapped"


def rewritten(tree: ast.FunctionDef, scope: Dict[str, Any], local_names: Any) -> ast.FunctionDef:
    """``tree`` with its builtin ``map()``/``filter()`` calls as generator expressions."""
    names = {
        name
        for name in ("map", "filter")
        if scope.get(name) is getattr(builtins, name) and name not in local_names
    }
    if not names:
        return tree
    return _Rewriter(names).visit(tree)


class _Rewriter(ast.NodeTransformer):
    def __init__(self, names: Any) -> None:
        self.names = names

    def visit_Assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        # Unpacked, the items are a list's, with its length check.
        if (
            isinstance(node.value, ast.GeneratorExp)
            and all(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets)
            and getattr(node.value, "_mws_mapped", False)
        ):
            listed = ast.ListComp(elt=node.value.elt, generators=node.value.generators)
            node.value = ast.copy_location(listed, node.value)
        return node

    def _fused(self, node: Any) -> Any:
        """A comprehension whose clause iterates a ``map``/``filter``: the mapped items' own
        clause, then ``for target in [f(item)]``, which binds the target as the lazy
        iteration would, item by item."""
        self.generic_visit(node)
        node.generators = [fused for clause in node.generators for fused in _expanded(clause)]
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _fused

    def visit_For(self, node: ast.For) -> Any:
        """``for x in map(f, xs)``: ``for item in xs: x = f(item)`` (``filter``: items it
        rejects skipped first), the body then run as written."""
        self.generic_visit(node)
        return _unmapped_loop(node)

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        func = node.func
        if not (isinstance(func, ast.Name) and func.id in self.names) or node.keywords:
            return node
        if any(isinstance(a, ast.Starred) for a in node.args):
            return node
        if func.id == "map" and len(node.args) >= 2:
            generator = _mapped(node.args[0], node.args[1:])
        elif func.id == "filter" and len(node.args) == 2:
            generator = _filtered(node.args[0], node.args[1])
        else:
            return node  # Python's TypeError: left to the compiler's refusal
        if generator is None:
            return node
        generator._mws_mapped = True  # type: ignore[attr-defined]
        for child in ast.walk(generator):
            if not hasattr(child, "lineno"):
                ast.copy_location(child, node)
        return ast.copy_location(generator, node)


def _expanded(clause: ast.comprehension) -> List[ast.comprehension]:
    """``clause``, or where it iterates a ``map``/``filter`` (itself maybe over another), the
    clauses iterating their items with ``for target in [item]`` last."""
    inner = clause.iter
    if not (isinstance(inner, ast.GeneratorExp) and getattr(inner, "_mws_mapped", False)):
        return [clause]
    one = ast.copy_location(ast.List(elts=[inner.elt], ctx=ast.Load()), inner)
    last = ast.comprehension(target=clause.target, iter=one, ifs=clause.ifs, is_async=0)
    return [fused for c in inner.generators for fused in _expanded(c)] + [last]


def _targets(function: ast.expr, count: int) -> Optional[List[str]]:
    """The lambda's parameter names, where it takes ``count`` plain parameters."""
    if not isinstance(function, ast.Lambda):
        return [f"{_ITEM}{i}" for i in range(count)]
    arguments = function.args
    if (
        len(arguments.args) != count
        or arguments.posonlyargs
        or arguments.kwonlyargs
        or arguments.vararg
        or arguments.kwarg
        or arguments.defaults
    ):
        return None
    return [a.arg for a in arguments.args]


def _applied(function: ast.expr, names: List[str]) -> ast.expr:
    """``function`` called on the items named ``names``."""
    if isinstance(function, ast.Lambda):
        return function.body
    items: List[ast.expr] = [ast.Name(id=n, ctx=ast.Load()) for n in names]
    if (
        isinstance(function, ast.Attribute)
        and isinstance(function.value, ast.Name)
        and function.value.id == "str"
    ):
        method = ast.Attribute(value=items[0], attr=function.attr, ctx=ast.Load())
        return ast.Call(func=method, args=items[1:], keywords=[])
    return ast.Call(func=function, args=items, keywords=[])


def _comprehension(names: List[str], iterables: List[ast.expr], test: Optional[ast.expr]) -> Any:
    if len(names) == 1:
        target: ast.expr = ast.Name(id=names[0], ctx=ast.Store())
        iterable = iterables[0]
    else:
        target = ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names], ctx=ast.Store())
        iterable = ast.Call(func=ast.Name(id="zip", ctx=ast.Load()), args=iterables, keywords=[])
    return ast.comprehension(target=target, iter=iterable, ifs=[test] if test else [], is_async=0)


def _mapped(function: ast.expr, iterables: List[ast.expr]) -> Optional[ast.GeneratorExp]:
    names = _targets(function, len(iterables))
    if names is None:
        return None
    return ast.GeneratorExp(
        elt=_applied(function, names), generators=[_comprehension(names, iterables, None)]
    )


def _filtered(function: ast.expr, iterable: ast.expr) -> Optional[ast.GeneratorExp]:
    names = _targets(function, 1)
    if names is None:
        return None
    item = ast.Name(id=names[0], ctx=ast.Load())
    none = isinstance(function, ast.Constant) and function.value is None
    test = item if none else _applied(function, names)
    return ast.GeneratorExp(elt=item, generators=[_comprehension(names, [iterable], test)])


def _unmapped_loop(node: ast.For) -> ast.For:
    """``node`` iterating the items a ``map``/``filter`` iterates, each mapped (or tested)
    first in the body."""
    inner = node.iter
    if not (isinstance(inner, ast.GeneratorExp) and getattr(inner, "_mws_mapped", False)):
        return node
    (clause,) = inner.generators
    prologue: List[ast.stmt] = [
        ast.If(test=ast.UnaryOp(op=ast.Not(), operand=test), body=[ast.Continue()], orelse=[])
        for test in clause.ifs
    ]
    prologue.append(ast.Assign(targets=[node.target], value=inner.elt))
    for statement in prologue:
        for child in ast.walk(statement):
            if not hasattr(child, "lineno") and not isinstance(child, ast.operator):
                ast.copy_location(child, node)
    node.target = clause.target
    node.iter = clause.iter
    node.body = prologue + node.body
    return _unmapped_loop(node)  # map() of a filter(): its items in turn
