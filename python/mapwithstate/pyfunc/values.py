"""Typed values over Columns: what a Python expression of a state function compiles to.

A :class:`Value` is a Spark Column with the Python type of its values and whether it may be
``None`` (a null Column). Conditions known when compiling stay Python ``bool`` s (:data:`Cond`)
so that code on paths that cannot run adds nothing to the plan.
"""

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union, cast

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc.pytypes import (
    BOOL,
    DATE,
    DATETIME,
    FLOAT,
    INT,
    NONE,
    STR,
    TIMEDELTA,
    PyType,
    to_spark,
)

__all__ = [
    "Value",
    "Cond",
    "NOTHING",
    "literal",
    "c_and",
    "c_or",
    "c_not",
    "c_column",
    "select",
    "let",
    "INLINE_LIMIT",
]

#: A condition: a Python bool when known at compile time, else a non-null BOOLEAN Column.
Cond = Union[bool, Column]


class _Nothing:
    def __repr__(self) -> str:
        return "NOTHING"


#: ``Value.const`` of a value not known at compile time.
NOTHING = _Nothing()


@dataclass(frozen=True)
class Value:
    """A compiled Python value: ``column`` holds it (null for ``None``), ``type`` is its
    Python type, ``nullable`` whether it may be ``None``; ``const`` is the Python value when
    known at compile time (literals, module constants); ``parts`` a tuple display's elements
    (``(a, b)``), each with its own nullability and constant, where the tuple was written
    out rather than read from a Column."""

    column: Column
    type: PyType
    nullable: bool
    const: Any = NOTHING
    parts: Optional[Tuple["Value", ...]] = field(default=None, compare=False)

    @property
    def is_const(self) -> bool:
        return self.const is not NOTHING

    def non_null(self) -> "Value":
        """The same value once a check made sure it is not ``None``."""
        return Value(self.column, self.type, False, self.const, self.parts)


def literal(value: Any) -> Value:
    """A Python constant as a Value (``None``, bool, int, float, str, date/datetime,
    timedelta; lists of them)."""
    from datetime import date, datetime, timedelta

    if value is None:
        return Value(F.lit(None), NONE, True, None)
    if isinstance(value, bool):
        return Value(F.lit(value), BOOL, False, value)
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise OverflowError(f"int {value} does not fit in 64 bits")
        return Value(F.lit(value).cast("bigint"), INT, False, value)
    if isinstance(value, float):
        return Value(F.lit(value).cast("double"), FLOAT, False, value)
    if isinstance(value, str):
        return Value(F.lit(value), STR, False, value)
    if isinstance(value, datetime):
        return Value(F.lit(value).cast(to_spark(DATETIME)), DATETIME, False, value)
    if isinstance(value, date):
        return Value(F.lit(value), DATE, False, value)
    if isinstance(value, timedelta):
        return Value(F.lit(value), TIMEDELTA, False, value)
    raise TypeError(type(value).__name__)


def c_column(cond: Cond) -> Column:
    return F.lit(cond) if isinstance(cond, bool) else cond


def c_and(a: Cond, b: Cond) -> Cond:
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return a & b


def c_or(a: Cond, b: Cond) -> Cond:
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return a | b


def c_not(a: Cond) -> Cond:
    if isinstance(a, bool):
        return not a
    return ~a


def select(cond: Cond, if_true: Column, if_false: Column) -> Column:
    """``if_true`` where ``cond`` holds, else ``if_false``."""
    if cond is True:
        return if_true
    if cond is False:
        return if_false
    flat = _flat_case(cond, if_true, if_false)
    return F.when(cond, if_true).otherwise(if_false) if flat is None else flat


def _flat_case(cond: Column, if_true: Column, if_false: Column) -> Optional[Column]:
    """On Spark Connect, ``CASE WHEN cond THEN if_true <if_false's branches>`` where
    ``if_false`` is itself a ``CASE``: the same value, one level deep rather than one more per
    ``elif`` (a long ``elif`` chain would nest past what Spark Connect sends, see
    :mod:`mapwithstate.deep_plans`). None where it does not apply."""
    if not type(if_false).__module__.startswith("pyspark.sql.connect"):
        return None
    from pyspark.sql.connect.column import Column as ConnectColumn
    from pyspark.sql.connect.expressions import CaseWhen

    rest = getattr(if_false, "_expr", None)
    if not isinstance(rest, CaseWhen):
        return None
    first = (cast(Any, F.lit(cond))._expr, cast(Any, F.lit(if_true))._expr)
    return ConnectColumn(CaseWhen([first, *rest._branches], rest._else_value))


#: The longest text of a Column copied into each of its uses rather than bound once (by
#: ``let``, or a variable's name in :mod:`~mapwithstate.pyfunc.bindings`): a column
#: reference, a literal, a cast or a small expression of them.
INLINE_LIMIT = 120


def let(columns: Sequence[Column], body: Callable[..., Column]) -> Column:
    """``body(*columns)`` with each column in the plan once, however often ``body`` uses it.

    A Column is a tree: an expression that uses a value three times holds three copies of its
    tree, and expressions built on expressions multiply their sizes. A large column is bound
    to a lambda variable instead, as ``transform(array(column), v -> body(v))[0]`` does in
    SQL (the ``let`` SQL lacks), so the plan grows with the source, not with the product of
    the uses. Small columns are passed through as they are, keeping small plans unchanged.
    ``body`` must return a value Column: a check on a bound column is made outside it.
    """
    large = [i for i, c in enumerate(columns) if len(str(c)) > INLINE_LIMIT]
    if not large:
        return body(*columns)

    def bound(row: Column) -> Column:
        args: List[Column] = list(columns)
        for i in large:
            args[i] = row.getField(f"_{i}")
        return body(*args)

    packed = F.struct(*[columns[i].alias(f"_{i}") for i in large])
    return F.transform(F.array(packed), bound)[0]
