"""Assignment expressions, ``(name := value)``: in a condition, an operand, a comprehension.

Python evaluates the value once, in the expression's place in its evaluation order, binds the
name, and the expression is the value. The binding happens only where the expression is
evaluated: under a short circuit (``a and (m := f())``) or in one branch of a conditional
expression, the name takes the value where that operand runs and elsewhere keeps the value it
had, or stays unbound (a :class:`~mapwithstate.pyfunc.paths.BoundIf`: reading it there fails
the query with Python's ``UnboundLocalError``, as a ``for`` loop's target after no iteration).

In a comprehension the name binds in the function's scope (PEP 572): after the comprehension
it holds the value of the last element that evaluated it. A compiled comprehension evaluates
each element in a lambda, so the compiler takes a walrus there for the comprehension's own
use of the name only: one the function reads outside the comprehension, or that holds a value
before it, is refused with the way out (a ``for`` loop, whose variables carry from one element
to the next). A walrus in a lambda (a ``key=``) is refused.
"""

import ast
from typing import TYPE_CHECKING, Any, Optional

from mapwithstate.pyfunc.paths import BoundIf, MaybeUnassigned, merge_values
from mapwithstate.pyfunc.values import Value, c_or

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["named_expression"]

_SCOPES = (ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp, ast.Lambda)


def named_expression(it: "Interpreter", node: ast.NamedExpr) -> Any:
    """The value of ``(name := value)``, binding ``name`` where the expression runs."""
    name = node.target.id
    if name == "state":
        raise it.ctx.refuse(node, "assignment to state", "change the state with state.update(...)")
    scope = _enclosing_scope(it, node)
    if scope is not None:
        return _in_comprehension(it, node, scope)
    value = it.expression(node.value)
    guard = it.ctx.guard
    if guard is it.statement_guard:
        # Evaluated wherever the statement runs: a plain assignment.
        it.assign(node.target, value)
        return it.path.env[name]
    shared = it.ctx.share(value)
    if not isinstance(shared, Value):
        raise it.ctx.refuse(
            node,
            "a walrus binding a dict display under a condition",
            "assign the dict on a line of its own",
        )
    old = it.path.env.get(name)
    new: Any
    if old is None:
        new = BoundIf(shared, guard, node.lineno)
    elif isinstance(old, MaybeUnassigned):
        new = old
    else:
        before = old.value if isinstance(old, BoundIf) else old
        merged = merge_values(guard, shared, before)
        if not isinstance(merged, Value):
            raise it.ctx.refuse(
                node,
                f"variable {name!r} bound by a walrus to a {shared.type} where it holds "
                f"a {getattr(before, 'type', type(before).__name__)}",
                "give it one type on every path (a Column has one type)",
            )
        new = (
            BoundIf(merged, c_or(guard, old.bound), old.line)
            if isinstance(old, BoundIf)
            else merged
        )
    it.path.env[name] = new
    return shared


def _in_comprehension(it: "Interpreter", node: ast.NamedExpr, scope: ast.AST) -> Value:
    """A walrus inside a comprehension: bound for the rest of the element's evaluation."""
    name = node.target.id
    if isinstance(scope, ast.Lambda):
        raise it.ctx.refuse(node, "a walrus in a lambda", "compute the value in the lambda's body")
    outermost = scope
    walk: Optional[ast.AST] = scope
    parents = it.ctx.source.parents
    while walk is not None:
        if isinstance(walk, _SCOPES):
            outermost = walk
        walk = parents.get(id(walk))
    inside = {id(n) for n in ast.walk(outermost)}
    read_outside = any(
        isinstance(n, ast.Name)
        and n.id == name
        and isinstance(n.ctx, ast.Load)
        and id(n) not in inside
        for n in ast.walk(it.ctx.source.tree)
    )
    if read_outside or name in it.path.env:
        where = "read after it" if read_outside else "assigned before it"
        raise it.ctx.refuse(
            node,
            f"a walrus in a comprehension binding {name!r}, {where}",
            "Python binds it in the function's scope, to the last element's value: "
            "compute it in a for loop instead",
        )
    value = it.value(node.value)
    # Not named (ctx.share): the value is of the element, inside the comprehension's lambda.
    it.path.env[name] = value
    return value


def _enclosing_scope(it: "Interpreter", node: ast.AST) -> Optional[ast.AST]:
    """The innermost comprehension or lambda holding ``node``, if any."""
    parents = it.ctx.source.parents
    walk = parents.get(id(node))
    while walk is not None:
        if isinstance(walk, _SCOPES):
            return walk
        walk = parents.get(id(walk))
    return None
