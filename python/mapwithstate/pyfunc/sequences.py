"""Indexing, slicing and comprehensions of lists, strings and dicts (and of what compiles to
a list: a dict's keys, its items, zip, enumerate, reversed), with Python's semantics: negative
indices counting from the end, ``IndexError``/``KeyError`` where Python raises them,
slices of any step clamped as CPython's ``PySlice_AdjustIndices`` clamps them (a zero step
failing with ``ValueError``), and comprehensions of several ``for`` and ``if`` clauses in
Python's order.
"""

import ast
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple, Union

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import iteration, operators, tuples
from mapwithstate.pyfunc.pytypes import STR, list_of, to_spark
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_column

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = [
    "subscript",
    "item",
    "comprehension",
    "is_rows",
    "stopping_comprehension",
    "next_item",
]


def subscript(it: "Interpreter", node: ast.Subscript) -> Value:
    from mapwithstate.pyfunc.collection_variables import kind_of

    variable = kind_of(it, node.value)
    if variable is not None and variable.name == "Counter":
        from mapwithstate.pyfunc import counters

        counter = it.value(node.value)
        return counters.item(it, node, counter, it.value(node.slice))
    base = it.value(node.value)
    kind = base.type.kind
    if kind == "tuple":
        base = operators.none_check(it.ctx, node, base, "'NoneType' object is not subscriptable")
        return tuples.subscript(it, node, base)
    if kind == "match":
        from mapwithstate.pyfunc import regex_calls

        return regex_calls.subscript(it, node, base)
    if kind == "row" and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        from mapwithstate.pyfunc.interpreter import row_field

        row = operators.none_check(it.ctx, node, base, "'NoneType' object is not subscriptable")
        return row_field(it.ctx, node, row, node.slice.value)
    if kind not in ("str", "list", "dict"):
        raise it.ctx.refuse(
            node,
            f"subscript of a {base.type}",
            "index or slice a str, list, tuple or dict; a Row by a field's name (row['n'])",
        )
    if isinstance(node.slice, ast.Slice) and kind == "dict":
        raise it.ctx.refuse(node, "a slice of a dict", "Python raises TypeError: unhashable type")
    base = operators.none_check(it.ctx, node, base, "'NoneType' object is not subscriptable")
    if isinstance(node.slice, ast.Slice):
        return _slice(it, node, base, _length(base))
    return item(it, node, base, it.value(node.slice))[0]


def _length(base: Value) -> Column:
    column = F.length(base.column) if base.type.kind == "str" else F.size(base.column)
    return column.cast("bigint")


def item(it: "Interpreter", node: ast.AST, base: Value, index: Value) -> Tuple[Value, Column]:
    """``base[index]`` of a str, list or dict known not to be ``None``: the item and where it
    is (a list's 0-based position, or the dict's key), failing where Python raises."""
    kind = base.type.kind
    if kind == "dict":
        found = F.coalesce(F.map_contains_key(base.column, index.column), F.lit(False))
        it.ctx.check(node, ~found, "KeyError", "key not in the dict")
        value = Value(
            F.when(found, F.element_at(base.column, index.column)), base.type.args[1], True
        )
        return value, index.column
    if index.type.kind not in ("int", "bool"):
        raise it.ctx.refuse(node, f"index of type {index.type}", "indices are ints")
    index = operators.none_check(
        it.ctx, node, index, "indices must be integers or slices, not NoneType"
    )
    length = _length(base)
    position = F.when(index.column < 0, index.column + length).otherwise(index.column)
    inside = (position >= 0) & (position < length)
    it.ctx.check(
        node, ~inside, "IndexError", f"{'string' if kind == 'str' else 'list'} index out of range"
    )
    safe = F.when(inside, position + 1).otherwise(F.lit(1)).cast("int")
    if kind == "str":
        return Value(F.when(inside, F.substring(base.column, safe, F.lit(1))), STR, False), position
    value = Value(F.when(inside, F.element_at(base.column, safe)), base.type.args[0], True)
    return value, position


def _constant_step(node: Optional[ast.expr]) -> Any:
    """The step of a slice written as a literal (``1``, ``-1``, ``None``), else ``...``."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, int)):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int)
    ):
        return -node.operand.value
    return ...


def _slice(it: "Interpreter", node: ast.Subscript, base: Value, length: Column) -> Value:
    part = node.slice
    assert isinstance(part, ast.Slice)
    step = _constant_step(part.step)
    if step == -1 and part.lower is None and part.upper is None:
        return Value(F.reverse(base.column), base.type, False)
    if step is not None and step != 1:
        return _stepped(it, part, base, length)

    def bound(expr: Optional[ast.expr], default: Column) -> Column:
        if expr is None:
            return default
        value = it.value(expr)
        if value.type.kind not in ("int", "none"):
            raise it.ctx.refuse(expr, f"slice bound of type {value.type}", "bounds are ints")
        if value.type.kind == "none":
            return default
        column = value.column
        clipped = F.when(column < 0, F.greatest(column + length, F.lit(0))).otherwise(
            F.least(column, length)
        )
        return F.when(column.isNull(), default).otherwise(clipped) if value.nullable else clipped

    lower = bound(part.lower, F.lit(0).cast("bigint"))
    upper = bound(part.upper, length)
    count = F.greatest(upper - lower, F.lit(0)).cast("int")
    start = (lower + 1).cast("int")
    if base.type.kind == "str":
        return Value(F.substring(base.column, start, count), STR, False)
    return Value(
        F.slice(base.column, F.when(count == 0, F.lit(1)).otherwise(start), count), base.type, False
    )


def _stepped(it: "Interpreter", part: ast.Slice, base: Value, length: Column) -> Value:
    """``base[lower:upper:step]`` for a step other than 1: the indices CPython's
    ``PySlice_AdjustIndices`` gives (bounds clamped to ``-1``/``0`` and ``len - 1``/``len``
    by the step's sign), in the step's order."""

    def operand(expr: Optional[ast.expr], what: str) -> Optional[Value]:
        if expr is None:
            return None
        value = it.value(expr)
        if value.type.kind not in ("int", "bool", "none"):
            raise it.ctx.refuse(
                expr,
                f"slice {what} of type {value.type}",
                "Python raises TypeError: slice indices must be integers or None",
            )
        return None if value.type.kind == "none" else value

    lower = operand(part.lower, "bound")
    upper = operand(part.upper, "bound")
    stride = operand(part.step, "step")
    one = F.lit(1).cast("bigint")
    if stride is None:
        step: Column = one
        sign: Optional[int] = 1
    else:
        step = stride.column.cast("bigint")
        if stride.nullable:
            step = F.coalesce(step, one)
        it.ctx.check(part, step == F.lit(0), "ValueError", "slice step cannot be zero")
        sign = (1 if stride.const > 0 else -1) if stride.is_const and stride.const else None
    backward = step < 0
    # The step where it divides (a zero step fails first, but a named value may be computed
    # before the checks).
    divisor = F.when(step == F.lit(0), one).otherwise(step) if stride is not None else one

    def by_sign(forward: Column, reverse: Column) -> Column:
        if sign is not None:
            return forward if sign > 0 else reverse
        return F.when(backward, reverse).otherwise(forward)

    last, before = length - one, F.lit(-1).cast("bigint")

    def adjusted(value: Optional[Value], default: Column) -> Column:
        if value is None:
            return default
        v = value.column.cast("bigint")
        low = by_sign(F.lit(0).cast("bigint"), before)
        high = by_sign(length, last)
        result = (
            F.when(v < 0, F.when(v + length < 0, low).otherwise(v + length))
            .when(v >= length, high)
            .otherwise(v)
        )
        return F.coalesce(result, default) if value.nullable else result

    start = adjusted(lower, by_sign(F.lit(0).cast("bigint"), last))
    stop = adjusted(upper, by_sign(length, before))

    def keep(_: Column, index: Column) -> Column:
        i = index.cast("bigint")
        forward = (i >= start) & (i < stop) & ((i - start) % divisor == 0)
        reverse = (i <= start) & (i > stop) & ((start - i) % divisor == 0)
        return by_sign(forward, reverse)

    if base.type.kind == "str":
        positions = F.sequence(F.lit(1), F.greatest(length, one).cast("int"))
        items = F.transform(positions, lambda p: F.substring(base.column, p, F.lit(1)))
    else:
        items = base.column
    picked = F.filter(items, keep)
    ordered = by_sign(picked, F.reverse(picked))
    if base.type.kind == "str":
        return Value(F.array_join(ordered, ""), STR, False)
    return Value(ordered, base.type, False)


def is_rows(it: "Interpreter", node: ast.expr) -> bool:
    """Whether ``node`` is a group function's ``rows``."""
    from mapwithstate.pyfunc.aggregates import Rows

    return isinstance(node, ast.Name) and isinstance(it.path.env.get(node.id), Rows)


def comprehension(
    it: "Interpreter", node: Union[ast.ListComp, ast.GeneratorExp], order_free: bool = False
) -> Value:
    """``[expr for x in xs if c for y in ys if d ...]`` over lists (targets may unpack tuples:
    ``for k, v in d.items()``): per ``for`` clause
    ``F.filter`` by its ``if`` clauses, then ``F.transform`` into the next clause's lists
    (flattened) or, for the last, into ``expr``: Python's order. Where an element's clause or
    value would raise, the query fails. With ``order_free`` (the list's order cannot show:
    ``sum(...)``, a set comprehension), the clauses may iterate sets."""
    for generator in node.generators:
        if generator.is_async:
            raise it.ctx.refuse(generator, "an async comprehension", "for x in values")
    over_rows = [g.iter for g in node.generators if is_rows(it, g.iter)]
    if over_rows:
        from mapwithstate.pyfunc.aggregates import PerRecordReadsCall, over_records, rows_list

        if len(node.generators) > 1 or not isinstance(node, ast.ListComp):
            # Over the list of the records, outside an aggregate.
            return over_records(it, over_rows[0], lambda: comprehension(it, node, order_free))
        try:
            return rows_list(it, node)
        except PerRecordReadsCall:
            return over_records(it, over_rows[0], lambda: comprehension(it, node, order_free))
    return _clause(it, node, 0, order_free)


def stopping_comprehension(
    it: "Interpreter", node: ast.GeneratorExp, stops: Callable[[Value], Cond]
) -> Optional[Value]:
    """The list of a generator a consumer stops reading at the first item ``stops`` holds
    for (``any``: a true one, ``all``: a false one, ``next``: the first), or None where it
    has several ``for`` clauses or iterates rows (compiled whole, as a list). The items are
    computed as the comprehension's, but a failure is raised only for the items Python
    computes: up to the one it stops at (``any(10 // x for x in [1, 0])`` is True)."""
    if (
        len(node.generators) != 1
        or node.generators[0].is_async
        or is_rows(it, node.generators[0].iter)
    ):
        return None
    return _clause(it, node, 0, True, stops)


def next_item(it: "Interpreter", node: ast.Call) -> Value:
    """``next(<generator>[, default])`` (``next(iter(xs))`` too): the first item the generator
    yields, computed alone (``next((x for x in xs if x > 0), None)``); where it yields none,
    the default, else ``StopIteration`` (in a generator function Python turns it into
    ``RuntimeError: generator raised StopIteration``)."""
    from mapwithstate.pyfunc.pytypes import unify

    if node.keywords or not 1 <= len(node.args) <= 2:
        raise it.ctx.refuse(node, "next() of these arguments", "next(<generator>[, default])")
    source = node.args[0]
    if (
        isinstance(source, ast.Call)
        and isinstance(source.func, ast.Name)
        and source.func.id == "iter"
        and it.ctx.source.lookup("iter") is iter
        and len(source.args) == 1
        and not source.keywords
    ):
        name = "__mws_next_item"
        source = ast.copy_location(
            ast.GeneratorExp(
                elt=ast.Name(id=name, ctx=ast.Load()),
                generators=[
                    ast.comprehension(
                        target=ast.Name(id=name, ctx=ast.Store()),
                        iter=source.args[0],
                        ifs=[],
                        is_async=0,
                    )
                ],
            ),
            source,
        )
        for child in ast.walk(source):
            if not hasattr(child, "lineno") and not isinstance(child, ast.comprehension):
                ast.copy_location(child, node)
    if not isinstance(source, ast.GeneratorExp):
        raise it.ctx.refuse(
            node,
            "next() of what is not a generator expression",
            "next((x for x in xs if ...), default) or next(iter(xs), default)",
        )
    items = stopping_comprehension(it, source, lambda _: True)
    if items is None:
        items = comprehension(it, source)
    default = it.value(node.args[1]) if len(node.args) == 2 else None
    item_type = items.type.args[0]
    found = F.size(items.column) > 0
    first = F.element_at(items.column, 1)
    if default is None:
        generator_function = any(
            isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(it.ctx.source.tree)
        )
        exception, message = (
            ("RuntimeError", "generator raised StopIteration")
            if generator_function
            else ("StopIteration", "")
        )
        it.ctx.check(node, c_column(~found), exception, message)
        return Value(first, item_type, True)
    joined = unify(item_type, default.type)
    if joined is None:
        raise it.ctx.refuse(
            node,
            f"next() of {item_type} items with a {default.type} default",
            "give the default the items' type",
        )
    spark_type = to_spark(joined)
    column = F.when(found, first.cast(spark_type)).otherwise(default.column.cast(spark_type))
    return Value(column, joined, True)


def _clause(
    it: "Interpreter",
    node: Union[ast.ListComp, ast.GeneratorExp],
    level: int,
    order_free: bool = False,
    stops: Optional[Callable[[Value], Cond]] = None,
) -> Value:
    """The list of the comprehension's ``for`` clause ``level`` and those after it, in the
    current environment (the earlier clauses' variables bound); with ``stops`` (one clause
    only), the failures of the items up to the first it holds for, that are kept."""
    generator = node.generators[level]
    innermost = level == len(node.generators) - 1
    values = iteration.iterated(
        it, generator.iter, it.value(generator.iter), "a comprehension", order_free
    )
    element = values.type.args[0]

    def evaluate(
        x: Column, body: bool, guard_filters: bool
    ) -> Tuple[Optional[Value], List[Tuple[Cond, Any]], Cond]:
        """The element's value (the next clause's list, or ``expr``; None without ``body``),
        the failures it may raise, and whether the filters keep it, for the lambda variable
        ``x``."""
        saved_env, saved_failures, saved_guard = dict(it.path.env), it.ctx.failures, it.ctx.guard
        it.ctx.failures, it.ctx.guard = [], True
        try:
            it.path.env.update(tuples.bind(it, generator.target, element, Value(x, element, True)))
            kept: Cond = True
            for condition in generator.ifs:
                kept = c_and(kept, it.condition(condition))
                if guard_filters:
                    it.ctx.guard = kept
            result = None
            if body:
                result = (
                    it.value(node.elt) if innermost else _clause(it, node, level + 1, order_free)
                )
            return result, it.ctx.failures, kept
        finally:
            it.path.env, it.ctx.failures, it.ctx.guard = saved_env, saved_failures, saved_guard

    def element_of(x: Column, guard_filters: bool) -> Tuple[Value, List[Tuple[Cond, Any]]]:
        result, failures, _ = evaluate(x, True, guard_filters)
        assert result is not None  # evaluated with its body
        return result, failures

    def keep(x: Column) -> Column:
        return c_column(evaluate(x, False, False)[2])

    # The failures an element may raise, lifted out of the lambdas.
    _, failures = element_of(F.lit(None).cast(to_spark(element)), True)

    def failing(index: int) -> Callable[[Column], Column]:
        # A one-parameter function: Spark Connect passes a lambda variable per parameter.
        return lambda x: c_column(element_of(x, True)[1][index][0])

    computed = values.column
    if stops is not None and failures:
        assert innermost and level == 0

        def stopping(x: Column) -> Column:
            result, _, kept = evaluate(x, True, False)
            assert result is not None
            return c_column(c_and(kept, stops(result)))

        # Items after the one Python stops at are never computed: their failures are not.
        # (Where an earlier item fails, its value may be anything: it fails first anyway.)
        position = F.array_position(F.transform(values.column, stopping), True)
        computed = F.slice(
            values.column, 1, F.when(position == 0, F.size(values.column)).otherwise(position)
        )
    for index, (_, message) in enumerate(failures):
        it.ctx.failures.append((c_and(it.ctx.guard, F.exists(computed, failing(index))), message))
    filtered = F.filter(values.column, keep) if generator.ifs else values.column
    sample, _ = element_of(F.lit(None).cast(to_spark(element)), False)
    column = F.transform(filtered, lambda x: element_of(x, False)[0].column)
    if innermost:
        return Value(column, list_of(sample.type), False)
    return Value(F.flatten(column), sample.type, False)
