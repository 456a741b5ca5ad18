"""The methods of list values a state function may call: ``index(x)`` (Python's
``ValueError`` where ``x`` is not in the list) and ``count(x)``, with Python's ``==`` between
the elements and ``x`` (None equals only None, an int equals the float of its value).
"""

import ast
from typing import TYPE_CHECKING, Dict, List

from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.arguments import MethodHandler, arity
from mapwithstate.pyfunc.pytypes import INT
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["LIST_METHODS"]


def _index(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 1, 1, "index")
    element = base.type.args[0]
    matches = F.transform(base.column, lambda e: operators.equals(Value(e, element, True), args[0]))
    position = F.array_position(matches, F.lit(True))
    it.ctx.check(node, position == F.lit(0), "ValueError", "list.index(x): x not in list")
    return Value((position - F.lit(1)).cast("bigint"), INT, False)


def _count(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 1, 1, "count")
    element = base.type.args[0]
    same = F.filter(base.column, lambda e: operators.equals(Value(e, element, True), args[0]))
    return Value(F.size(same).cast("bigint"), INT, False)


LIST_METHODS: Dict[str, MethodHandler] = {"index": _index, "count": _count}
