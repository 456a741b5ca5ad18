"""``map_groups_with_state``: Spark's ``flatMapGroupsWithState`` over a Spark Connect or classic
DataFrame."""
from typing import TYPE_CHECKING, Optional, Union

from mapwithstate import classic
from mapwithstate.relation import (
    _OUTPUTS,
    ColumnOrName,
    ColumnsOrNames,
    MapWithStatePlan,
    _column,
    _columns,
    _names_or_columns,
)
from mapwithstate.pyfunc import compile_for
from mapwithstate.spec import StateSpec, _duration

if TYPE_CHECKING:
    from datetime import timedelta

    from pyspark.sql.connect.dataframe import DataFrame

__all__ = ["map_groups_with_state"]


def map_groups_with_state(
    df: "DataFrame",
    key: ColumnsOrNames,
    spec: StateSpec,
    *,
    batch_time: Optional[ColumnOrName] = None,
    batch_interval: Optional[Union[str, "timedelta"]] = None,
    output: str = "emitted",
) -> "DataFrame":
    """Runs ``df`` through ``spec`` once per key per batch, like Spark's
    ``mapGroupsWithState`` / ``flatMapGroupsWithState``.

    The spec's ``update``, ``remove`` and ``emit`` are evaluated once for each key that has
    records in the batch, and may use **aggregates over those records** (``F.count("*")``,
    ``F.sum("v")``, ``F.collect_list("v")``, any Spark aggregate) beside the key columns and
    ``mapwithstate.functions``; a non-key column outside an aggregate is an error, as in
    ``groupBy().agg()``. Then each timing-out key gets its last call, whose aggregates are over
    no records (``count`` 0, ``sum`` null, ``collect_list`` empty). ``emit`` may be a struct
    (one row, or none when null) or an array of structs (any number of rows). The aggregates
    are computed before the state is read, with partial aggregation before the shuffle, so a
    key with many records per batch costs one state read and write.

    Arguments and output kinds are those of :func:`mapwithstate.map_with_state`, without
    ``value`` and ``order_by``: the whole group is in scope. Streams accept
    ``outputMode("append")`` and ``outputMode("update")`` (the same rows), and
    ``outputMode("complete")`` when a streaming aggregation follows (Spark's
    flatMapGroupsWithState in append mode followed by ``groupBy().count()``).

    >>> from pyspark.sql import functions as F
    >>> from mapwithstate import StateSpec, map_groups_with_state, functions as S
    >>> df = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "k STRING, v INT")  # doctest: +SKIP
    >>> spec = StateSpec.function("n BIGINT, total BIGINT",
    ...     update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.count("*")).alias("n"),
    ...                     (F.coalesce(S.state("total"), F.lit(0)) + F.sum("v")).alias("total")),
    ...     emit=F.struct(F.col("k"), S.new_state("n").alias("n"),
    ...                   S.new_state("total").alias("total")))
    >>> map_groups_with_state(df, key="k", spec=spec).show()  # doctest: +SKIP
    """
    from pyspark.sql.connect.dataframe import DataFrame

    if not isinstance(spec, StateSpec):
        raise TypeError(f"spec must be a StateSpec, got {type(spec).__name__}")
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {sorted(_OUTPUTS)}, got {output!r}")
    spec = compile_for(spec, df, key, groups=True)
    if classic.is_classic_dataframe(df):
        # A classic session: the same request, made through the JVM API over py4j.
        return classic.map_groups_with_state(
            df, _names_or_columns(key, "key"), spec, batch_time,
            _duration(batch_interval, "batch_interval") if batch_interval is not None else None,
            output)
    if not isinstance(df, DataFrame):
        raise TypeError(
            f"map_groups_with_state needs a PySpark DataFrame (Spark Connect or classic), got "
            f"{type(df).__name__} (use mapwithstate.local_session() or SparkSession.builder...)")

    plan = MapWithStatePlan(
        df._plan,
        keys=_columns(key, "key"),
        values=[],
        spec=spec,
        batch_time=_column(batch_time, "batch_time") if batch_time is not None else None,
        batch_interval=(
            _duration(batch_interval, "batch_interval") if batch_interval is not None else None),
        order_by=[],
        output=_OUTPUTS[output],
        groups=True,
    )
    return DataFrame(plan, session=df.sparkSession)
