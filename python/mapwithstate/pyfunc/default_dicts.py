"""``collections.defaultdict(int | float | str | list)``: a dict (a Spark map) whose missing
key, read with ``d[k]``, is inserted with the factory's default first.

``d[k] += v`` starts from the default (``0``, ``0.0``, ``''``, ``[]``) and stores the key
last where it is new; ``d[k].append(x)`` (any change of a list item) is
``d.setdefault(k, []).append(x)``; ``x = d[k]`` is ``x = d.setdefault(k, 0)``. ``d.get(k)``
and ``k in d`` insert nothing, as in Python. A read of ``d[k]`` anywhere else (inside an
expression) is refused when compiling, naming ``d.get(k, default)``: whether it inserts would
show in ``len(d)`` and in its order. The rest is a dict's. Which values are defaultdicts is
known from the source (:mod:`~mapwithstate.pyfunc.collection_variables`).
"""

import ast
from typing import TYPE_CHECKING, Optional

from pyspark.sql import functions as F

from mapwithstate.pyfunc.collection_variables import Kind, kind_of
from mapwithstate.pyfunc.pytypes import NONE, dict_of, list_of
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["construct", "default", "rewritten"]


def construct(kind: Kind) -> Value:
    """An empty defaultdict: typed by its first item as ``{}`` is (a list factory's values
    are lists, so that ``d[k].append(x)`` changes a list item)."""
    value = list_of(NONE) if kind.default == "[]" else NONE
    return Value(F.create_map(), dict_of(NONE, value), False)


def default(kind: Kind, at: ast.AST) -> ast.expr:
    """The factory's default, as an expression placed at ``at``."""
    assert kind.default is not None
    expression = ast.parse(kind.default, mode="eval").body
    for node in ast.walk(expression):
        ast.copy_location(node, at)
    return expression


def _setdefault(it: "Interpreter", read: ast.expr) -> Optional[ast.expr]:
    """``d[k]`` of a defaultdict as ``d.setdefault(k, default)``, else None."""
    if not (isinstance(read, ast.Subscript) and isinstance(read.ctx, ast.Load)):
        return None
    kind = kind_of(it, read.value)
    if kind is None or kind.name != "defaultdict":
        return None
    call = ast.Call(
        func=ast.Attribute(value=read.value, attr="setdefault", ctx=ast.Load()),
        args=[read.slice, default(kind, read)],
        keywords=[],
    )
    for node in (call, call.func):
        ast.copy_location(node, read)
    return call


def rewritten(it: "Interpreter", statement: ast.stmt) -> ast.stmt:
    """``statement`` with a defaultdict's inserting read ``d[k]`` (an assignment's whole value,
    the owner of a method called as a statement) as ``d.setdefault(k, default)``."""
    if isinstance(statement, ast.Assign):
        call = _setdefault(it, statement.value)
        if call is not None:
            return ast.copy_location(
                ast.Assign(targets=statement.targets, value=call, type_comment=None), statement
            )
    if (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Attribute)
    ):
        owner = _setdefault(it, statement.value.func.value)
        if owner is not None:
            method = statement.value
            assert isinstance(method.func, ast.Attribute)
            func = ast.copy_location(
                ast.Attribute(value=owner, attr=method.func.attr, ctx=ast.Load()), method.func
            )
            call = ast.copy_location(
                ast.Call(func=func, args=method.args, keywords=method.keywords), method
            )
            return ast.copy_location(ast.Expr(value=call), statement)
    return statement
