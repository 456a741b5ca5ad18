"""``for`` statements over lists, compiled to folds: Spark's ``aggregate(array, init, merge)``.

A loop's *carried* variables are the local variables its body assigns that hold a value before
the loop: they become the fields of a struct accumulator. The body is interpreted once, inside
the fold's ``merge`` lambda, with each carried variable bound to its accumulator field and the
loop's target to the element, and the variables' values at the end of the body make the next
accumulator. Their types must be stable: the body is first interpreted on typed nulls until
each variable's type, joined with what the body assigns it (as an ``if`` joins its branches:
``None`` and an int make an optional int, an int and a float an int-or-float), stops changing.

Where Python would raise in an iteration, the accumulator's ``__error`` field takes the
failure's message and the remaining iterations keep the accumulator as it is; after the loop
the query fails with that message, under the loop's guard, in program order with the
function's other checks.

Sources: a list value (``for x in state.amounts``, a parameter, a local list), a group
function's ``rows`` (the key's records in record order, ``collect_list`` of a struct of the
columns the body reads as ``r.<column>``), ``range(...)``, and what
:func:`~mapwithstate.pyfunc.iteration.iterated` makes a list: a dict's keys, ``d.items()``,
``zip``, ``enumerate``, ``reversed``, a tuple. Variables
assigned only in the body, and the loop's target, may be unassigned after the loop (the list
may be empty): reading them there is a compile error, as after an ``if`` that assigns them on
one branch. ``break``, ``continue``, ``return``, ``yield``, the state's operations and an
``else`` clause are refused in a loop.
"""

import ast
import builtins as py
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.bindings import Bindings
from mapwithstate.pyfunc.paths import MaybeUnassigned, converted
from mapwithstate.pyfunc.pytypes import INT, PyType, list_of, row_of, to_spark, unify
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_column

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter, Message

__all__ = ["for_loop"]

#: The accumulator's field holding the message of the first failure of the loop, or null.
ERROR = "__error"

#: How often the body is interpreted on typed nulls to find its variables' stable types.
_TYPE_PASSES = 4

#: Binds the loop's target to an element (a Column of the source's element type).
Binder = Callable[[Column], Dict[str, Any]]


def for_loop(it: "Interpreter", node: ast.For) -> None:
    """Compiles ``for <target> in <source>: <body>`` on the interpreter's current path."""
    _refuse_unsupported(it, node)
    source, bind = _source(it, node)
    targets = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    assigned = _assigned(node.body) - targets
    env = it.path.env
    carried: Dict[str, Value] = {}
    for name in sorted(assigned):
        value = env.get(name)
        if value is None or isinstance(value, MaybeUnassigned):
            continue
        if not isinstance(value, Value):
            raise it.ctx.refuse(
                node,
                f"variable {name!r} holding a {type(value).__name__} assigned in a loop",
                "a loop carries values (numbers, strings, lists, ...) from one iteration "
                "to the next",
            )
        carried[name] = value
    types = {name: (value.type, value.nullable) for name, value in carried.items()}
    known_types: Dict[int, T.DataType] = {}
    failing = False
    for _ in range(_TYPE_PASSES):
        bound = {name: _typed_null(t, nullable) for name, (t, nullable) in types.items()}
        ends, failures = _body(it, node, bound, bind(_null_of(source)), known_types, True)
        failing = bool(failures)
        widened = _joined(it, node, types, ends)
        if widened == types:
            break
        types = widened
    else:
        raise it.ctx.refuse(
            node, "a loop whose variables' types do not settle", "give each variable one type"
        )

    def merge(acc: Column, element: Column) -> Column:
        bound = {
            name: Value(acc.getField(name), t, nullable) for name, (t, nullable) in types.items()
        }
        ends, failures = _body(it, node, bound, bind(element), known_types, False)
        fields = [_field(name, ends[name], t) for name, (t, _) in types.items()]
        if not failing:
            return F.struct(*fields) if fields else F.struct(F.lit(0).alias("_"))
        assert failures, "the typing passes found failures"
        error = _first(failures)
        step = F.struct(*fields, error.alias(ERROR))
        return F.when(acc.getField(ERROR).isNull(), step).otherwise(acc)

    init = [_field(name, carried[name], t) for name, (t, _) in types.items()]
    if failing:
        init.append(F.lit(None).cast("string").alias(ERROR))
    if not init:
        init = [F.lit(0).alias("_")]
    result_type = row_of(tuple((name, t) for name, (t, _) in types.items()))
    folded = it.ctx.share(
        Value(F.aggregate(source.column, F.struct(*init), merge), result_type, False)
    )
    if failing:
        error = folded.column.getField(ERROR)
        it.ctx.failures.append((c_and(it.ctx.guard, error.isNotNull()), error))
    for name in (assigned | targets) - set(types):
        if not isinstance(env.get(name), MaybeUnassigned):
            env[name] = MaybeUnassigned(node.lineno)
    for name, (t, nullable) in types.items():
        env[name] = Value(folded.column.getField(name), t, nullable)


def _typed_null(t: PyType, nullable: bool) -> Value:
    column = F.lit(None) if t.kind == "none" else F.lit(None).cast(to_spark(t))
    return Value(column, t, nullable)


def _null_of(source: Value) -> Column:
    element = source.type.args[0]
    return F.lit(None) if element.kind == "none" else F.lit(None).cast(to_spark(element))


def _field(name: str, value: Value, t: PyType) -> Column:
    column = converted(value, t)
    if t.kind != "none":
        column = column.cast(to_spark(t))
    return column.alias(name)


def _first(failures: List[Tuple[Cond, "Message"]]) -> Column:
    """The message of the first of ``failures`` whose condition holds, else null."""
    result: Optional[Column] = None
    for cond, message in failures:
        text = F.lit(message) if isinstance(message, str) else message
        if cond is True:
            return text if result is None else result.otherwise(text)
        result = (
            F.when(c_column(cond), text) if result is None else result.when(c_column(cond), text)
        )
    assert result is not None
    return result


def _joined(
    it: "Interpreter",
    node: ast.For,
    types: Dict[str, Tuple[PyType, bool]],
    ends: Dict[str, Value],
) -> Dict[str, Tuple[PyType, bool]]:
    """Each carried variable's type joined with the type the body leaves it."""
    widened = {}
    for name, (t, nullable) in types.items():
        end = ends[name]
        joined = unify(t, end.type)
        if joined is None:
            raise it.ctx.refuse(
                node,
                f"variable {name!r} is a {t} before the loop's body and a {end.type} after it",
                "give it one type in every iteration (a Column has one type)",
            )
        widened[name] = (joined, nullable or end.nullable)
    return widened


def _body(
    it: "Interpreter",
    node: ast.For,
    carried: Dict[str, Value],
    target: Dict[str, Any],
    known_types: Dict[int, T.DataType],
    typing: bool,
) -> Tuple[Dict[str, Value], List[Tuple[Cond, "Message"]]]:
    """Interprets the body once, the carried variables and the target bound as given: the
    carried variables' values at its end and the failures it may raise (conditions on the
    bound Columns). ``typing``: a pass on typed nulls, which records the Spark types of its
    escape-hatch calls for the pass inside the lambda (whose variables Spark cannot type
    alone)."""
    ctx = it.ctx
    saved = (it.path, ctx.failures, ctx.guard, ctx.self_checks, ctx.bindings, ctx.type_of)
    type_of = ctx.type_of

    def typed(call: ast.AST, column: Column) -> T.DataType:
        if typing:
            known_types[id(call)] = type_of(call, column)
        return known_types[id(call)]

    path = it.path.copy()
    path.env.update(carried)
    path.env.update(target)
    it.path = path
    # Computed per element inside a lambda: no value there may raise by itself, nor be named
    # outside the lambda, and its failures are the loop's.
    ctx.failures, ctx.guard, ctx.self_checks = [], True, False
    ctx.bindings, ctx.type_of = Bindings(False), typed
    try:
        it.block(node.body)
        ends = {}
        for name in carried:
            value = it.path.env[name]
            if not isinstance(value, Value):
                raise ctx.refuse(
                    node,
                    f"variable {name!r} assigned a {type(value).__name__} in a loop",
                    "a loop carries values (numbers, strings, lists, ...)",
                )
            ends[name] = value
        return ends, ctx.failures
    finally:
        it.path, ctx.failures, ctx.guard, ctx.self_checks, ctx.bindings, ctx.type_of = saved


def _assigned(body: List[ast.stmt]) -> Set[str]:
    """The names the statements assign (targets of assignments and of nested loops) and those
    whose list or dict they change in place (``d[k] = v`` assigns ``d`` a new map; ``del
    d[k]``, ``xs.append(v)``)."""
    from mapwithstate.pyfunc.in_place import IN_PLACE_METHODS

    names: Set[str] = set()
    for statement in body:
        for n in ast.walk(statement):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif (
                isinstance(n, ast.Subscript)
                and isinstance(n.ctx, (ast.Store, ast.Del))
                and isinstance(n.value, ast.Name)
            ):
                names.add(n.value.id)
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in IN_PLACE_METHODS
                and isinstance(n.func.value, ast.Name)
            ):
                names.add(n.func.value.id)
    return names


_STATE_OPERATIONS = ("update", "remove", "set_timer", "clear_timer")


def _refuse_unsupported(it: "Interpreter", node: ast.For) -> None:
    """Refuses what a fold cannot do: leave the loop early, leave the function, emit rows or
    change the key's state in an iteration, an ``else`` clause, ``rows`` in the body."""
    from mapwithstate.pyfunc.sequences import is_rows

    if node.orelse:
        raise it.ctx.refuse(
            node.orelse[0],
            "else clause of a for loop",
            "without break the else clause always runs: write its code after the loop",
        )
    for statement in node.body:
        for n in ast.walk(statement):
            refused = _refusal(n)
            if refused is not None:
                raise it.ctx.refuse(n, *refused)
            if isinstance(n, ast.Name) and is_rows(it, n):
                raise it.ctx.refuse(
                    n,
                    "rows inside a for loop's body",
                    "reduce rows before the loop (n = len(rows)) or loop over them: for r in rows",
                )


def _refusal(n: ast.AST) -> Optional[Tuple[str, str]]:
    if isinstance(n, ast.Break):
        return "break in a for loop", "a loop runs over every element: test a flag variable"
    if isinstance(n, ast.Continue):
        return "continue in a for loop", "put the rest of the body under an if"
    if isinstance(n, ast.Return):
        return "return in a for loop", "set variables in the loop and return after it"
    if isinstance(n, (ast.Yield, ast.YieldFrom)):
        return (
            "yield in a for loop",
            "build a list in the loop, or yield rows outside loops",
        )
    is_state = (
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "state"
    )
    if is_state and isinstance(n, ast.Attribute) and n.attr in _STATE_OPERATIONS:
        return (
            f"state.{n.attr} in a for loop",
            "carry the new values in variables and change the state after the loop",
        )
    if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Attribute):
        target = n.target
        if isinstance(target.value, ast.Name) and target.value.id == "state":
            return (
                f"augmented assignment to state.{target.attr} in a for loop",
                "carry the new value in a variable and change the state after the loop",
            )
    return None


def _source(it: "Interpreter", node: ast.For) -> Tuple[Value, Binder]:
    """The list the loop folds over (its elements in Python's order) and how an element binds
    the loop's target."""
    from mapwithstate.pyfunc.sequences import is_rows

    iterable = node.iter
    if is_rows(it, iterable):
        return _rows(it, node)
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name):
        function = it.expression(iterable.func)
        if function is py.range:
            return _range(it, iterable), _target(it, node.target, INT)
    from mapwithstate.pyfunc.iteration import iterated

    values = iterated(it, iterable, it.value(iterable), "a for loop")
    element = values.type.args[0]
    if element.kind == "tuple" and not isinstance(node.target, ast.Name):
        # Unpacking a None element raises (checked here: the fold's body binds the target
        # where no check can be made).
        it.ctx.check(
            node.target,
            F.exists(values.column, lambda e: e.isNull()),
            "TypeError",
            "cannot unpack non-iterable NoneType object",
        )
    return values, _target(it, node.target, element)


def _target(it: "Interpreter", target: ast.expr, element: PyType) -> Binder:
    """Binds ``target``: a name takes the element; a tuple of targets unpacks a tuple element
    (``for k, v in d.items()``, ``for i, (a, b) in enumerate(zip(xs, ys))``) or a struct's
    fields, in order (see :func:`~mapwithstate.pyfunc.tuples.bind`)."""
    from mapwithstate.pyfunc.tuples import bind

    # Refused here, at compile time, where the target cannot take the elements.
    bind(it, target, element, Value(F.lit(None), element, True), False)
    return lambda x: bind(it, target, element, Value(x, element, True), False)


def _int_argument(it: "Interpreter", arg: ast.expr, what: str) -> Value:
    value = it.value(arg)
    if value.type.kind not in ("int", "bool"):
        raise it.ctx.refuse(
            arg, f"{what} of type {value.type}", "Python raises TypeError: it must be an int"
        )
    return operators.none_check(
        it.ctx, arg, value, "'NoneType' object cannot be interpreted as an integer"
    )


def _range(it: "Interpreter", call: ast.Call) -> Value:
    """``range(stop)``, ``range(start, stop)``, ``range(start, stop, step)`` with a constant
    step: the ints as a list (empty where Python's range is)."""
    if call.keywords or not 1 <= len(call.args) <= 3:
        raise it.ctx.refuse(call, "range() with these arguments", "range(stop), range(a, b, step)")
    step = 1
    if len(call.args) == 3:
        stride = it.value(call.args[2])
        if not (stride.is_const and isinstance(stride.const, int)) or stride.const == 0:
            raise it.ctx.refuse(
                call.args[2],
                "range() with a step that is not a nonzero int literal",
                "range(a, b, 2)",
            )
        step = stride.const
    bounds = [_int_argument(it, a, "range() argument").column.cast("bigint") for a in call.args[:2]]
    start, stop = (F.lit(0).cast("bigint"), bounds[0]) if len(bounds) == 1 else bounds
    empty = F.array().cast(T.ArrayType(T.LongType()))
    if step > 0:
        ints = F.when(stop > start, F.sequence(start, stop - 1, F.lit(step).cast("bigint")))
    else:
        ints = F.when(stop < start, F.sequence(start, stop + 1, F.lit(step).cast("bigint")))
    return Value(ints.otherwise(empty), list_of(INT), False)


def _rows(it: "Interpreter", node: ast.For) -> Tuple[Value, Binder]:
    """``for r in rows``: the key's records in record order, as structs of the columns the
    body reads (``r.<column>``)."""
    if not isinstance(node.target, ast.Name):
        raise it.ctx.refuse(
            node.target, "a loop target over rows that is not a name", "for r in rows"
        )
    name = node.target.id
    read: List[str] = []
    for statement in node.body:
        for n in ast.walk(statement):
            if (
                isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == name
            ):
                if n.attr not in it.ctx.columns:
                    raise it.ctx.refuse(
                        n,
                        f"unknown column {n.attr!r} of a row",
                        f"the rows' columns are {', '.join(it.ctx.columns)}",
                    )
                if n.attr not in read:
                    read.append(n.attr)
    from mapwithstate.pyfunc.aggregates import rows_records

    records, row = rows_records(it, node, read)
    return records, lambda x: {name: Value(x, row, False)}
