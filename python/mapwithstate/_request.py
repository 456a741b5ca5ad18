"""The one request path of ``map_with_state`` and ``map_groups_with_state``.

Both public functions hand their arguments to :func:`run`, which checks them once, makes a
:class:`Request` and gives it to the serializer of the DataFrame's session kind:
``connect_plan`` (a ``mapwithstate.MapWithState`` relation for Spark Connect) or ``classic``
(the JVM API over py4j). Anything that rewrites a spec before it is sent — such as compiling a
Python-authored state function into Columns — belongs in :func:`run`, before the dispatch.
"""

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, List, Optional, Sequence, Tuple, Union

from pyspark.sql import Column

from mapwithstate import classic, connect_plan
from mapwithstate.pyfunc import compile_for
from mapwithstate.spec import COLUMNS, Duration, StateSpec, duration_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["ColumnOrName", "ColumnsOrNames", "OUTPUTS", "Request", "Until", "run"]

ColumnOrName = Union[str, Column]
ColumnsOrNames = Union[ColumnOrName, Sequence[ColumnOrName]]
#: A replay's end: a datetime, or a string Spark casts to TIMESTAMP (``"2026-01-01 10:00:00"``).
Until = Union[datetime.datetime, str]

#: The output kinds a request may ask for.
OUTPUTS = ("emitted", "snapshots", "final_state", "final_watermark")


@dataclass(frozen=True)
class Request:
    """A checked request: the arguments of ``map_with_state`` (``groups`` false) or
    ``map_groups_with_state`` (``groups`` true), columns still of the caller's session kind."""

    groups: bool
    keys: List[ColumnOrName]
    spec: StateSpec
    values: List[ColumnOrName]
    batch_time: Optional[ColumnOrName]
    batch_interval: Optional[str]
    order_by: List[ColumnOrName]
    output: str
    until: Optional[Until] = None
    include_timer_only_keys: bool = False

    @property
    def function(self) -> str:
        """The public function the request came through, as errors name it."""
        return "map_groups_with_state" if self.groups else "map_with_state"

    def columns(self) -> Iterator[Tuple[str, ColumnOrName]]:
        """Every column of the request, with the argument it came from as errors name it."""
        yield from (("key", k) for k in self.keys)
        yield from (("value", v) for v in self.values)
        if self.batch_time is not None:
            yield "batch_time", self.batch_time
        yield from (("order_by", o) for o in self.order_by)
        for name in COLUMNS:
            column = getattr(self.spec, name)
            if column is not None:
                yield f"spec.{name}", column
        if self.spec.migration is not None:
            yield "spec.migrate", self.spec.migration


def run(
    df: "DataFrame",
    *,
    groups: bool,
    key: ColumnsOrNames,
    spec: StateSpec,
    value: Optional[ColumnsOrNames] = None,
    batch_time: Optional[ColumnOrName] = None,
    batch_interval: Optional[Duration] = None,
    order_by: Optional[ColumnsOrNames] = None,
    output: str = "emitted",
    until: Optional[Until] = None,
    include_timer_only_keys: bool = False,
) -> "DataFrame":
    """The DataFrame of a ``map_with_state`` / ``map_groups_with_state`` call: the arguments
    are checked here, then the request is made through the session kind's serializer, which
    checks that every Column and the initial state are of that kind."""
    if not isinstance(spec, StateSpec):
        raise TypeError(f"spec must be a StateSpec, got {type(spec).__name__}")
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {sorted(OUTPUTS)}, got {output!r}")
    if until is not None and not isinstance(until, (datetime.datetime, str)):
        raise TypeError(
            "until must be a datetime or a string Spark casts to TIMESTAMP "
            f"('2026-01-01 10:00:00'), got {type(until).__name__}"
        )
    if not isinstance(include_timer_only_keys, bool):
        raise TypeError(
            f"include_timer_only_keys must be a bool, got {type(include_timer_only_keys).__name__}"
        )
    if include_timer_only_keys and output != "final_state":
        raise ValueError(
            "include_timer_only_keys is for output='final_state': the keys holding only a "
            "timer are shown there, as read_state(..., include_timer_only_keys=True) shows them"
        )
    # A Python-authored state function becomes Columns here, against df's schema.
    spec = compile_for(spec, df, key, value, groups=groups)
    request = Request(
        groups=groups,
        keys=_names_or_columns(key, "key"),
        spec=spec,
        values=_names_or_columns(value, "value") if value is not None else [],
        batch_time=_name_or_column(batch_time, "batch_time") if batch_time is not None else None,
        batch_interval=(
            duration_text(batch_interval, "batch_interval") if batch_interval is not None else None
        ),
        order_by=_names_or_columns(order_by, "order_by") if order_by is not None else [],
        output=output,
        until=until,
        include_timer_only_keys=include_timer_only_keys,
    )
    if classic.is_classic_dataframe(df):
        return classic.dataframe(df, request)
    if connect_plan.is_connect_dataframe(df):
        return connect_plan.dataframe(df, request)
    raise TypeError(
        f"{request.function} needs a PySpark DataFrame (Spark Connect or classic), got "
        f"{type(df).__name__} (use mapwithstate.local_session() or SparkSession.builder...)"
    )


def _name_or_column(value: object, what: str) -> ColumnOrName:
    if not isinstance(value, (str, Column)):
        raise TypeError(f"{what} must be a column name or a Column, got {type(value).__name__}")
    return value


def _names_or_columns(value: ColumnsOrNames, what: str) -> List[ColumnOrName]:
    """``value`` as a list, each item checked to be a name or a Column."""
    items = [value] if isinstance(value, (str, Column)) else value
    if not isinstance(items, (list, tuple)):
        raise TypeError(
            f"{what} must be a column name, a Column or a list of them, got {type(value).__name__}"
        )
    return [_name_or_column(item, what) for item in items]
