"""Module constants that nest containers (``TIERS = [(0, "bronze"), (100, "silver")]``,
``ROUTES = {"login": {"ok": "home"}}``), compiled as the display that would build them.

A flat constant (a number, a str, a list of numbers) is a literal
(:func:`~mapwithstate.pyfunc.interpreter.captured`); one holding tuples, lists or dicts is
written back as its display (``[(0, 'bronze'), ...]``) and compiled as the user's own display
would be, so it takes the same types and the same refusals (a list of tuples of one shape, a
dict of one value type). It is read at compile time, as every module constant is: a later
change to the module's object is not seen.
"""

import ast
from datetime import date, timedelta
from typing import Any, Optional

__all__ = ["display"]


def display(value: Any, at: ast.AST) -> Optional[ast.expr]:
    """The display expression of ``value``, its nodes placed at ``at``, or None where it holds
    something a display cannot write (a set, an object)."""
    built = _built(value)
    if built is None:
        return None
    for node in ast.walk(built):
        ast.copy_location(node, at)
    return built


def _built(value: Any) -> Optional[ast.expr]:
    if value is None or isinstance(value, (bool, int, float, str, date, timedelta)):
        # A date or timedelta constant compiles as the literal a captured one is.
        constant: Any = value
        return ast.Constant(value=constant)
    if isinstance(value, (list, tuple)):
        items = [_built(item) for item in value]
        if any(item is None for item in items):
            return None
        elements = [item for item in items if item is not None]
        if isinstance(value, tuple):
            return ast.Tuple(elts=elements, ctx=ast.Load())
        return ast.List(elts=elements, ctx=ast.Load())
    if isinstance(value, dict):
        keys = [_built(k) for k in value]
        values = [_built(v) for v in value.values()]
        if any(part is None for part in keys + values):
            return None
        return ast.Dict(keys=keys, values=[v for v in values if v is not None])
    return None
