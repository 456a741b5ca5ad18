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

Leaving an iteration early: ``continue`` ends it, as the end of the body does; ``break``
and ``return`` set the accumulator's ``__stopped`` flag, after which the remaining elements
leave the accumulator as it is. A ``return`` also sets ``__returned`` (and ``__value``, the
row it returns): after the loop the function leaves where it is set, its state as before the
loop, and the code after the loop runs only where it is not. The carried variables' values
where an iteration ends are those of the path that ended it. Rows yielded in an iteration are
appended to the accumulator's ``__rows``, an array of the output row, and emitted after the
loop in their place among the function's other yields.

Sources: a list value (``for x in state.amounts``, a parameter, a local list), a group
function's ``rows`` (the key's records in record order, ``collect_list`` of a struct of the
columns the body reads as ``r.<column>``), ``range(...)``, and what
:func:`~mapwithstate.pyfunc.iteration.iterated` makes a list: a dict's keys, ``d.items()``,
``zip``, ``enumerate``, ``reversed``, a tuple. Variables assigned only in the body may be
unassigned after the loop (the list may be empty): reading them there is a compile error, as
after an ``if`` that assigns them on one branch. The loop's target, if read after the loop, is
carried: the element last bound, unbound after no iteration (a
:class:`~mapwithstate.pyfunc.paths.BoundIf`, whose read fails the query with
``UnboundLocalError`` there). ``yield from`` is refused in a loop.

An ``else`` clause runs after the loop where no ``break`` ended it (``__stopped`` set and
``__returned`` not), as the branch of an ``if`` merged with the breaking path. A variable
first assigned in the body and read after the loop is then carried too, unbound in the body
until the iteration assigns it: where every ``break`` follows its assignment and the else
assigns it, it is assigned after the loop (the breaking iteration's value, or the else's);
otherwise it may be unassigned there, as after an ``if`` that assigns it on one branch.
``rows`` read in the body (``rows[i - 1]``) is the list of the key's records, collected
before the loop.

The state's operations (``state.update``, ``remove``, ``set_timer``, ``clear_timer``,
``state.<field> += v``) run in the iterations in the loop's order: the key's state as the
code sees it (each field, whether it exists, whether the call changed it, the timer) is carried
through the fold like a variable, as the accumulator's ``state.<field>``, ``state.exists``,
``state.changed``, ``state.timer`` and ``state.timer_left`` (names no Python variable has), so
the last of ``update``/``remove`` decides and ``state.<field>`` reads the newest value, also
after the loop and where an iteration returns.
"""

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mapwithstate.pyfunc.bindings import Bindings
from mapwithstate.pyfunc.interpreter import Emit, LoopExit
from mapwithstate.pyfunc.paths import (
    BoundIf,
    MaybeUnassigned,
    PathState,
    Record,
    converted,
    merge_values,
)
from mapwithstate.pyfunc.pytypes import BOOL, NONE, PyType, list_of, row_of, to_spark, unify
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_column, c_not, c_or, literal, select

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter, Message

__all__ = ["for_loop", "rows_as"]

#: The accumulator's field holding the message of the first failure of the loop, or null.
ERROR = "__error"

#: The shortest text of a value the body names rather than copies: only large ones, as each
#: name nests the iteration's Columns one lambda deeper (Spark Connect's plans have a depth
#: limit).
_NAMED_IN_BODY = 400

#: How often the body is interpreted on typed nulls to find its variables' stable types.
_TYPE_PASSES = 4

#: Binds the loop's target to an element (a Column of the source's element type).
Binder = Callable[[Column], Dict[str, Any]]


@dataclass
class _Iteration:
    """What interpreting the body once gives: the carried variables' values where the
    iteration ends (at its end, a ``continue``, a ``break`` or a ``return``), the conditions
    under which it stops the loop and returns from the function, the rows it returns and
    yields, and the failures it may raise (all conditions on the bound Columns)."""

    ends: Dict[str, Value]
    stops: Cond
    returns: Cond
    returned: List[Tuple[Cond, Record]]
    emits: List["Emit"]
    failures: List[Tuple[Cond, "Message"]]
    #: The values the iteration named (an inner loop's fold, a large variable): its Columns
    #: are complete once resolved by it.
    bindings: Bindings
    #: What the iteration leaves stale (see ``PathState.stale``), on any of its exits.
    stale: Dict[str, Tuple[int, str]]
    #: The variables first assigned in the body (``kept``) that every ``break`` follows an
    #: assignment of.
    assigned_at_breaks: Set[str]


#: The names and Python types of the fields of rows a loop yields or returns.
Shape = Tuple[Tuple[str, PyType], ...]


def for_loop(it: "Interpreter", node: ast.For) -> None:
    """Compiles ``for <target> in <source>: <body>`` on the interpreter's current path."""
    _refuse_unsupported(it, node)
    source, bind = _source(it, node)
    # rows read in the body (rows[i - 1], len(rows)) is the list of the key's records,
    # collected before the loop: an aggregate cannot be computed per iteration.
    from mapwithstate.pyfunc.sequences import is_rows

    rows_read = sorted(
        {n.id for s in node.body for n in ast.walk(s) if isinstance(n, ast.Name) and is_rows(it, n)}
    )
    if rows_read:
        from mapwithstate.pyfunc.aggregates import rows_records

        records = it.ctx.share(rows_records(it, node)[0])
        element_binder = bind
        bind = lambda x: {**element_binder(x), **{name: records for name in rows_read}}  # noqa: E731
    targets = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    assigned = _assigned(node.body) - targets
    env = it.path.env
    before = it.path.copy()
    guard = it.ctx.guard
    carried: Dict[str, Value] = {}
    for name in sorted(assigned):
        # One unbound on some paths (MaybeUnassigned, or a loop's target that may be) stays
        # so after the loop: it is carried only with a value on every path.
        value = env.get(name)
        if value is not None and not isinstance(value, (MaybeUnassigned, BoundIf)):
            carried[name] = _carried(it, node, name, value)
    # A target read after the loop is carried too: the element last bound (or what the body
    # assigned it since), unbound after no iteration unless it held a value before.
    unbound_before: Set[str] = set()
    for name in sorted(targets & _read_outside(it, node)):
        value = env.get(name)
        if isinstance(value, MaybeUnassigned):
            continue
        if value is None:
            unbound_before.add(name)
            value = Value(F.lit(None), NONE, True)
        elif isinstance(value, BoundIf):
            value = value.value
        carried[name] = _carried(it, node, name, value)
    # With an else clause, a variable first assigned in the body and read after the loop is
    # carried too (unbound in the body until it assigns it): where a break ends the loop, it
    # is what that iteration assigned it, which the else does not replace.
    kept: Set[str] = set()
    if node.orelse:
        for name in sorted((assigned & _read_outside(it, node)) - set(carried)):
            if not isinstance(env.get(name), BoundIf):
                kept.add(name)
                carried[name] = literal(None)
    carried.update(_state_parts(it.path, _state_changes(node)))
    types = {name: (value.type, value.nullable) for name, value in carried.items()}
    known_types: Dict[int, T.DataType] = {}
    for _ in range(_TYPE_PASSES):
        bound = {name: _typed_null(t, nullable) for name, (t, nullable) in types.items()}
        typed = _body(it, node, bound, bind(_null_of(source)), known_types, True, kept)
        widened = _joined(it, node, types, typed.ends)
        if widened == types:
            break
        types = widened
    else:
        raise it.ctx.refuse(
            node, "a loop whose variables' types do not settle", "give each variable one type"
        )
    # A state field or parameter an iteration leaves stale is stale in the next ones, and
    # after the loop.
    if any(k not in it.path.stale for k in typed.stale):
        it.path.stale.update(typed.stale)
        _body(it, node, bound, bind(_null_of(source)), known_types, True, kept)
    failing = bool(typed.failures)
    stopping = typed.stops is not False
    returning = typed.returns is not False
    rows_shape = _shape(it, node, [e.record for e in typed.emits], "yielded")
    return_shape = _shape(it, node, [r for _, r in typed.returned], "returned")

    def merge(acc: Column, element: Column) -> Column:
        bound = {
            name: literal(None) if t.kind == "none" else Value(acc.getField(name), t, nullable)
            for name, (t, nullable) in types.items()
        }
        step = _body(it, node, bound, bind(element), known_types, False, kept)
        fields = [_field(name, step.ends[name], t) for name, (t, _) in types.items()]
        if failing:
            assert step.failures, "the typing passes found failures"
            fields.append(_first(step.failures).alias(ERROR))
        if stopping:
            fields.append(c_column(step.stops).alias(_STOPPED))
        if returning:
            fields.append(c_column(step.returns).alias(_RETURNED))
        if return_shape is not None:
            fields.append(_returned_row(step.returned, return_shape).alias(_VALUE))
        if rows_shape is not None:
            fields.append(_yielded(it, node, acc, step.emits, rows_shape).alias(_ROWS))
        if not fields:
            fields = [F.lit(0).alias("_")]
        struct = step.bindings.resolve(F.struct(*fields))
        skip: Cond = False
        if failing:
            skip = acc.getField(ERROR).isNotNull()
        if stopping:
            skip = c_or(skip, acc.getField(_STOPPED))
        return select(skip, acc, struct)

    init = [_field(name, carried[name], t) for name, (t, _) in types.items()]
    if failing:
        init.append(F.lit(None).cast("string").alias(ERROR))
    if stopping:
        init.append(F.lit(False).alias(_STOPPED))
    if returning:
        init.append(F.lit(False).alias(_RETURNED))
    if return_shape is not None:
        init.append(F.lit(None).cast(_row_spark(return_shape)).alias(_VALUE))
    if rows_shape is not None:
        init.append(_no_rows(rows_shape).alias(_ROWS))
    if not init:
        init = [F.lit(0).alias("_")]
    result_type = row_of(tuple((name, t) for name, (t, _) in types.items()))
    folded = it.ctx.share(
        Value(F.aggregate(source.column, F.struct(*init), merge), result_type, False)
    ).column
    if failing:
        error = folded.getField(ERROR)
        it.ctx.failures.append((c_and(guard, error.isNotNull()), error))
    if rows_shape is not None:
        # The rows the iterations yielded, in order, where the loop ran.
        shape_record = Record({name: _typed_null(t, True) for name, t in rows_shape})
        rows = Value(folded.getField(_ROWS), list_of(row_of(rows_shape)), False)
        it.emits.append(Emit(guard, shape_record, node.lineno, node=node, rows=rows))
    # The state as the iterations left it (where one returned, as it returned).
    _set_state(
        it.path,
        {n: Value(folded.getField(n), t, f) for n, (t, f) in types.items() if _is_state(n)},
    )
    if returning:
        # An iteration returned: the function leaves, its state as the iteration left it,
        # and nothing after the loop runs for that call.
        returned = folded.getField(_RETURNED)
        record = None
        if return_shape is not None:
            value = folded.getField(_VALUE)
            fields = {name: Value(value.getField(name), t, True) for name, t in return_shape}
            record = Record(fields, value.isNotNull())
        it.leave(c_and(guard, returned), record, node)
        it.ctx.guard = c_and(guard, c_not(returned))
    for name in (assigned | targets | kept) - (set(types) - kept):
        if not isinstance(env.get(name), MaybeUnassigned):
            env[name] = MaybeUnassigned(node.lineno)
    ran: Cond = F.coalesce(F.size(source.column) > 0, F.lit(False))
    for name, (t, nullable) in types.items():
        if _is_state(name) or name in kept:
            continue
        value = Value(folded.getField(name), t, nullable)
        if name in unbound_before:
            env[name] = BoundIf(value, ran, node.lineno)
        elif isinstance(before.env.get(name), BoundIf):
            earlier = before.env[name]
            assert isinstance(earlier, BoundIf)
            env[name] = BoundIf(value, c_or(earlier.bound, ran), node.lineno)
        else:
            env[name] = value
    if node.orelse:
        # The else clause runs where no break ended the loop; where one did, a variable first
        # assigned in the body is what the breaking iteration left it, if every break follows
        # its assignment (else it may be unbound there).
        broke = folded.getField(_STOPPED) if stopping else False
        if returning:
            broke = c_and(broke, c_not(folded.getField(_RETURNED)))
        at_break = {
            name: Value(folded.getField(name), *types[name])
            for name in sorted(kept & typed.assigned_at_breaks)
        }
        it.branches(node, c_not(broke), node.orelse, [], else_env=at_break)


def _carried(it: "Interpreter", node: ast.For, name: str, value: Any) -> Value:
    """``value``, which variable ``name`` holds before the loop, as the loop carries it."""
    if isinstance(value, Record):
        from mapwithstate.pyfunc.dict_displays import record_as_dict

        value = record_as_dict(it.ctx, node, value)
    if not isinstance(value, Value):
        raise it.ctx.refuse(
            node,
            f"variable {name!r} holding a {type(value).__name__} assigned in a loop",
            "a loop carries values (numbers, strings, lists, ...) from one iteration to the next",
        )
    return value


#: The accumulator's fields beside the carried variables: whether an iteration stopped the
#: loop (``break`` or ``return``), whether one returned, the row it returned, and the rows the
#: iterations yielded.
_STOPPED, _RETURNED, _VALUE, _ROWS = "__stopped", "__returned", "__value", "__rows"


def _read_outside(it: "Interpreter", node: ast.For) -> Set[str]:
    """The names the function reads outside the loop's body (after the loop, or before it in
    an enclosing loop's next iteration)."""
    inside = {id(n) for statement in node.body for n in ast.walk(statement)}
    return {
        n.id
        for n in ast.walk(it.ctx.source.tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside
    }


def _shape(it: "Interpreter", node: ast.For, records: List[Record], what: str) -> Optional[Shape]:
    """The columns of the rows the body yields (or returns), each with one type; None if it
    yields none."""
    if not records:
        return None
    names = list(records[0].fields)
    types: Dict[str, PyType] = {}
    for record in records:
        if list(record.fields) != names:
            raise it.ctx.refuse(
                node,
                f"rows {what} in a loop with different keys ({', '.join(names)}; "
                f"{', '.join(record.fields)})",
                "every emitted dict has the same keys, in the same order",
            )
        for name, value in record.fields.items():
            joined = unify(types.get(name, NONE), value.type)
            if joined is None or joined.kind == "num":
                raise it.ctx.refuse(
                    node,
                    f"column {name!r} {what} in a loop as a {types.get(name)} and a {value.type}",
                    "give it one type in every row (float(...) for numbers)",
                )
            types[name] = joined
    return tuple((name, types[name]) for name in names)


def _row_spark(shape: Shape) -> T.StructType:
    """The Spark type of a row of ``shape`` (a column always ``None`` is a null string)."""
    return T.StructType(
        [T.StructField(n, to_spark(t) if t.kind != "none" else T.StringType()) for n, t in shape]
    )


def _row(record: Record, shape: Shape) -> Column:
    fields = []
    for name, t in shape:
        value = record.fields[name]
        column = converted(value, t) if t.kind != "none" else F.lit(None)
        fields.append(column.cast(_row_spark(((name, t),))[name].dataType).alias(name))
    return F.struct(*fields)


def _no_rows(shape: Shape) -> Column:
    return F.array().cast(T.ArrayType(_row_spark(shape)))


def rows_as(rows: Column, shape: Shape, spark_types: Dict[str, T.DataType]) -> Optional[Column]:
    """A loop's yielded rows (of ``shape``) with their columns of the emitted rows'
    ``spark_types``: as they are, or with columns always ``None`` cast; None where a column
    would need a conversion that may fail (an int yielded in a float column)."""
    if all(_row_spark(shape)[n].dataType == spark_types[n] for n, _ in shape):
        return rows
    if any(t.kind != "none" and _row_spark(shape)[n].dataType != spark_types[n] for n, t in shape):
        return None
    return F.transform(
        rows, lambda r: F.struct(*[r.getField(n).cast(spark_types[n]).alias(n) for n, _ in shape])
    )


def _yielded(
    it: "Interpreter", node: ast.For, acc: Column, emits: List["Emit"], shape: Shape
) -> Column:
    """The accumulator's rows followed by those an iteration yields, in order: a ``yield``'s
    row where its guard holds, a nested loop's rows where it ran."""
    pieces = [acc.getField(_ROWS)]
    spark_types = {f.name: f.dataType for f in _row_spark(shape).fields}
    for emit in emits:
        if emit.rows is not None:
            inner = _row_shape(emit.record)
            rows = rows_as(emit.rows.column, inner, spark_types)
            if rows is None:
                raise it.ctx.refuse(
                    node,
                    "rows yielded in nested loops with different column types",
                    "give each column one type in every row (float(...) for numbers)",
                )
        else:
            rows = F.array(_row(emit.record, shape))
        pieces.append(rows if emit.guard is True else select(emit.guard, rows, _no_rows(shape)))
    return F.concat(*pieces)


def _row_shape(record: Record) -> Shape:
    return tuple((name, value.type) for name, value in record.fields.items())


def _returned_row(returned: List[Tuple[Cond, Record]], shape: Shape) -> Column:
    """The row an iteration returns (exclusive guards), or null."""
    result: Column = F.lit(None).cast(_row_spark(shape))
    first = True
    for cond, record in returned:
        where = c_column(c_and(cond, record.present))
        row = _row(record, shape)
        result = F.when(where, row) if first else result.when(where, row)
        first = False
    return result


def _typed_null(t: PyType, nullable: bool) -> Value:
    """A null of type ``t``; of no type, Python's ``None`` itself, so that code under
    ``x is not None`` waits for the pass that knows the type ``x`` takes in the body."""
    if t.kind == "none":
        return literal(None)
    return Value(F.lit(None).cast(to_spark(t)), t, nullable)


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
    kept: Set[str],
) -> _Iteration:
    """Interprets the body once, the carried variables and the target bound as given.
    ``typing``: a pass on typed nulls, which records the Spark types of its escape-hatch calls
    for the pass inside the lambda (whose variables Spark cannot type alone). ``kept``: the
    carried variables unbound in the body until it assigns them (an iteration that does not
    leaves their accumulator's value as it is)."""
    ctx = it.ctx
    saved = (it.path, ctx.failures, ctx.guard, ctx.self_checks, ctx.bindings, ctx.type_of)
    saved_loop = (it.emits, it.loop_exits)
    type_of = ctx.type_of

    def typed(call: ast.AST, column: Column) -> T.DataType:
        if typing:
            known_types[id(call)] = type_of(call, column)
        return known_types[id(call)]

    path = it.path.copy()
    path.env.update({n: v for n, v in carried.items() if not _is_state(n) and n not in kept})
    _set_state(path, {n: v for n, v in carried.items() if _is_state(n)})
    path.env.update(target)
    it.path = path
    # Computed per element inside a lambda: no value there may raise by itself, nor be named
    # outside the lambda, and its failures are the loop's. Its large values (an inner loop's
    # fold, read for each variable it carries; a variable merged over an if's branches) are
    # named inside the lambda, whose body Spark does not eliminate common subexpressions of
    # anyway: a group function's too, as a value holding an aggregate is inside the fold's
    # lambda already.
    bindings = ctx.bindings.in_lambda(_NAMED_IN_BODY)
    ctx.failures, ctx.guard, ctx.self_checks = [], True, False
    ctx.bindings, ctx.type_of = bindings, typed
    exits: List[LoopExit] = []
    it.emits, it.loop_exits = [], exits
    try:
        it.block(node.body)
        exits.append(LoopExit("end", ctx.guard, it.path))
        ends = {}
        for name in carried:
            choices: List[Tuple[Cond, Any]] = [
                (e.guard, _exit_value(it, node, e.path, name, kept, carried))
                for e in exits
                if e.guard is not False
            ]
            value = (
                _chosen(choices)
                if choices
                else _exit_value(it, node, exits[-1].path, name, kept, carried)
            )
            if isinstance(value, BoundIf):
                value = value.value
            if not isinstance(value, Value):
                raise ctx.refuse(
                    node,
                    f"variable {name!r} assigned a {type(value).__name__} in a loop",
                    "a loop carries values (numbers, strings, lists, ...)",
                )
            ends[name] = value
        stops: Cond = False
        returns: Cond = False
        returned = []
        for e in exits:
            if e.kind in ("break", "return"):
                stops = c_or(stops, e.guard)
            if e.kind == "return":
                returns = c_or(returns, e.guard)
                if e.record is not None:
                    returned.append((e.guard, e.record))
        stale = {k: v for e in exits if e.guard is not False for k, v in e.path.stale.items()}
        assigned_at_breaks = {
            name
            for name in kept
            if all(
                _assigned_on(e.path, name)
                for e in exits
                if e.kind == "break" and e.guard is not False
            )
        }
        return _Iteration(
            ends,
            stops,
            returns,
            returned,
            it.emits,
            ctx.failures,
            bindings,
            stale,
            assigned_at_breaks,
        )
    finally:
        it.path, ctx.failures, ctx.guard, ctx.self_checks, ctx.bindings, ctx.type_of = saved
        it.emits, it.loop_exits = saved_loop


def _assigned_on(path: PathState, name: str) -> bool:
    """Whether ``name`` holds a value on ``path`` (on every path that reached it)."""
    return isinstance(path.env.get(name), (Value, Record))


def _exit_value(
    it: "Interpreter",
    node: ast.For,
    path: PathState,
    name: str,
    kept: Set[str],
    carried: Dict[str, Value],
) -> Any:
    """A carried variable's value where an iteration leaves on ``path``: one ``kept`` that
    the iteration has not assigned keeps the accumulator's value."""
    if name in kept:
        if not _assigned_on(path, name):
            return carried[name]
        return _carried(it, node, name, path.env[name])
    return _carried_value(path, name)


def _chosen(choices: List[Tuple[Cond, Any]]) -> Any:
    """The value of the exit taken (exits are exclusive; the last is the default), or None
    where the values have no one type."""
    result = choices[-1][1]
    for cond, value in reversed(choices[:-1]):
        result = merge_values(cond, value, result)
        if result is None:
            return None
    return result


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
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)):
                names |= _owner(n.value)
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in IN_PLACE_METHODS
            ):
                names |= _owner(n.func.value)
    return names


def _owner(node: ast.AST) -> Set[str]:
    """The variable whose list or dict a change of ``node`` changes, one or more items down
    (``d`` of ``d``, ``d[k]``, ``d.setdefault(k, [])``)."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setdefault"
        ):
            node = node.func.value
        else:
            break
    # state.update(...) and state.remove() change the key's state, carried apart.
    return {node.id} if isinstance(node, ast.Name) and node.id != "state" else set()


#: The accumulator's fields carrying the key's state (beside ``state.<field>`` for each field):
#: dotted, so that no Python variable has their names.
_EXISTS, _CHANGED, _TIMER, _TIMER_LEFT = (
    "state.exists",
    "state.changed",
    "state.timer",
    "state.timer_left",
)


def _is_state(name: str) -> bool:
    """Whether a carried name is one of the state's parts rather than a variable."""
    return name.startswith("state.")


def _state_changes(node: ast.For) -> Tuple[bool, bool]:
    """Whether the loop's body changes the key's state (``update``, ``remove``, ``state.<f>
    op= v``) and whether it sets or clears the timer."""
    fields = timer = False
    for statement in node.body:
        for n in ast.walk(statement):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                if n.value.id == "state" and n.attr in ("update", "remove"):
                    fields = True
                if n.value.id == "state" and n.attr in ("set_timer", "clear_timer"):
                    timer = True
            if (
                isinstance(n, ast.AugAssign)
                and isinstance(n.target, ast.Attribute)
                and isinstance(n.target.value, ast.Name)
                and n.target.value.id == "state"
            ):
                fields = True
    return fields, timer


def _state_parts(path: PathState, changes: Tuple[bool, bool]) -> Dict[str, Value]:
    """The parts of the key's state a loop whose body makes ``changes`` carries."""
    fields, timer = changes
    parts: Dict[str, Value] = {}
    if fields:
        parts.update({f"state.{name}": value for name, value in path.fields.items()})
        parts[_EXISTS] = path.present
        changed = path.changed
        parts[_CHANGED] = (
            literal(changed) if isinstance(changed, bool) else Value(changed, BOOL, False)
        )
    if timer:
        parts[_TIMER] = path.timer
        parts[_TIMER_LEFT] = path.timer_left
    return parts


def _set_state(path: PathState, parts: Dict[str, Value]) -> None:
    """The path's state takes the carried ``parts``."""
    for key, value in parts.items():
        if key == _EXISTS:
            path.present = value
        elif key == _CHANGED:
            path.changed = value.const if isinstance(value.const, bool) else value.column
        elif key == _TIMER:
            path.timer = value
        elif key == _TIMER_LEFT:
            path.timer_left = value
        else:
            path.fields[key[len("state.") :]] = value


def _carried_value(path: PathState, name: str) -> Any:
    """A carried variable's value on ``path``, or the state's part ``name``."""
    if not _is_state(name):
        return path.env[name]
    fields, timer = name not in (_TIMER, _TIMER_LEFT), name in (_TIMER, _TIMER_LEFT)
    return _state_parts(path, (fields, timer))[name]


def _refuse_unsupported(it: "Interpreter", node: ast.For) -> None:
    """Refuses what a fold does not do: ``yield from``."""

    for statement in node.body:
        for n in ast.walk(statement):
            refused = _refusal(n)
            if refused is not None:
                raise it.ctx.refuse(n, *refused)


def _refusal(n: ast.AST) -> Optional[Tuple[str, str]]:
    if isinstance(n, ast.YieldFrom):
        return "yield from in a for loop", "yield each row"
    return None


def _source(it: "Interpreter", node: ast.For) -> Tuple[Value, Binder]:
    """The list the loop folds over (its elements in Python's order) and how an element binds
    the loop's target."""
    from mapwithstate.pyfunc.sequences import is_rows

    iterable = node.iter
    if is_rows(it, iterable):
        return _rows(it, node)
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
    if element.kind == "list" and isinstance(node.target, (ast.Tuple, ast.List)):
        # Each element's unpacking checked here, the first failing element's failure (the
        # fold's body binds the target where no check can be made).
        from mapwithstate.pyfunc.list_unpacking import unpack_messages

        names = node.target.elts
        failing = F.filter(
            values.column,
            lambda e: (
                e.isNull()
                | F.exists(F.array(*[c for c, _ in unpack_messages(names, e)]), lambda c: c)
            ),
        )
        first = F.element_at(failing, 1)
        it.ctx.check(
            node.target,
            F.size(failing) > 0,
            "",
            F.when(
                first.isNull(), F.lit("TypeError: cannot unpack non-iterable NoneType object")
            ).otherwise(
                F.concat(
                    F.lit("ValueError: "),
                    F.coalesce(*[F.when(c, m) for c, m in unpack_messages(names, first)]),
                )
            ),
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
