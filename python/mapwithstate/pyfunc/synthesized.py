"""Python the compiler writes itself and compiles as it compiles the user's: where a library
function is plain Python over values the compiler already handles (``Counter.most_common(n)``
is ``sorted(c.items(), key=..., reverse=True)[:n]``), it is compiled from that Python, so it
keeps every rule the compiler has for it (stable sorts, Python's comparisons and their
``TypeError``s), at the place of the user's call for errors.
"""

import ast
from typing import TYPE_CHECKING, Any, Dict

from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["evaluated"]


def evaluated(it: "Interpreter", at: ast.AST, expression: str, names: Dict[str, Value]) -> Any:
    """``expression`` (Python source) compiled with ``names`` bound to the given values, its
    nodes placed at ``at``. The names (``__mws_*``) are bound only while it compiles."""
    tree = ast.parse(expression, mode="eval").body
    for node in ast.walk(tree):
        ast.copy_location(node, at)
        if hasattr(node, "end_lineno"):
            setattr(node, "end_lineno", getattr(at, "end_lineno", None))  # noqa: B010
            setattr(node, "end_col_offset", getattr(at, "end_col_offset", None))  # noqa: B010
    env = it.path.env
    saved = {name: env[name] for name in names if name in env}
    env.update(names)
    try:
        return it.expression(tree)
    finally:
        for name in names:
            env.pop(name, None)
        env.update(saved)
