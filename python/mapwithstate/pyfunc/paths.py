"""The symbolic state of one path through a state function, and how two paths merge.

As TensorFlow's AutoGraph turns an ``if`` on tensors into a conditional op, the compiler runs
both branches of an ``if`` whose condition is a Column, each on its own copy of the path, and
merges them afterwards: every local variable and every part of the key's state becomes
``F.when(condition, then_value).otherwise(else_value)``. A variable assigned on one branch only
is *maybe unassigned* after the merge, and reading it is a compile error (Python would raise
``UnboundLocalError`` on the other path).
"""

from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional, Tuple

from mapwithstate.pyfunc.pytypes import PyType, to_spark, unify
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_not, c_or, select

__all__ = ["MaybeUnassigned", "BoundIf", "Record", "PathState", "converted", "merge_values"]


@dataclass(frozen=True)
class MaybeUnassigned:
    """A local variable assigned on some paths only (``line``: where it was assigned)."""

    line: int


@dataclass(frozen=True)
class BoundIf:
    """A local variable bound only where ``bound`` holds, to ``value`` there: a ``for`` loop's
    target after the loop, unbound where the loop ran no iteration. Reading it fails the query
    with Python's ``UnboundLocalError`` where it is unbound (``line``: the loop's)."""

    value: Value
    bound: Cond
    line: int


@dataclass(frozen=True)
class Record:
    """A dict display (``{"user": user, "n": n}``): the fields of an emitted row. A variable
    holding a dict on some paths and ``None`` on others (``alert = None`` ... ``alert =
    {...}`` ... ``return alert``) is a Record ``present`` only where it is a dict."""

    fields: Dict[str, Value]
    present: Cond = True


@dataclass
class PathState:
    """What a path has done so far: its locals, the key's state fields as the code sees them
    now, whether a state exists now (``present``), whether ``update``/``remove`` ran
    (``changed``) and the key's timer: ``timer`` as ``state.timer`` reads it now, and
    ``timer_left`` as the call would leave it. They differ only in a timing-out call that has
    not set or cleared the timer: it reads the timer that fired, which the key then loses."""

    env: Dict[str, Any]
    fields: Dict[str, Value]
    present: Value
    changed: Cond
    timer: Value
    timer_left: Value
    extra: Dict[str, Any] = field(default_factory=dict)
    #: The state fields (``state.<field>``) and parameters whose inner lists or dicts a change
    #: of a copy's items changed on this path (see :mod:`~mapwithstate.pyfunc.nested`): each
    #: with the change's line and the copy's name. Reading one is refused.
    stale: Dict[str, Tuple[int, str]] = field(default_factory=dict)

    def copy(self) -> "PathState":
        return replace(self, env=dict(self.env), fields=dict(self.fields), stale=dict(self.stale))


def _converted(value: Value, joined: PyType, spark_type: Any) -> Any:
    if joined.kind == "tuple" and value.type.kind == "tuple":
        # Element by element: an int element of an int-or-float tuple element becomes a struct.
        from pyspark.sql import functions as F

        from mapwithstate.pyfunc.pytypes import tuple_field

        parts = [
            converted(Value(value.column.getField(tuple_field(i)), t, True), joined.args[i])
            .cast(to_spark(joined.args[i]))
            .alias(tuple_field(i))
            for i, t in enumerate(value.type.args)
        ]
        column = F.struct(*parts)
        return F.when(value.column.isNotNull(), column) if value.nullable else column
    if joined.kind == "num" and value.type.kind in ("int", "float", "bool"):
        from pyspark.sql import functions as F

        is_int = value.type.kind != "float"
        return F.struct(
            (value.column.cast("bigint") if is_int else F.lit(None).cast("bigint")).alias("i"),
            (F.lit(None).cast("double") if is_int else value.column).alias("f"),
        )
    return value.column.cast(spark_type)


def _holds_num(py_type: PyType) -> bool:
    return py_type.kind == "num" or (
        py_type.kind in ("list", "set", "dict", "tuple")
        and any(_holds_num(t) for t in py_type.args)
    )


def converted(value: Value, joined: PyType) -> Any:
    """``value``'s Column as one of ``joined``, a type :func:`unify` made of ``value``'s
    and another's: a cast, but an int or a float becomes an int-or-float struct (``None``
    staying null), and so does each element of a list of them (``[v, 1.5]``, ``ints +
    floats``)."""
    if value.type == joined:
        return value.column
    if joined.kind in ("list", "set") and value.type.kind == joined.kind and _holds_num(joined):
        from pyspark.sql import functions as F

        element = value.type.args[0]
        return F.transform(
            value.column, lambda e: converted(Value(e, element, True), joined.args[0])
        )
    column = _converted(value, joined, to_spark(joined))
    if joined.kind == "num" and value.nullable and value.type.kind != "none":
        from pyspark.sql import functions as F

        column = F.when(value.column.isNotNull(), column)
    return column


def _is_none(value: Any) -> bool:
    return isinstance(value, Value) and value.type.kind == "none"


def merge_values(cond: Cond, a: Any, b: Any) -> Optional[Any]:
    """``a`` where ``cond`` holds, else ``b``; None when they cannot share one Column (values
    of different types, a Record and a value, Records with different keys)."""
    if a is b:
        return a
    if isinstance(a, MaybeUnassigned) or isinstance(b, MaybeUnassigned):
        return a if isinstance(a, MaybeUnassigned) else b
    if isinstance(a, BoundIf) or isinstance(b, BoundIf):
        value = merge_values(
            cond,
            a.value if isinstance(a, BoundIf) else a,
            b.value if isinstance(b, BoundIf) else b,
        )
        if not isinstance(value, Value):
            return None
        a_bound = a.bound if isinstance(a, BoundIf) else True
        b_bound = b.bound if isinstance(b, BoundIf) else True
        bound = c_or(c_and(cond, a_bound), c_and(c_not(cond), b_bound))
        line = a.line if isinstance(a, BoundIf) else b.line
        return value if bound is True else BoundIf(value, bound, line)
    if isinstance(a, Record) and _is_none(b):
        return Record(a.fields, c_and(cond, a.present))
    if _is_none(a) and isinstance(b, Record):
        return Record(b.fields, c_and(c_not(cond), b.present))
    if isinstance(a, Record) and isinstance(b, Record):
        if list(a.fields) != list(b.fields):
            return None
        present = (
            a.present
            if a.present is b.present
            else c_or(c_and(cond, a.present), c_and(c_not(cond), b.present))
        )
        merged = {}
        for name in a.fields:
            value = merge_values(cond, a.fields[name], b.fields[name])
            if value is None:
                return None
            merged[name] = value
        return Record(merged, present)
    if not isinstance(a, Value) or not isinstance(b, Value):
        return None
    if cond is True:
        return a
    if cond is False:
        return b
    joined = unify(a.type, b.type)
    if joined is None:
        return None
    left, right = converted(a, joined), converted(b, joined)
    const = (
        a.const
        if a.is_const and b.is_const and a.const == b.const and type(a.const) is type(b.const)
        else Value.__dataclass_fields__["const"].default
    )
    return Value(select(cond, left, right), joined, a.nullable or b.nullable, const)
