"""The arguments of a call a state function makes: how many it may have, and which keywords,
checked when compiling (a call Python would refuse with ``TypeError`` is refused there).
"""

import ast
from typing import TYPE_CHECKING, Callable, Dict, List, Tuple

from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from pyspark.sql import Column

    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["Handler", "MethodHandler", "arity", "int_argument"]

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


def int_argument(it: "Interpreter", node: ast.AST, value: Value, what: str) -> "Column":
    """``value``, an argument Python takes as an index (``range``'s, ``enumerate``'s start, a
    width, ``hex``'s, ``chr``'s), as a BIGINT: another type is refused (Python raises
    TypeError), None fails the query with Python's TypeError."""
    from mapwithstate.pyfunc import operators

    if value.type.kind not in ("int", "bool"):
        raise it.ctx.refuse(
            node,
            f"{what} of type {value.type}",
            f"Python raises TypeError: '{value.type}' object cannot be interpreted as an integer",
        )
    checked = operators.none_check(
        it.ctx, node, value, "'NoneType' object cannot be interpreted as an integer"
    )
    return checked.column.cast("bigint")
