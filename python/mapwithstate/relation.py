"""``map_with_state``: on a Spark Connect DataFrame, a DataFrame whose plan is the plugin's
relation; on a classic DataFrame, the same plan made through the JVM API (``classic``)."""
from typing import TYPE_CHECKING, List, Optional, Sequence, Union

from pyspark.sql import Column
from pyspark.sql.connect import functions as F
from pyspark.sql.connect import proto
from pyspark.sql.connect.plan import LogicalPlan

from mapwithstate import classic
from mapwithstate.proto import relations_pb2
from mapwithstate.pyfunc import compile_for
from mapwithstate.spec import StateSpec, _duration

if TYPE_CHECKING:
    from datetime import timedelta

    from pyspark.sql.connect.client import SparkConnectClient
    from pyspark.sql.connect.dataframe import DataFrame

__all__ = ["map_with_state"]

ColumnOrName = Union[str, Column]
ColumnsOrNames = Union[ColumnOrName, Sequence[ColumnOrName]]

_OUTPUTS = {
    "emitted": relations_pb2.MapWithState.OUTPUT_EMITTED,
    "snapshots": relations_pb2.MapWithState.OUTPUT_SNAPSHOTS,
}


class MapWithStatePlan(LogicalPlan):
    """The plan node: packs a ``mapwithstate.MapWithState`` into ``Relation.extension``."""

    def __init__(
        self,
        child: LogicalPlan,
        keys: List[Column],
        values: List[Column],
        spec: StateSpec,
        batch_time: Optional[Column],
        batch_interval: Optional[str],
        order_by: List[Column],
        output: "relations_pb2.MapWithState.Output.ValueType",
        groups: bool = False,
    ) -> None:
        super().__init__(child)
        self._keys = keys
        self._values = values
        self._spec = spec
        self._batch_time = batch_time
        self._batch_interval = batch_interval
        self._order_by = order_by
        self._output = output
        self._groups = groups

    def plan(self, session: "SparkConnectClient") -> proto.Relation:
        assert self._child is not None
        message = relations_pb2.MapWithState()
        message.input.CopyFrom(self._child.plan(session))
        message.keys.extend(k.to_plan(session) for k in self._keys)
        message.values.extend(v.to_plan(session) for v in self._values)
        message.spec.CopyFrom(self._spec.to_proto(session))
        if self._batch_time is not None:
            message.batch_time.CopyFrom(self._batch_time.to_plan(session))
        if self._batch_interval is not None:
            message.batch_interval = self._batch_interval
        for column in self._order_by:
            expression = column.to_plan(session)
            if not expression.HasField("sort_order"):
                expression = column.asc().to_plan(session)
            message.order_by.append(expression.sort_order)
        message.output = self._output
        message.groups = self._groups

        relation = self._create_proto_relation()
        relation.extension.Pack(message)
        return relation


def map_with_state(
    df: "DataFrame",
    key: ColumnsOrNames,
    spec: StateSpec,
    *,
    value: Optional[ColumnsOrNames] = None,
    batch_time: Optional[ColumnOrName] = None,
    batch_interval: Optional[Union[str, "timedelta"]] = None,
    order_by: Optional[ColumnsOrNames] = None,
    output: str = "emitted",
) -> "DataFrame":
    """Runs ``df`` through ``spec`` per key, like Spark's ``DStream.mapWithState``.

    The records of each key go, in order, through the spec's state function on the executors;
    the result is what ``emit`` produces (``output="emitted"``), or after each batch every key's
    state (``output="snapshots"``: ``batch_time``, the key columns and the state's fields).

    :param df: the input, batch or streaming, of a Spark Connect session or of a classic one
        (with the plugin jar and ``spark.sql.extensions`` set, see :mod:`mapwithstate.classic`).
    :param key: the key column(s): names or Columns (an expression needs an alias).
    :param spec: the :class:`StateSpec`.
    :param value: the value column(s) the state function sees; default every non-key column.
    :param batch_time: batch input only: a TIMESTAMP column; the input is replayed as a sequence
        of batches in ascending batch time, like a DStream over recorded data. Without it the
        whole input is one batch.
    :param batch_interval: with ``batch_time``: every step of this duration (``"10 seconds"``
        or a ``timedelta``) from the first to the last batch time is a batch, empty ones
        included, so timeouts fire as they would live.
    :param order_by: the order of a key's records within a batch.
    :param output: ``"emitted"`` or ``"snapshots"``.

    >>> from pyspark.sql import functions as F
    >>> import mapwithstate as mws
    >>> from mapwithstate import StateSpec, map_with_state, functions as S
    >>> spark = mws.local_session()  # doctest: +SKIP
    >>> df = spark.createDataFrame([("a",), ("b",), ("a",)], "word STRING")  # doctest: +SKIP
    >>> spec = StateSpec.function("n BIGINT",
    ...     update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
    ...     emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    >>> map_with_state(df, key="word", spec=spec).show()  # doctest: +SKIP
    """
    if not isinstance(spec, StateSpec):
        raise TypeError(f"spec must be a StateSpec, got {type(spec).__name__}")
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {sorted(_OUTPUTS)}, got {output!r}")
    interval = _duration(batch_interval, "batch_interval") if batch_interval is not None else None
    spec = compile_for(spec, df, key, value)
    if classic.is_classic_dataframe(df):
        # A classic session: the same request, made through the JVM API over py4j.
        return classic.map_with_state(
            df,
            keys=_names_or_columns(key, "key"),
            spec=spec,
            values=_names_or_columns(value, "value") if value is not None else [],
            batch_time=batch_time,
            batch_interval=interval,
            order_by=_names_or_columns(order_by, "order_by") if order_by is not None else [],
            output=output)
    if not classic.is_connect_dataframe(df):
        raise TypeError(
            f"map_with_state needs a PySpark DataFrame (Spark Connect or classic), got "
            f"{type(df).__name__}")
    _check_connect(spec)
    from pyspark.sql.connect.dataframe import DataFrame

    plan = MapWithStatePlan(
        df._plan,
        keys=_columns(key, "key"),
        values=_columns(value, "value") if value is not None else [],
        spec=spec,
        batch_time=_column(batch_time, "batch_time") if batch_time is not None else None,
        batch_interval=interval,
        order_by=_columns(order_by, "order_by") if order_by is not None else [],
        output=_OUTPUTS[output],
    )
    return DataFrame(plan, session=df.sparkSession)


def _check_connect(spec: StateSpec) -> None:
    """A spec for a Connect DataFrame holds Connect Columns and a Connect initial state."""
    for name, column in (("update", spec.update), ("remove", spec.remove), ("emit", spec.emit)):
        if column is not None:
            _column(column, f"spec.{name}")
    if spec._initial_state is not None and not classic.is_connect_dataframe(spec._initial_state):
        raise TypeError("spec.initial_state is a classic DataFrame, but the DataFrame is a Spark "
                        "Connect one: both must come from the same session")


def _column(value: ColumnOrName, what: str) -> Column:
    from pyspark.sql.connect.column import Column as ConnectColumn

    if isinstance(value, ConnectColumn):
        return value
    if isinstance(value, Column):
        raise TypeError(
            f"{what} is a classic Column, but the DataFrame is a Spark Connect one: build it "
            "with pyspark.sql.functions while the Connect session is active")
    if isinstance(value, str):
        return F.col(value)
    raise TypeError(f"{what} must be a column name or a Column, got {type(value).__name__}")


def _names_or_columns(value: ColumnsOrNames, what: str) -> List[ColumnOrName]:
    """``value`` as a list, each item checked to be a name or a Column."""
    items = [value] if isinstance(value, (str, Column)) else value
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"{what} must be a column name, a Column or a list of them, "
                        f"got {type(value).__name__}")
    for item in items:
        if not isinstance(item, (str, Column)):
            raise TypeError(
                f"{what} must be a column name or a Column, got {type(item).__name__}")
    return list(items)


def _columns(value: ColumnsOrNames, what: str) -> List[Column]:
    return [_column(v, what) for v in _names_or_columns(value, what)]
