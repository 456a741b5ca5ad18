"""Compiles a Python state function against an input's columns and a state schema into the
Column form of ``StateSpec.function`` (``update``, ``remove``, ``emit``, ``timeout_at``).

Parameters bind by name: ``state`` is the key's state, ``rows`` (group functions) the key's
records of the batch, every other parameter a key or value column. The function's paths are
run symbolically (:mod:`~mapwithstate.pyfunc.interpreter`); their exits give the key's new
state, their returns or yields the emitted rows, and every place where Python would raise a
check that fails the query with the function's name, file, line and Python's exception.
"""

import ast
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Set, Tuple, Union

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mapwithstate import functions as S
from mapwithstate.deep_plans import lifted_depth_limit, message_depth
from mapwithstate.pyfunc import builtins
from mapwithstate.pyfunc.aggregates import Rows
from mapwithstate.pyfunc.bindings import Bindings, PlanTooLarge, copied_plan_limit
from mapwithstate.pyfunc.errors import CompileError
from mapwithstate.pyfunc.interpreter import (
    Context,
    Emit,
    Interpreter,
    Message,
    StateObject,
    store,
)
from mapwithstate.pyfunc.let_nesting import LetNesting
from mapwithstate.pyfunc.loops import rows_as
from mapwithstate.pyfunc.paths import PathState
from mapwithstate.pyfunc.pytypes import BOOL, DATETIME, FLOAT, PyType, from_spark, to_spark, unified
from mapwithstate.pyfunc.source import FunctionSource
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_column, c_not, select

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["CompiledFunction", "compile_function", "input_columns"]


@dataclass
class CompiledFunction:
    """The Columns of ``StateSpec.function`` a Python function compiles to (None: absent)."""

    update: Optional[Column]
    remove: Optional[Column]
    emit: Optional[Column]
    timeout_at: Optional[Column]


def input_columns(
    df: "DataFrame", keys: List[Any], values: Optional[List[Any]]
) -> Dict[str, T.DataType]:
    """The columns a state function sees, by name: the key columns, then the value columns
    (by default every other column of ``df``)."""
    from pyspark.sql import Column as AnyColumn

    key_columns = [F.col(k) if not isinstance(k, AnyColumn) else k for k in keys]
    key_schema = df.select(*key_columns).schema
    if values:
        value_columns = [F.col(v) if not isinstance(v, AnyColumn) else v for v in values]
        value_schema = df.select(*value_columns).schema
        value_fields = list(value_schema.fields)
    else:
        names = {f.name for f in key_schema.fields}
        value_fields = [f for f in df.schema.fields if f.name not in names]
    return {f.name: f.dataType for f in list(key_schema.fields) + value_fields}


def _state_struct(df: "DataFrame", state_schema: Any) -> T.StructType:
    if isinstance(state_schema, T.StructType):
        return state_schema
    return df.sparkSession.createDataFrame([], state_schema).schema


class _Probe:
    """Resolves the type of an escape-hatch Column, and the SQL text of a compiled one, over
    an empty DataFrame with the function's columns and the reserved state columns."""

    def __init__(
        self, df: "DataFrame", columns: Dict[str, T.DataType], state: T.StructType
    ) -> None:
        fields = [T.StructField(n, t) for n, t in columns.items()]
        reserved = {
            "state": state,
            "new_state": state,
            "state_exists": T.BooleanType(),
            "is_timing_out": T.BooleanType(),
            "batch_time": T.TimestampType(),
            "timeout_at": T.TimestampType(),
            "watermark": T.TimestampType(),
        }
        fields += [T.StructField(S.RESERVED_COLUMNS[k], t) for k, t in reserved.items()]
        self._df = df.sparkSession.createDataFrame([], T.StructType(fields))

    def type_of(self, column: Column) -> T.DataType:
        with lifted_depth_limit():
            return self._df.select(column.alias("c")).schema["c"].dataType

    def sql(self, column: Column, keys: Optional[List[Union[str, Column]]] = None) -> str:
        """The SQL text of ``column``; with ``keys``, of a group function's Column, whose
        aggregates are over the key's records and which reads the keys and the reserved state
        columns beside them (as the plugin resolves it: grouped by all of those)."""
        with lifted_depth_limit():
            if keys is None:
                return self._df.select(column).columns[0]
            grouping = [*keys, *S.RESERVED_COLUMNS.values()]
            return self._df.groupBy(*grouping).agg(column).columns[-1]


def compile_function(
    function: Any,
    state_schema: Any,
    df: "DataFrame",
    columns: Dict[str, T.DataType],
    group: bool,
    key_names: List[str],
    bindings: Optional[Bindings] = None,
    domain: Optional[str] = None,
) -> CompiledFunction:
    """Compiles ``function`` for an input with ``columns`` (``key_names`` among them): with
    its values copied where they are used (Spark generates code for all of it), or, when that
    makes a Column past :func:`~mapwithstate.pyfunc.bindings.copied_plan_limit`, with its
    large values named once (a plan that grows linearly with the source). ``bindings`` makes
    one of the two attempts. ``domain`` is the spec's timeout domain (processing time by
    default), which says when a kept timer is already due."""
    if bindings is None:
        attempt = partial(compile_function, function, state_schema, df, columns, group, key_names)
        tree = FunctionSource.of(function).tree
        limit = copied_plan_limit((tree.end_lineno or tree.lineno) - tree.lineno + 1)
        try:
            try:
                return attempt(Bindings(enabled=False, limit=limit), domain)
            except PlanTooLarge:
                return attempt(Bindings(enabled=True), domain)
        except RecursionError:
            # PySpark walks a Column recursively (its text, its message): one nested past
            # Python's recursion limit is refused as one past the server's depth.
            raise _too_deep(FunctionSource.of(function), None) from None
    source = FunctionSource.of(function)
    # Refuses now a Counter, defaultdict or deque the compiler does not follow, wherever it is.
    source.collection_variables  # noqa: B018 - made for its refusals
    state = _state_struct(df, state_schema)
    probe = _Probe(df, columns, state)
    tree = source.tree

    nesting = LetNesting(df.sparkSession)

    def type_of(node: ast.AST, column: Column) -> T.DataType:
        resolved = ctx.bindings.resolve(column)
        nesting.check(source, ctx.bindings.deepest)
        try:
            return probe.type_of(resolved)
        except CompileError:
            raise
        except Exception as e:  # noqa: BLE001 - Spark's analysis error, reported at the call
            raise source.error(
                node, "a pyspark.sql.functions call Spark cannot resolve", str(e).splitlines()[0]
            ) from None

    ctx = Context(source, columns, type_of, bindings=bindings, self_checks=not bindings.enabled)
    state_types: Dict[str, PyType] = {}
    for field in state.fields:
        state_type = from_spark(field.dataType)
        if state_type is None:
            raise source.error(
                tree,
                f"state field {field.name!r} of type {field.dataType.simpleString()}",
                "state fields may be numbers, strings, booleans, timestamps, "
                "dates, day-time intervals, arrays, maps and structs of them",
            )
        state_types[field.name] = state_type
    env = _bind(ctx, tree, columns, group, key_names)
    fields = {}
    for field in state.fields:
        py_type = state_types[field.name]
        column = S.state(field.name)
        if py_type.kind in ("int", "float"):
            column = column.cast(to_spark(py_type))
        fields[field.name] = Value(column, py_type, True)
    # A timing-out call reads the timer that fired, and the key loses it unless the call sets
    # another (a timer fires once); a call for data in a batch its timer is already due in
    # (the key has data, so it does not time out) spends it too, as Spark resets a timer the
    # call does not set: as mapwithstate.testing's runner.
    timer = Value(S.timeout_at(), DATETIME, True)
    if domain == "event_time":
        due = S.timeout_at() < S.watermark()
    else:
        due = S.timeout_at() <= S.batch_time()
    timer_left = Value(
        F.when(
            S.is_timing_out() | F.coalesce(due, F.lit(False)), F.lit(None).cast("timestamp")
        ).otherwise(S.timeout_at()),
        DATETIME,
        True,
    )
    path = PathState(env, fields, Value(S.state_exists(), BOOL, False), False, timer, timer_left)
    generator = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes(tree))
    interpreter = Interpreter(ctx, path, state, builtins.call, generator)
    interpreter.run(tree.body)

    exits = interpreter.exits
    final_fields = {name: _fold([(e.guard, e.path.fields[name]) for e in exits]) for name in fields}
    present = _fold([(e.guard, e.path.present) for e in exits])
    changed = _fold_cond([(e.guard, e.path.changed) for e in exits])
    sets_timer = any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "state"
        and n.func.attr in ("set_timer", "clear_timer")
        for n in ast.walk(tree)
    )

    update = remove = timeout_at = None
    keep: Cond = False
    if changed is not False:
        stored = [
            store(
                ctx,
                tree,
                f"state field {f.name!r}",
                state_types[f.name],
                f.dataType,
                final_fields[f.name],
            ).column.alias(f.name)
            for f in state.fields
        ]
        # Whether the key keeps a state, as a Python bool where the function always decides
        # the same (no remove Column, and no condition, for a function that never removes).
        kept = (
            present.const
            if present.is_const and isinstance(present.const, bool)
            else (present.column)
        )
        keep = c_and(changed, kept)
        update = F.struct(*stored) if keep is True else F.when(c_column(keep), F.struct(*stored))
        gone = c_and(changed, c_not(kept))
        remove = None if gone is False else c_column(gone)
    if sets_timer:
        timeout_at = _fold([(e.guard, e.path.timer_left) for e in exits]).column
    emit = _emit(ctx, tree, interpreter.emits, generator, state, key_names)

    # The values a call's outputs evaluate in any case: the new state's fields where every
    # call keeps the state, and the returned row's values where every call returns it (the
    # only Column a call timing out of an idle timeout evaluates).
    state_values = [final_fields[f.name] for f in state.fields] if keep is True else []
    emitted = interpreter.emits
    returned = (
        list(emitted[0].record.fields.values())
        if len(emitted) == 1 and not generator and emitted[0].guard is True
        else []
    )
    first_check = _check(_self_checked(ctx, state_values))
    timing_out_check = _check(_self_checked(ctx, returned))
    update, remove, emit, timeout_at = _checked(
        first_check, timing_out_check, update, remove, emit, timeout_at
    )
    update, remove, emit, timeout_at = (
        None if c is None else ctx.bindings.resolve(c) for c in (update, remove, emit, timeout_at)
    )
    nesting.check(source, ctx.bindings.deepest)
    outputs = (update, remove, emit, timeout_at)
    if bindings.limit and any(c is not None and len(str(c)) > bindings.limit for c in outputs):
        raise PlanTooLarge()
    depths: Dict[int, Tuple[Any, int]] = {}
    depth = max(message_depth(c, depths) for c in outputs if c is not None)
    if depth > DEPTH_LIMIT:
        raise _too_deep(source, depth)
    return CompiledFunction(update, remove, emit, timeout_at)


#: The deepest message a compiled Column may nest to: Spark Connect's server parses a request
#: to :data:`~mapwithstate.deep_plans.SERVER_DEPTH_LIMIT`, less the messages around the Column
#: (the relations of a query, the plugin's request), and PySpark walks a Column recursively,
#: about two Python frames per message (Python's recursion limit is 1000 by default).
DEPTH_LIMIT = 400


def _too_deep(source: FunctionSource, depth: Optional[int]) -> CompileError:
    """The error for a function whose Columns nest too deep to send (``depth``: how deep, in
    messages, where measured)."""
    nested = f"{depth} messages" if depth is not None else "past Python's recursion limit"
    return source.error(
        source.tree,
        f"state function {source.name}: its Columns nest too deep for Spark Connect "
        f"({nested}, at most {DEPTH_LIMIT}): each statement building on the last, and each "
        "named value, nests them a level deeper",
        "split the chain: compute part of it as a column of the input (a value column), "
        "or shorten the run of statements each using the last one's result",
    )


def _check(failures: List[Tuple[Cond, Message]]) -> Optional[Column]:
    """One Column raising the first of ``failures`` (in program order) whose condition holds,
    else null; None without failures."""
    if not failures:
        return None
    (first_cond, first_message), *more = failures
    check = F.when(c_column(first_cond), F.raise_error(_text(first_message)))
    for cond, message in more:
        check = check.when(c_column(cond), F.raise_error(_text(message)))
    return check


def _text(message: Message) -> Column:
    return F.lit(message) if isinstance(message, str) else message


def _self_checked(ctx: Context, evaluated: List[Any]) -> List[Tuple[Cond, Message]]:
    """The function's failures less those the Columns holding ``evaluated`` (values every
    call computes, after the checks) raise by themselves, in Python's order.

    A failure is left to its value (a :class:`~mapwithstate.pyfunc.interpreter.Carrier`,
    registered where every call runs) where the value is one of ``evaluated`` or an operand
    of one, which evaluates its operands first. Only the last failures are left so, after
    every other check has passed; and among them, each must be an operand of the next (so
    evaluated before it), lest two failing in one call raise out of Python's order. The
    running count's one overflow check is then its value's: no check before its Columns."""
    carriers = {id(failure): carrier for failure, carrier in ctx.carriers}
    by_text = {carrier.column: carrier for carrier in carriers.values()}
    texts = [str(v.column) for v in evaluated if isinstance(v, Value)]
    # A cast evaluates what it casts.
    reached = set(texts) | {ctx.casts[t] for t in texts if t in ctx.casts}
    for failure in reversed(ctx.failures):
        carrier = carriers.get(id(failure))
        if carrier is not None and carrier.column in reached:
            reached.update(carrier.operands)

    def operands_of(carrier: Any) -> Set[str]:
        found: Set[str] = set()
        pending = [carrier]
        while pending:
            for operand in pending.pop().operands:
                if operand not in found:
                    found.add(operand)
                    if operand in by_text:
                        pending.append(by_text[operand])
        return found

    kept = len(ctx.failures)
    later = None
    while kept:
        carrier = carriers.get(id(ctx.failures[kept - 1]))
        if carrier is None or carrier.column not in reached:
            break
        if later is not None and carrier.column not in operands_of(later):
            break
        later = carrier
        kept -= 1
    return ctx.failures[:kept]


def _checked(
    first_check: Optional[Column],
    timing_out_check: Optional[Column],
    update: Optional[Column],
    remove: Optional[Column],
    emit: Optional[Column],
    timeout_at: Optional[Column],
) -> Tuple[Optional[Column], ...]:
    """The four Columns with the function's runtime checks (each check: null where none
    fails, else it raises) made once per call, before anything else of the call is evaluated.

    The operator evaluates a call's Columns in one order (``CompiledStateFunction``):
    ``remove``, then ``update`` unless the key was removed, then ``emit``, then
    ``timeout_at``; a key timing out of an idle timeout evaluates ``emit`` alone. So
    ``first_check`` goes into the first of them the function has, which every call evaluates
    first, and ``timing_out_check``, for the idle timeout's calls, into ``emit`` where
    ``is_timing_out`` holds. A check that fails raises, so ``F.when(ok, c)`` is ``c`` wherever
    the call goes on. Without checks (the outputs' values raise where Python does, see
    :func:`_self_checked`) the Columns are left as they are."""
    columns = [remove, update, emit, timeout_at]
    if first_check is not None and all(c is None for c in columns[:3]):
        columns[0] = F.lit(False)
    first = next((i for i, c in enumerate(columns) if c is not None), None)
    if first is None:
        return update, remove, emit, timeout_at
    if first_check is not None:
        columns[first] = F.when(first_check.isNull(), columns[first])
    if timing_out_check is not None and first < 2 and emit is not None:
        timing_out_ok = F.when(S.is_timing_out(), timing_out_check).isNull()
        columns[2] = F.when(timing_out_ok, emit)
    remove, update, emit, timeout_at = columns
    return update, remove, emit, timeout_at


def _bind(
    ctx: Context,
    tree: ast.FunctionDef,
    columns: Dict[str, T.DataType],
    group: bool,
    key_names: List[str],
) -> Dict[str, Any]:
    source = ctx.source
    args = tree.args
    if args.vararg or args.kwarg or args.posonlyargs or args.kwonlyargs:
        raise source.error(
            tree,
            "*args, **kwargs, keyword-only or positional-only parameters",
            "parameters are plain names: columns, state, rows (a default bound to a "
            "parameter that names no column)",
        )
    names = [a.arg for a in args.args]
    defaults = dict(zip(names[len(names) - len(args.defaults) :], _defaults(source), strict=True))
    if "state" not in names:
        raise source.error(
            tree,
            f"state function {tree.name} has no 'state' parameter",
            "add a parameter named state",
        )
    if group and "rows" not in names:
        raise source.error(
            tree,
            f"{tree.name} has no 'rows' parameter",
            "map_groups_with_state takes a group function: def f(<key columns>, rows, state)",
        )
    if not group and "rows" in names:
        raise source.error(
            tree,
            f"{tree.name} has a 'rows' parameter",
            "a group function runs with map_groups_with_state",
        )
    env: Dict[str, Any] = {}
    for arg in args.args:
        name = arg.arg
        if name == "state":
            env[name] = StateObject()
        elif name == "rows":
            env[name] = Rows()
        elif name in defaults and name not in (key_names if group else columns):
            env[name] = _default(ctx, arg, defaults[name])
        elif group and name not in key_names:
            raise source.error(
                arg,
                f"parameter {name!r} is not a key column",
                f"a group function's parameters are rows, state and key "
                f"columns ({', '.join(key_names)}); read values as r.<column>",
            )
        elif name not in columns:
            raise source.error(
                arg,
                f"parameter {name!r} names no column",
                f"the input's columns are {', '.join(columns)}",
            )
        else:
            py_type = from_spark(columns[name])
            if py_type is None:
                raise source.error(
                    arg,
                    f"column {name!r} of type {columns[name].simpleString()}",
                    "no exact Python type for it; cast it before the call",
                )
            column = F.col(name)
            if py_type.kind in ("int", "float"):
                column = column.cast(to_spark(py_type))
            env[name] = Value(column, py_type, True)
    return env


def _defaults(source: FunctionSource) -> Tuple[Any, ...]:
    """The values of the function's default parameters (as Python evaluated them when it
    defined the function)."""
    return tuple(getattr(source.function, "__defaults__", None) or ())


def _default(ctx: Context, arg: ast.arg, value: Any) -> Value:
    """A parameter naming no column, bound to its default: a constant, captured as a module
    constant is (a number, string, None, datetime, timedelta, a frozenset of them). A list,
    dict or set default is refused: Python shares it between calls, so a change made in one
    call shows in the next, which a compiled call cannot do."""
    from datetime import date, timedelta

    from mapwithstate.pyfunc.interpreter import captured

    immutable = (bool, int, float, str, type(None), date, timedelta, frozenset)
    bound = captured(ctx, arg, value) if isinstance(value, immutable) else None
    if not isinstance(bound, Value):
        raise ctx.source.error(
            arg,
            f"parameter {arg.arg!r} names no column and its default is a {type(value).__name__}",
            f"name a column ({', '.join(ctx.columns)}), or give an immutable default: a "
            "number, string, None, datetime, timedelta or frozenset (Python shares a "
            "list, dict or set default between calls); a module constant is captured too",
        )
    return bound


def _own_nodes(tree: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes of the function's body, not of nested scopes."""
    stack: List[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(
                child, (ast.FunctionDef, ast.Lambda, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                stack.append(child)


def _fold(choices: List[Any]) -> Value:
    """The value of the exit taken: exits are exclusive, the last one is the default."""
    from mapwithstate.pyfunc.paths import merge_values

    result = choices[-1][1]
    for guard, value in reversed(choices[:-1]):
        result = merge_values(guard, value, result)
    return result


def _fold_cond(choices: List[Any]) -> Cond:
    result = choices[-1][1]
    for guard, value in reversed(choices[:-1]):
        if value is result:
            continue
        result = (
            value
            if guard is True
            else c_and(guard, value)
            if result is False
            else select(guard, c_column(value), c_column(result))
        )
    return result


def _emit(
    ctx: Context,
    tree: ast.FunctionDef,
    emits: List[Emit],
    generator: bool,
    state: T.StructType,
    key_names: List[str],
) -> Optional[Column]:
    if not emits:
        # A function that never returns or yields a row emits none, as in Python: an emit that
        # is always null (without one, output='emitted' is refused), of the key columns (an
        # output needs a column).
        return F.when(F.lit(False), F.struct(*map(F.col, key_names))) if key_names else None
    names = list(emits[0].record.fields)
    for emit in emits[1:]:
        if list(emit.record.fields) != names:
            raise ctx.source.error(
                tree,
                f"emitted dicts with different keys (line {emits[0].line}: "
                f"{', '.join(names)}; line {emit.line}: {', '.join(emit.record.fields)})",
                "every emitted dict has the same keys, in the same order",
            )
    types: Dict[str, PyType] = {}
    for name in names:
        joined = _column_type(ctx, tree, emits, name)
        # An int-or-float column is a DOUBLE, as the testing runner stores it.
        types[name] = FLOAT if joined.kind == "num" else joined
    structs = []
    end_guard = ctx.guard
    for emit in emits:
        if emit.rows is not None:
            structs.append((emit.guard, _loop_rows(ctx, emit, types)))
            continue
        columns = []
        # What storing a row checks holds where the row is emitted.
        ctx.guard = emit.guard
        for name in names:
            py_type = types[name]
            spark_type = to_spark(py_type) if py_type.kind != "none" else T.StringType()
            value = (
                store(
                    ctx,
                    emit.node or tree,
                    f"output column {name!r}",
                    py_type,
                    spark_type,
                    emit.record.fields[name],
                    exact=True,
                )
                if py_type.kind != "none"
                else Value(F.lit(None).cast("string"), py_type, True)
            )
            field = _held_by_state(emit, value, py_type, state)
            column = value.column
            if field is not None:
                # Where the call is not timing out of an idle timeout (whose key is removed
                # whatever the function does), the value is in the new state already.
                column = F.when(S.is_timing_out(), column).otherwise(S.new_state(field))
            columns.append(column.alias(name))
        structs.append((emit.guard, F.struct(*columns)))
    ctx.guard = end_guard
    if generator:
        if any(e.rows is not None for e in emits):
            # A loop's rows among single ones, in the order the function yields them.
            empty = F.array().cast(T.ArrayType(_emitted_type(types)))
            pieces = [
                select(g, s, empty) if e.rows is not None else F.array(select(g, s, F.lit(None)))
                for e, (g, s) in zip(emits, structs, strict=True)
            ]
            return F.filter(F.concat(*pieces), lambda r: r.isNotNull())
        rows = [F.when(c_column(g), s) if g is not True else s for g, s in structs]
        return F.filter(F.array(*rows), lambda r: r.isNotNull())
    result = None
    for guard, struct in structs:
        if guard is True:
            result = struct if result is None else result.otherwise(struct)
            break
        result = (
            F.when(c_column(guard), struct)
            if result is None
            else result.when(c_column(guard), struct)
        )
    return result


def _column_type(ctx: Context, tree: ast.FunctionDef, emits: List[Emit], name: str) -> PyType:
    """Output column ``name``'s one type over every emitted row, refused where rows differ."""
    return unified(
        (emit.record.fields[name].type for emit in emits),
        lambda one, other: ctx.source.error(
            tree,
            f"output column {name!r} is {one} in one row and {other} in another",
            "give it one type",
        ),
    )


def _emitted_type(types: Dict[str, PyType]) -> T.StructType:
    """The Spark type of an emitted row whose columns have ``types``."""
    return T.StructType(
        [
            T.StructField(n, to_spark(t) if t.kind != "none" else T.StringType())
            for n, t in types.items()
        ]
    )


def _loop_rows(ctx: Context, emit: Emit, types: Dict[str, PyType]) -> Column:
    """The rows a loop yielded as emitted rows: their columns must have the emitted rows'
    types already (a conversion that may fail, as of an int into a float column, is refused)."""
    assert emit.rows is not None
    shape = tuple((name, value.type) for name, value in emit.record.fields.items())
    spark_types = {f.name: f.dataType for f in _emitted_type(types).fields}
    rows = rows_as(emit.rows.column, shape, spark_types)
    if rows is None:
        column = next(n for n, t in shape if t != types[n] and t.kind != "none")
        raise ctx.source.error(
            emit.node,
            f"output column {column!r} yielded in a loop as {emit.record.fields[column].type} "
            f"and elsewhere as {types[column]}",
            "give it one type in every row (float(...) for numbers)",
        )
    return rows


def _held_by_state(emit: Emit, value: Value, py_type: PyType, state: T.StructType) -> Optional[str]:
    """The state field that holds ``value`` (an output column's, as stored) once the call
    returns ``emit``'s row, if one does exactly: the call keeps a state, the field's value is
    the same expression, and the field has the Spark type of ``py_type``'s output column.
    Emitting it then reads the stored state (``new_state``) rather than computing the value a
    second time, as a Column spec's ``emit`` does; a yielded row may precede later updates, so
    only a returned row does."""
    path = emit.path
    if path is None or value.is_const or value.type != py_type:
        return None
    if not (path.present.is_const and path.present.const is True):
        return None
    text = str(value.column)
    for state_field in state.fields:
        held = path.fields[state_field.name]
        if (
            held.type == py_type
            and state_field.dataType == to_spark(py_type)
            and str(held.column) == text
        ):
            return state_field.name
    return None
