"""Dict displays where a struct is expected: the one context that makes ``{...}`` a struct.

A dict display of string-literal keys used as a value is a dict (a Spark map of one value
type, :func:`~mapwithstate.pyfunc.dict_displays.record_as_dict`). Stored where a struct is —
a STRUCT state field, an element of an ARRAY<STRUCT> list — Python's runner stores it as a
Row, field by field by name, and so does the compiled function
(:func:`~mapwithstate.pyfunc.dict_displays.record_as_row`). Where a value is stored gives the
type it is expected to have:

- ``state.update(info={...})``, ``state.events = [...]``, ``state.events += [...]``: the state
  field's type;
- ``events.append({...})``, ``events.insert(i, {...})``: the list's element type;
  ``events.extend([...])``, ``events += [...]``: the list's type;
- ``events[i] = {...}``: the list's element type.

The expectation reaches down the expression that makes the value, and nowhere else: into a
list display's elements (``[{...}, {...}]``) and into both operands of ``+`` on lists. An
operand of ``+`` is expected to be a list of the other operand's type too, so ``events +
[{...}]`` and ``[{...}] + events`` need no stored context: a list display's items are compiled
first, in Python's order, and typed once the other operand's type is known.
"""

import ast
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.paths import Record
from mapwithstate.pyfunc.pytypes import PyType, to_spark
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["value", "as_expected", "concatenation"]


def value(it: "Interpreter", node: ast.expr, expected: Optional[PyType]) -> Value:
    """``node``'s value, stored where a value of type ``expected`` is (None: nowhere in
    particular); a dict display where a struct is expected is that struct."""
    if not _holds_rows(expected):
        return it.value(node)
    if isinstance(node, ast.List) and expected is not None and expected.kind == "list":
        return _typed(it, node, _items(it, node), expected)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return concatenation(it, node, expected)
    return as_expected(it, node, it.expression(node), expected)


def as_expected(it: "Interpreter", node: ast.AST, result: Any, expected: Optional[PyType]) -> Value:
    """An evaluated expression (a :class:`Record` or a value) stored where a value of type
    ``expected`` is."""
    if isinstance(result, Record) and expected is not None and expected.kind == "row":
        from mapwithstate.pyfunc.dict_displays import record_as_row

        return record_as_row(it.ctx, node, result, expected, "a struct")
    return it.as_value(node, result)


def concatenation(it: "Interpreter", node: ast.BinOp, expected: Optional[PyType]) -> Value:
    """``left + right``: a list display operand holding dict displays is a list of structs
    where the other operand (or the place it is stored in) is one. Python's order: the left
    operand, then the right, then the sum."""
    left = _operand(it, node.left, expected)
    right = _operand(it, node.right, expected)
    target = expected if _holds_rows(expected) else None
    for operand in (left, right):
        if target is None and isinstance(operand, Value) and _holds_rows(operand.type):
            target = operand.type
    return operators.binary(
        it.ctx, node, node.op, _value_of(it, left, target), _value_of(it, right, target)
    )


#: A list display whose items are evaluated but not yet typed: its node and its items.
_Display = Tuple[ast.List, List[Tuple[ast.expr, Any]]]


def _operand(it: "Interpreter", node: ast.expr, expected: Optional[PyType]) -> Any:
    if isinstance(node, ast.List):
        return (node, _items(it, node))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return concatenation(it, node, expected)
    return it.value(node)


def _value_of(it: "Interpreter", operand: Any, target: Optional[PyType]) -> Value:
    if isinstance(operand, Value):
        return operand
    node, items = operand
    if target is None:
        return it.list_display(node, [it.as_value(n, r) for n, r in items])
    return _typed(it, node, items, target)


def _items(it: "Interpreter", node: ast.List) -> List[Tuple[ast.expr, Any]]:
    return [(e, it.expression(e)) for e in node.elts]


def _typed(
    it: "Interpreter", node: ast.List, items: List[Tuple[ast.expr, Any]], list_type: PyType
) -> Value:
    """A list display's evaluated items as a list of ``list_type`` (a list of structs)."""
    element = list_type.args[0]
    values = [as_expected(it, n, r, element) for n, r in items]
    for (item, _), v in zip(items, values, strict=True):
        if v.type.kind not in ("none", "row"):
            raise it.ctx.refuse(
                item,
                f"a {v.type} in a list of structs ({to_spark(element).simpleString()})",
                "a list of structs holds dict displays of its fields, or its own items",
            )
    return Value(F.array(*[v.column for v in values]).cast(to_spark(list_type)), list_type, False)


def _holds_rows(py_type: Optional[PyType]) -> bool:
    """A struct, or a list of structs: where a dict display becomes a struct."""
    if py_type is None:
        return False
    return py_type.kind == "row" or py_type.kind == "list" and py_type.args[0].kind == "row"
