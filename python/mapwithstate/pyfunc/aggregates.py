"""A group function's ``rows``: Python's reductions over a key's records of the batch become
Spark aggregates, so the operator keeps its partial aggregation before the shuffle.

``len(rows)``, ``sum/min/max/any/all/sorted(<expr> for r in rows [if <cond>])`` and
``[<expr> for r in rows [if <cond>]]`` (in record order) become aggregates; ``r.<column>``
reads a value column. Where Python would raise for some record (``None`` in a sum, ``max()``
of no rows), the aggregate counts such records and the query fails if there is one.

Elsewhere ``rows`` is Python's list of the records (:func:`rows_records`: ``collect_list`` of
a struct of the columns, in record order), and so is a generator's ``rows`` where what it
computes per record reads the call's context or another aggregate, which an aggregate cannot
(:class:`PerRecordReadsCall`). A record is read, not stored nor emitted whole: Python's holds
every input column (``Context.record_types``).
"""

import ast
import builtins as py
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mapwithstate.functions import RESERVED_COLUMNS
from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.bindings import Bindings
from mapwithstate.pyfunc.pytypes import (
    BOOL,
    FLOAT,
    INT,
    NUM,
    PyType,
    from_spark,
    list_of,
    row_of,
    to_spark,
)
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_column

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter, Message

__all__ = [
    "Rows",
    "RowVariable",
    "UntypedColumn",
    "aggregate",
    "rows_length",
    "rows_list",
    "rows_records",
    "PerRecordReadsCall",
    "over_records",
]

#: An aggregate's handler: the call, each record's value, and which records the filter keeps.
AggregateHandler = Callable[["Interpreter", ast.Call, Value, Column], Value]


class Rows:
    """The ``rows`` parameter of a group function."""


@dataclass(frozen=True)
class UntypedColumn:
    """``r.<column>`` of a column with no exact Python type (a decimal, binary): it may only
    be an argument of a ``pyspark.sql.functions`` call, which passes it on as a Column."""

    name: str
    column: Column
    data_type: T.DataType


class RowVariable:
    """The loop variable of a generator over ``rows``: ``r.<column>`` is that column."""

    def attribute(self, it: "Interpreter", node: ast.Attribute) -> Union[Value, UntypedColumn]:
        data_type = it.ctx.columns.get(node.attr)
        if data_type is None:
            raise it.ctx.refuse(
                node,
                f"unknown column {node.attr!r} of a row",
                f"the rows' columns are {', '.join(it.ctx.columns)}",
            )
        py_type = from_spark(data_type)
        column = F.col(node.attr)
        if py_type is None:
            return UntypedColumn(node.attr, column, data_type)
        if py_type.kind in ("int", "float"):
            column = column.cast("bigint" if py_type.kind == "int" else "double")
        return Value(column, py_type, True)

    def record(self, it: "Interpreter", node: ast.AST) -> Value:
        """The record itself (``[r for r in rows if ...]``), as ``for r in rows`` binds it: a
        struct of the columns with a Python type."""
        struct, row = _record(it, node, None)
        return Value(struct, row, False)


def _per_row(
    it: "Interpreter", generator: ast.comprehension, element: ast.expr
) -> Tuple[Value, Cond, List[Tuple[Cond, "Message"]]]:
    """The element and filter of a generator over rows, evaluated per record, and the
    failures a record may raise: each with the named values it reads bound inside it (see
    :meth:`~mapwithstate.pyfunc.bindings.Bindings.in_aggregate`)."""
    if not isinstance(generator.target, ast.Name):
        raise it.ctx.refuse(generator, "a target that is not a name", "for r in rows")
    saved_env, saved_failures, saved_guard = dict(it.path.env), it.ctx.failures, it.ctx.guard
    saved_self_checks, saved_bindings = it.ctx.self_checks, it.ctx.bindings
    it.path.env[generator.target.id] = RowVariable()
    # Per record, in the aggregation before the call: its checks are lifted into the call's.
    it.ctx.failures, it.ctx.guard, it.ctx.self_checks = [], True, False
    bindings = it.ctx.bindings = saved_bindings.in_aggregate()
    try:
        keep: Cond = True
        for condition in generator.ifs:
            keep = c_and(keep, it.condition(condition))
            it.ctx.guard = keep
        value = it.value(element)
        if not isinstance(keep, bool):
            keep = bindings.resolve(c_column(keep))
        failures = [
            (f if isinstance(f, bool) else bindings.resolve(c_column(f)), m)
            for f, m in it.ctx.failures
        ]
        value = _bound(bindings, value)
        computed = [
            value.column,
            *(c for c in (keep, *(f for f, _ in failures)) if not isinstance(c, bool)),
        ]
        if _reads_call(computed):
            raise PerRecordReadsCall()
        return value, keep, failures
    finally:
        it.path.env, it.ctx.failures, it.ctx.guard = saved_env, saved_failures, saved_guard
        it.ctx.self_checks, it.ctx.bindings = saved_self_checks, saved_bindings


class PerRecordReadsCall(Exception):
    """What a generator over rows computes per record reads the call's context (the state,
    ``state.watermark``, ...) or another aggregate (``r.v > total / len(rows)``): it cannot be
    computed inside an aggregate, which sees the key's records only, so the generator goes over
    the list of the records instead (:func:`over_records`)."""


#: The plugin's context columns, which an aggregate may not read.
_CONTEXT = re.compile("|".join(re.escape(c) for c in RESERVED_COLUMNS.values()))
#: The aggregate functions a compiled value may hold (an aggregate may not nest in another).
_AGGREGATE_CALL = re.compile(
    r"(?<![\w.])(count|count_if|collect_list|collect_set|try_sum|sum|avg|max|min|bool_and|"
    r"bool_or|first|last|any_value|max_by|min_by)\("
)


def _reads_call(columns: List[Column]) -> bool:
    """Whether any of ``columns`` reads the call's context or holds an aggregate."""
    return any(
        _CONTEXT.search(text) is not None or _AGGREGATE_CALL.search(text) is not None
        for text in (str(c) for c in columns)
    )


Result = TypeVar("Result")


def over_records(it: "Interpreter", rows: ast.expr, compile: Callable[[], Result]) -> Result:
    """``compile()`` with the name ``rows`` bound to the list of the key's records, in record
    order (Python's ``rows``): a generator over it is then a comprehension over that list,
    outside any aggregate."""
    assert isinstance(rows, ast.Name)
    marker = it.path.env[rows.id]
    it.path.env[rows.id] = rows_records(it, rows)[0]
    try:
        return compile()
    finally:
        it.path.env[rows.id] = marker


def _bound(bindings: Bindings, value: Value) -> Value:
    """``value`` (and a tuple's elements) with the names it reads bound."""
    parts = None if value.parts is None else tuple(_bound(bindings, p) for p in value.parts)
    return replace(value, column=bindings.resolve(value.column), parts=parts)


def _lift(it: "Interpreter", failures: List[Tuple[Cond, "Message"]]) -> None:
    for cond, message in failures:
        it.ctx.failures.append((c_and(it.ctx.guard, F.count_if(c_column(cond)) > 0), message))


def rows_records(
    it: "Interpreter", node: ast.AST, columns: Optional[List[str]] = None
) -> Tuple[Value, PyType]:
    """The key's records in record order, as a list of structs of ``columns`` (default:
    every column with a Python type), and the struct's row type: what ``for r in rows`` and
    ``max(rows, key=...)`` go over, ``r.<column>`` a field of it."""
    struct, row = _record(it, node, columns)
    return Value(F.collect_list(struct), list_of(row), False), row


def _record(
    it: "Interpreter", node: ast.AST, columns: Optional[List[str]]
) -> Tuple[Column, PyType]:
    """A record as a struct of ``columns`` (default: every column with a Python type), and
    its row type."""
    if columns is None:
        columns = [c for c, t in it.ctx.columns.items() if from_spark(t) is not None]
    fields: List[Tuple[str, PyType]] = []
    structs = []
    for column in columns:
        data_type = it.ctx.columns[column]
        py_type = from_spark(data_type)
        if py_type is None:
            raise it.ctx.refuse(
                node,
                f"column {column!r} of type {data_type.simpleString()} in a record of rows",
                "cast it before the call, or read it in an aggregate (sum(r.x for r in rows))",
            )
        fields.append((column, py_type))
        structs.append(F.col(column).cast(to_spark(py_type)).alias(column))
    if not structs:
        structs = [F.lit(0).alias("_")]
    row = row_of(tuple(fields))
    it.ctx.record_types.add(row)
    return F.struct(*structs), row


def rows_length(it: "Interpreter") -> Value:
    return Value(F.count(F.lit(1)).cast("bigint"), INT, False)


def rows_list(it: "Interpreter", node: ast.ListComp) -> Value:
    """``[expr for r in rows if cond]``: the records' values in record order, ``None``s
    kept."""
    value, keep, failures = _per_row(it, node.generators[0], node.elt)
    _lift(it, [(c_and(keep, f), m) for f, m in failures])
    wrapped = F.struct(value.column.alias("v"))
    collected = F.collect_list(wrapped if keep is True else F.when(c_column(keep), wrapped))
    return Value(F.transform(collected, lambda s: s.getField("v")), list_of(value.type), False)


def reduces(target: Any) -> bool:
    """Whether ``target(<expr> for r in rows)`` is one of the aggregates (else the generator is
    the records' list)."""
    return id(target) in _AGGREGATES


def aggregate(it: "Interpreter", node: ast.Call, target: Any, generator: ast.GeneratorExp) -> Value:
    """``sum/min/max/any/all/sorted/len(<expr> for r in rows [if <cond>])``."""
    if len(generator.generators) != 1 or node.keywords:
        raise it.ctx.refuse(
            node,
            "an aggregate with several for clauses or keywords",
            "one generator: sum(r.v for r in rows if ...)",
        )
    handler = _AGGREGATES.get(id(target))
    if handler is None:
        raise it.ctx.refuse(
            node,
            f"{getattr(target, '__name__', target)}() over rows",
            "rows are reduced with len, sum, min, max, any, all or sorted",
        )
    try:
        value, keep, failures = _per_row(it, generator.generators[0], generator.elt)
    except PerRecordReadsCall:
        from mapwithstate.pyfunc.builtins import call

        return over_records(it, generator.generators[0].iter, lambda: call(it, node))
    _lift(it, [(c_and(keep, f), m) for f, m in failures])
    return handler(it, node, value, c_column(keep))


def _nulls(it: "Interpreter", node: ast.AST, value: Value, keep: Column, message: str) -> None:
    if value.nullable:
        it.ctx.check(node, F.count_if(keep & value.column.isNull()) > 0, "TypeError", message)


def _in_order(value: Value, keep: Column) -> Column:
    """The kept records' values, in record order (a list)."""
    return F.transform(
        F.collect_list(F.when(keep, F.struct(value.column.alias("v")))), lambda s: s.getField("v")
    )


def _sum(it: "Interpreter", node: ast.Call, value: Value, keep: Column) -> Value:
    _nulls(it, node, value, keep, "unsupported operand type(s) for +: 'int' and 'NoneType'")
    if value.type.kind in ("int", "bool"):
        total = F.try_sum(F.when(keep, value.column.cast("bigint")))
        it.ctx.check(
            node,
            total.isNull() & (F.count_if(keep) > 0),
            "OverflowError",
            "int result does not fit in 64 bits (BIGINT)",
        )
        return Value(F.coalesce(total, F.lit(0).cast("bigint")), INT, False)
    if value.type.kind == "float":
        # Python adds in record order; Spark's sum adds partial sums in any order.
        total = F.aggregate(_in_order(value, keep), F.lit(0.0), lambda acc, x: acc + x)
        return Value(operators.int_or_float_sum(total, F.count_if(keep) == 0, F.lit(0)), NUM, False)
    raise it.ctx.refuse(node, f"sum() of {value.type} values", "sum ints or floats")


def _min_max(largest: bool) -> AggregateHandler:
    name = "max" if largest else "min"

    def handler(it: "Interpreter", node: ast.Call, value: Value, keep: Column) -> Value:
        it.ctx.check(
            node, F.count_if(keep) == 0, "ValueError", f"{name}() arg is an empty sequence"
        )
        if value.nullable:
            it.ctx.check(
                node,
                (F.count_if(keep) > 1) & (F.count_if(keep & value.column.isNull()) > 0),
                "TypeError",
                f"'{'>' if largest else '<'}' not supported between instances of "
                f"'NoneType' and '{value.type}'",
            )
        if value.type.kind == "float":
            from mapwithstate.pyfunc.ordering import list_min_max

            return list_min_max(
                it, node, Value(_in_order(value, keep), list_of(FLOAT), False), largest
            )
        if value.type.kind not in ("int", "str", "datetime", "date", "timedelta", "bool"):
            raise it.ctx.refuse(
                node,
                f"{name}() of {value.type} values",
                "min/max of ints, floats, strings or datetimes",
            )
        function = F.max if largest else F.min
        return Value(function(F.when(keep, value.column)), value.type, True)

    return handler


def _any_all(is_all: bool) -> AggregateHandler:
    def handler(it: "Interpreter", node: ast.Call, value: Value, keep: Column) -> Value:
        test = c_column(operators.truthy(value))
        if is_all:
            column = F.coalesce(F.bool_and(F.when(keep, test)), F.lit(True))
        else:
            column = F.coalesce(F.bool_or(F.when(keep, test)), F.lit(False))
        return Value(column, BOOL, False)

    return handler


def _sorted(it: "Interpreter", node: ast.Call, value: Value, keep: Column) -> Value:
    from mapwithstate.pyfunc.ordering import sorted_list as sort_list

    return sort_list(it, node, [Value(_in_order(value, keep), list_of(value.type), False)], {})


_AGGREGATES: Dict[int, AggregateHandler] = {
    id(py.sum): _sum,
    id(py.min): _min_max(False),
    id(py.max): _min_max(True),
    id(py.any): _any_all(False),
    id(py.all): _any_all(True),
    id(py.sorted): _sorted,
}
