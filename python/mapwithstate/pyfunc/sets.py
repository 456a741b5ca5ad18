"""Python's sets in a compiled state function: an array Column of distinct elements.

A set is made by a display (``{a, b}``), a set comprehension, ``set()`` / ``set(iterable)``
or a module constant; it has ``in``, ``len``, truthiness, the algebra ``| & - ^`` and its
methods, the comparisons (``==``, ``<=`` as subset, ...), and the methods that change it
(``add``, ``discard``, ``remove``, ``update``, ``clear``, ``|=`` ...) under the ownership rule
of a list's (:mod:`~mapwithstate.pyfunc.mutations`).

Element equality is Python's: ``1 == 1.0`` are one element, ``None`` is one element, and
where two equal elements meet, the one Python keeps is kept (the set's own on ``|`` and
``add``; the smaller set's on ``&``, as CPython iterates it). Sets of ints, strs, bools,
datetimes, dates or timedeltas, whose Spark equality is Python's, use Spark's hash-based
``array_distinct``/``array_union``/``array_intersect``/``array_except`` (linear). So do sets of
floats, with the zero Python keeps put back (Spark makes every zero ``0.0``, Python keeps
the first ``-0.0`` or ``0.0``). Sets of ints mixed with floats compare by a key (an integral
float as the int of its value, so ``1.0`` is ``1`` and ``2.0**53`` is not ``2**53 + 1``) in a
sort: ``n log n``, never quadratic.

A set's iteration order is CPython's hash order, which a compiled function cannot reproduce
(``str`` hashes are randomized per process): :data:`ORDER_HINT` is the refusal's way out of
every use whose result depends on it (see :func:`~mapwithstate.pyfunc.iteration.iterated`).
"""

import ast
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.paths import converted
from mapwithstate.pyfunc.pytypes import (
    BOOL,
    NONE,
    PyType,
    list_of,
    set_of,
    to_spark,
    unified,
    unify,
)
from mapwithstate.pyfunc.values import Value, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context, Interpreter

__all__ = [
    "ORDER_HINT",
    "SET_IN_PLACE",
    "binary",
    "call",
    "check_element",
    "compare",
    "comprehension",
    "constant",
    "display",
    "equals",
    "holds_set",
    "in_place",
    "method",
    "of_list",
    "refused_for_order",
]

#: The way out of a use of a set whose result depends on its order.
ORDER_HINT = (
    "Python iterates a set in its hash order, which a compiled function cannot reproduce "
    "(str hashes are randomized per process); iterate sorted(s) instead"
)
#: The methods that change a set in place.
SET_IN_PLACE = (
    "add",
    "discard",
    "remove",
    "update",
    "clear",
    "pop",
    "intersection_update",
    "difference_update",
    "symmetric_difference_update",
)
#: Element kinds whose Spark equality is Python's ``==`` (of one type).
_EXACT = ("int", "bool", "str", "none", "datetime", "date", "timedelta")
#: Element kinds a set may hold.
_HASHABLE = _EXACT + ("float", "num")


def check_element(ctx: "Context", node: ast.AST, element: PyType) -> None:
    """Refuses a set of ``element`` s: unhashable ones (Python raises TypeError), and those
    no compiled set holds yet."""
    if element.kind in _HASHABLE:
        return
    if element.kind in ("list", "dict", "set"):
        raise ctx.refuse(
            node,
            f"a {element.name} as a set element",
            f"Python raises TypeError: unhashable type: '{element.name}'",
        )
    raise ctx.refuse(
        node,
        f"a set of {element}",
        "a set holds ints, floats, bools, strs, None, datetimes, dates or timedeltas",
    )


def _joined(ctx: "Context", node: ast.AST, types: List[PyType], what: str) -> PyType:
    """The one element type of ``types`` (``None`` joins any), refused where a Column cannot
    hold them all (an int and a str; a bool and an int, which Python would merge)."""
    element = unified(
        types,
        lambda joined, t: ctx.refuse(
            node,
            f"{what} of {joined} and {t} elements",
            "a set is an array Column: one element type (ints and floats mix); "
            "convert the elements explicitly (int(), float(), str())",
        ),
    )
    check_element(ctx, node, element)
    return element


def _key(e: Column) -> Column:
    """The struct by which an int-or-float element equals another as in Python (an integral
    float as the int of its value, ``-0.0`` as ``0.0``): never null itself (a ``None``
    element's fields are null)."""
    i, f = e.getField("i"), e.getField("f")
    whole = (
        (f >= F.lit(-9.223372036854775808e18))
        & (f < F.lit(9.223372036854775808e18))
        & (f.cast("bigint").cast("double") == f)
    )
    as_int = F.coalesce(i, F.when(whole, f.cast("bigint")))
    return F.struct(as_int.alias("i"), F.when(as_int.isNull(), f + F.lit(0.0)).alias("f"))


def _bound(column: Column, body: Callable[[Column], Column]) -> Column:
    """``body(column)`` with ``column`` computed once (a lambda variable), however often
    ``body`` reads it: a sorted array read per element must not be sorted per element."""
    return F.transform(F.array(column), body)[0]


def _first_zero(column: Column) -> Column:
    """The first ``0.0`` or ``-0.0`` of an array of floats, null without one."""
    return F.get(F.filter(column, lambda e: e == F.lit(0.0)), 0)


def _with_zero(result: Column, zero: Column) -> Column:
    """``result`` of Spark's ``array_distinct`` and its peers on floats, which make every zero
    ``0.0``, with ``zero`` (Python's kept zero, or null) in its place where it is ``-0.0``."""

    def fixed(bound: Column) -> Column:
        array = bound.getField("r")
        negative = F.coalesce(operators.is_negative(bound.getField("z")), F.lit(False))
        minus_zero = F.lit(-0.0).cast("double")
        flipped = F.transform(array, lambda e: F.when(e == F.lit(0.0), minus_zero).otherwise(e))
        return F.when(negative, flipped).otherwise(array)

    return _bound(F.struct(result.alias("r"), zero.alias("z")), fixed)


def _distinct(column: Column, element: PyType) -> Column:
    """The array's distinct elements by Python's ``==``, the first of equal ones kept."""
    if element.kind in _EXACT:
        return F.array_distinct(column)
    if element.kind == "float":
        return _bound(column, lambda c: _with_zero(F.array_distinct(c), _first_zero(c)))
    tagged = F.transform(
        column,
        lambda e, i: F.struct(_key(e).alias("k"), i.alias("i"), e.alias("e")),
    )

    def first_of_each(ordered: Column) -> Column:
        kept = F.filter(
            ordered,
            lambda t, j: (
                ~F.coalesce(
                    F.get(ordered, j - 1).getField("k").eqNullSafe(t.getField("k")), F.lit(False)
                )
            ),
        )
        return F.transform(kept, lambda t: t.getField("e"))

    return _bound(F.array_sort(tagged), first_of_each)


def _merged(
    a: Column,
    b: Column,
    element: PyType,
    keep: Callable[[Column, Column, Column], Column],
    chosen_side: Optional[Column] = None,
) -> Column:
    """The elements of sets ``a`` and ``b`` (side 0 and 1) for which ``keep(side, in_both,
    chosen)`` holds, ``chosen`` being ``chosen_side`` computed once (not per element): both
    sets sorted by key, where an element in both sets has its equal beside it."""

    def tagged(column: Column, side: int) -> Column:
        return F.transform(
            column,
            lambda e: F.struct(_key(e).alias("k"), F.lit(side).alias("s"), e.alias("e")),
        )

    def kept(bound: Column) -> Column:
        ordered, chosen = bound.getField("m"), bound.getField("c")

        def beside(t: Column, j: Column, step: int) -> Column:
            other = F.get(ordered, j + F.lit(step)).getField("k")
            return F.coalesce(other.eqNullSafe(t.getField("k")), F.lit(False))

        result = F.filter(
            ordered,
            lambda t, j: keep(t.getField("s"), beside(t, j, -1) | beside(t, j, 1), chosen),
        )
        return F.transform(result, lambda t: t.getField("e"))

    merged = F.array_sort(F.concat(tagged(a, 0), tagged(b, 1)))
    side = chosen_side if chosen_side is not None else F.lit(0)
    return _bound(F.struct(merged.alias("m"), side.alias("c")), kept)


def of_list(ctx: "Context", node: ast.AST, values: Value) -> Value:
    """The set of a list's elements (a list known not to be ``None``)."""
    element = values.type.args[0]
    check_element(ctx, node, element)
    return Value(_distinct(values.column, element), set_of(element), False)


def display(it: "Interpreter", node: ast.Set) -> Value:
    """``{a, b, ...}``: its elements in order, the first of equal ones kept."""
    items = [it.value(e) for e in node.elts]
    element = _joined(it.ctx, node, [i.type for i in items], "a set")
    return of_list(
        it.ctx,
        node,
        Value(F.array(*[converted(i, element) for i in items]), list_of(element), False),
    )


def comprehension(it: "Interpreter", node: ast.SetComp) -> Value:
    """``{expr for x in xs if ...}``: the list comprehension's elements as a set; its ``for``
    clauses may iterate sets (the result has no order to keep)."""
    from mapwithstate.pyfunc.sequences import comprehension as listed

    as_list = ast.copy_location(ast.ListComp(elt=node.elt, generators=node.generators), node)
    return of_list(it.ctx, node, listed(it, as_list, order_free=True))


def constant(ctx: "Context", node: ast.AST, found: object) -> Value:
    """A module constant set or frozenset of numbers and strs."""
    assert isinstance(found, (set, frozenset))
    items = [literal(x) for x in found]
    element = _joined(ctx, node, [i.type for i in items], "a module constant set")
    column = F.array(*[converted(i, element) for i in items])
    return Value(_distinct(column, element), set_of(element), False)


def iterable(it: "Interpreter", node: ast.expr, use: str) -> Tuple[Value, bool]:
    """The argument ``node`` of ``set(...)``, ``s.union(...)``, ``s.update(...)`` as a set:
    a set, or a list, tuple, dict (its keys) or generator's elements; and whether it was a
    set."""
    from mapwithstate.pyfunc.iteration import iterated
    from mapwithstate.pyfunc.sequences import comprehension as listed

    if isinstance(node, ast.GeneratorExp):
        as_list = ast.copy_location(ast.ListComp(elt=node.elt, generators=node.generators), node)
        return of_list(it.ctx, node, listed(it, as_list, order_free=True)), False
    value = it.value(node)
    if value.type.kind == "str":
        raise it.ctx.refuse(
            node,
            f"{use} of a str",
            "a set of a string's characters is not compiled; split it into a list first",
        )
    if value.type.kind == "set":
        checked = operators.none_check(it.ctx, node, value, "'NoneType' object is not iterable")
        return checked, True
    return of_list(it.ctx, node, iterated(it, node, value, use)), False


def call(it: "Interpreter", node: ast.Call) -> Value:
    """``set()`` and ``set(iterable)``."""
    if node.keywords or len(node.args) > 1:
        raise it.ctx.refuse(
            node, "set() with keywords or several arguments", "set() takes at most 1 argument"
        )
    if not node.args:
        return Value(F.array(), set_of(NONE), False)
    return iterable(it, node.args[0], "set()")[0]


def _typed(
    ctx: "Context", node: ast.AST, a: Value, b: Value, what: str
) -> Tuple[Column, Column, PyType]:
    """Sets ``a`` and ``b`` (neither ``None``) as arrays of one element type."""
    element = _joined(ctx, node, [a.type.args[0], b.type.args[0]], what)
    joined = set_of(element)
    return converted(a, joined), converted(b, joined), element


def _union(a: Column, b: Column, element: PyType) -> Column:
    if element.kind in _EXACT:
        return F.array_union(a, b)
    if element.kind == "float":
        return _with_zero(F.array_union(a, b), F.coalesce(_first_zero(a), _first_zero(b)))
    return _distinct(F.concat(a, b), element)


def _intersection(a: Column, b: Column, element: PyType) -> Column:
    if element.kind in _EXACT:
        return F.array_intersect(a, b)
    # CPython iterates the smaller set (the argument where sizes tie) and keeps its elements.
    side = F.when(F.size(b) <= F.size(a), F.lit(1)).otherwise(F.lit(0))
    if element.kind == "float":
        zero = F.when(side == F.lit(1), _first_zero(b)).otherwise(_first_zero(a))
        return _with_zero(F.array_intersect(a, b), zero)
    return _merged(a, b, element, lambda s, both, chosen: both & (s == chosen), side)


def _difference(a: Column, b: Column, element: PyType) -> Column:
    if element.kind in _EXACT:
        return F.array_except(a, b)
    if element.kind == "float":
        return _with_zero(F.array_except(a, b), _first_zero(a))
    return _merged(a, b, element, lambda s, both, _: ~both & (s == F.lit(0)))


def _symmetric(a: Column, b: Column, element: PyType) -> Column:
    if element.kind in _EXACT:
        return F.concat(F.array_except(a, b), F.array_except(b, a))
    if element.kind == "float":
        # A zero in the result is in one set only: that set's.
        both = F.concat(F.array_except(a, b), F.array_except(b, a))
        return _with_zero(both, F.coalesce(_first_zero(a), _first_zero(b)))
    return _merged(a, b, element, lambda s, both, _: ~both)


_ALGEBRA = {
    ast.BitOr: _union,
    ast.BitAnd: _intersection,
    ast.Sub: _difference,
    ast.BitXor: _symmetric,
}


def binary(ctx: "Context", node: ast.AST, op: ast.operator, a: Value, b: Value) -> Value:
    """``a | b``, ``a & b``, ``a - b``, ``a ^ b`` of two sets, neither ``None``."""
    operation = _ALGEBRA.get(type(op))
    if operation is None:
        sym = operators.symbol(op)
        raise ctx.refuse(
            node,
            f"operator {sym} between sets",
            f"Python raises TypeError: unsupported operand type(s) for {sym}: 'set' and 'set'",
        )
    left, right, element = _typed(ctx, node, a, b, f"operator {operators.symbol(op)} of sets")
    return Value(operation(left, right, element), set_of(element), False)


def _subset(a: Column, b: Column, element: PyType) -> Column:
    return F.size(_difference(a, b, element)) == F.lit(0)


def equals(a: Value, b: Value) -> Column:
    """``a == b`` of two sets whose element types join (never null)."""
    element = unify(a.type.args[0], b.type.args[0])
    assert element is not None
    joined = set_of(element)
    left, right = converted(a, joined), converted(b, joined)
    same = (F.size(left) == F.size(right)) & _subset(left, right, element)
    if a.nullable or b.nullable:
        either = a.column.isNull() | b.column.isNull()
        return F.when(either, a.column.isNull() & b.column.isNull()).otherwise(same)
    return same


def compare(ctx: "Context", node: ast.AST, op: ast.cmpop, a: Value, b: Value) -> Column:
    """``a < b``, ``<=``, ``>``, ``>=`` of two sets, neither ``None``: subset and superset."""
    left, right, element = _typed(ctx, node, a, b, "comparison of sets")
    if isinstance(op, (ast.Gt, ast.GtE)):
        left, right = right, left
    test = _subset(left, right, element)
    if isinstance(op, (ast.Lt, ast.Gt)):
        test = test & (F.size(left) < F.size(right))
    return test


def contains(ctx: "Context", node: ast.AST, container: Value, item: Value) -> Column:
    """``item in container`` of a set (not ``None``): Python's ``==`` between the elements
    and ``item``; an unhashable item is Python's TypeError."""
    if item.type.kind in ("list", "dict", "set"):
        raise ctx.refuse(
            node,
            f"a {item.type.name} in a set",
            f"Python raises TypeError: unhashable type: '{item.type.name}'",
        )
    element = container.type.args[0]
    if element.kind in _EXACT and item.type == element and not item.nullable:
        return F.coalesce(F.array_contains(container.column, item.column), F.lit(False))
    return F.exists(container.column, lambda e: operators.equals(Value(e, element, True), item))


# ------------------------------------------------------------------ methods


def _others(it: "Interpreter", node: ast.Call, name: str) -> List[Tuple[Value, bool]]:
    """A method's arguments as sets, each with whether it was a set itself."""
    if node.keywords:
        raise it.ctx.refuse(
            node,
            f"set.{name}() with keyword arguments",
            f"Python raises TypeError: set.{name}() takes no keyword arguments",
        )
    return [iterable(it, a, f"set.{name}()") for a in node.args]


def _one(it: "Interpreter", node: ast.Call, name: str) -> Value:
    others = _others(it, node, name)
    if len(others) != 1:
        raise it.ctx.refuse(
            node, f"set.{name}() with {len(others)} arguments", f"set.{name}() takes 1 argument"
        )
    return others[0][0]


def _fold(it: "Interpreter", node: ast.Call, base: Value, name: str, op: ast.operator) -> Value:
    result = base
    for other, was_set in _others(it, node, name):
        if isinstance(op, ast.BitAnd) and not was_set:
            # CPython keeps the elements of an iterable that is not a set, whatever the sizes.
            left, right, element = _typed(it.ctx, node, result, other, f"set.{name}()")
            if element.kind in _EXACT:
                column = F.array_intersect(left, right)
            elif element.kind == "float":
                column = _with_zero(F.array_intersect(left, right), _first_zero(right))
            else:
                column = _merged(left, right, element, lambda s, both, _: both & (s == F.lit(1)))
            result = Value(column, set_of(element), False)
        else:
            result = binary(it.ctx, node, op, result, other)
    return result


def method(it: "Interpreter", node: ast.Call, base: Value, name: str) -> Value:
    """A method of a set (not ``None``) that leaves it as it is."""
    folds = {
        "union": ast.BitOr(),
        "intersection": ast.BitAnd(),
        "difference": ast.Sub(),
    }
    if name in folds:
        return _fold(it, node, base, name, folds[name])
    if name == "symmetric_difference":
        return binary(it.ctx, node, ast.BitXor(), base, _one(it, node, name))
    if name == "copy":
        _others(it, node, name)
        if node.args:
            raise it.ctx.refuse(node, "set.copy() with arguments", "set.copy() takes none")
        return base
    if name in ("issubset", "issuperset"):
        other = _one(it, node, name)
        op = ast.LtE() if name == "issubset" else ast.GtE()
        return Value(compare(it.ctx, node, op, base, other), BOOL, False)
    if name == "isdisjoint":
        other = _one(it, node, name)
        common = binary(it.ctx, node, ast.BitAnd(), base, other)
        return Value(F.size(common.column) == F.lit(0), BOOL, False)
    if name in SET_IN_PLACE:
        from mapwithstate.pyfunc.in_place import refusal

        refused = refusal(it, node, base, name)
        assert refused is not None
        raise refused
    raise it.ctx.refuse(
        node,
        f"set.{name}()",
        "supported set methods: add clear copy difference difference_update discard "
        "intersection intersection_update isdisjoint issubset issuperset remove "
        "symmetric_difference symmetric_difference_update union update",
    )


def in_place(it: "Interpreter", node: ast.Call, base: Value, name: str) -> Tuple[Value, Value]:
    """A changing method of a local set (not ``None``): its new value and the call's."""
    none = literal(None)
    if name == "pop":
        raise it.ctx.refuse(
            node,
            "set.pop()",
            "Python removes an arbitrary element (its hash order); take a chosen one: "
            "x = min(s); s.discard(x)",
        )
    if name in ("add", "discard", "remove"):
        if node.keywords or len(node.args) != 1:
            raise it.ctx.refuse(node, f"set.{name}() without 1 argument", f"set.{name}(x)")
        item = it.value(node.args[0])
        if item.type.kind in ("list", "dict", "set"):
            raise it.ctx.refuse(
                node,
                f"set.{name}() of a {item.type.name}",
                f"Python raises TypeError: unhashable type: '{item.type.name}'",
            )
        if name == "add":
            element = _joined(it.ctx, node, [base.type.args[0], item.type], "set.add()")
            joined = set_of(element)
            column = converted(base, joined)
            found = contains(it.ctx, node, Value(column, joined, False), item)
            added = F.concat(column, F.array(converted(item, element)))
            return Value(F.when(found, column).otherwise(added), joined, False), none
        found = contains(it.ctx, node, base, item)
        if name == "remove":
            it.ctx.check(node, ~found, "KeyError", "element not in the set")
        element = base.type.args[0]
        rest = F.filter(base.column, lambda e: ~operators.equals(Value(e, element, True), item))
        return Value(rest, base.type, False), none
    if name == "clear":
        if node.args or node.keywords:
            raise it.ctx.refuse(node, "set.clear() with arguments", "set.clear() takes none")
        return Value(F.array().cast(to_spark(base.type)), base.type, False), none
    folds = {
        "update": ast.BitOr(),
        "intersection_update": ast.BitAnd(),
        "difference_update": ast.Sub(),
    }
    if name in folds:
        return _fold(it, node, base, name, folds[name]), none
    assert name == "symmetric_difference_update"
    return binary(it.ctx, node, ast.BitXor(), base, _one(it, node, name)), none


def holds_set(py_type: PyType) -> bool:
    """Whether ``py_type`` is a set, or a list, dict, tuple or row holding one."""
    if py_type.kind == "set":
        return True
    if py_type.kind == "match":  # its args are a group count and names, no types
        return False
    parts = [a[1] if isinstance(a, tuple) else a for a in py_type.args]
    return any(isinstance(p, PyType) and holds_set(p) for p in parts)


def refused_for_order(ctx: "Context", node: ast.AST, construct: str) -> Exception:
    """The refusal of ``construct``, a use of a set whose result would depend on its order."""
    return ctx.refuse(node, construct, ORDER_HINT)
