"""The arguments of a call a state function makes: how many it may have, and which keywords,
checked when compiling (a call Python would refuse with ``TypeError`` is refused there).
"""

import ast
from typing import TYPE_CHECKING, Callable, Dict, List, Tuple

from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["Handler", "MethodHandler", "arity"]

#: A builtin's handler: the call, its positional and its keyword arguments.
Handler = Callable[["Interpreter", ast.Call, List[Value], Dict[str, Value]], Value]
#: A str or dict method's handler: the call, the value it is called on (not None), and its
#: positional and keyword arguments.
MethodHandler = Callable[["Interpreter", ast.Call, Value, List[Value], Dict[str, Value]], Value]


def arity(
    it: "Interpreter",
    node: ast.Call,
    args: List[Value],
    kwargs: Dict[str, Value],
    low: int,
    high: int,
    name: str,
    keywords: Tuple[str, ...] = (),
) -> None:
    """Refuses a call of ``name`` without ``low`` to ``high`` positional arguments, or with a
    keyword not among ``keywords``."""
    unknown = set(kwargs) - set(keywords)
    if unknown or not low <= len(args) <= high:
        raise it.ctx.refuse(
            node,
            f"{name}() with {len(args)} argument(s)"
            + (f" and {', '.join(sorted(unknown))}=" if unknown else ""),
            f"{name}() takes {low}"
            + (f" to {high}" if high > low else "")
            + " argument(s)"
            + (f", keywords {', '.join(keywords)}" if keywords else ""),
        )
