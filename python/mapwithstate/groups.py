"""``map_groups_with_state``: Spark's ``flatMapGroupsWithState`` over a Spark Connect or classic
DataFrame."""

from typing import TYPE_CHECKING, Optional

from mapwithstate import _request
from mapwithstate._request import ColumnOrName, ColumnsOrNames, Until
from mapwithstate.spec import Duration, StateSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["map_groups_with_state"]


def map_groups_with_state(
    df: "DataFrame",
    key: ColumnsOrNames,
    spec: StateSpec,
    *,
    batch_time: Optional[ColumnOrName] = None,
    batch_interval: Optional[Duration] = None,
    output: str = "emitted",
    until: Optional[Until] = None,
) -> "DataFrame":
    """Runs ``df`` through ``spec`` once per key and batch, like Spark's
    ``flatMapGroupsWithState``: the spec's Columns may use aggregates over the key's records of
    the batch. The arguments are :func:`map_with_state`'s (``until`` included), without
    ``value`` and ``order_by``.

    >>> from pyspark.sql import functions as F
    >>> from mapwithstate import StateSpec, map_groups_with_state, functions as S
    >>> spec = StateSpec.function("n BIGINT",
    ...     update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.count("*")).alias("n")),
    ...     emit=F.struct(F.col("k"), S.new_state("n").alias("n")))
    >>> map_groups_with_state(df, key="k", spec=spec).show()  # doctest: +SKIP
    """
    return _request.run(
        df,
        groups=True,
        key=key,
        spec=spec,
        batch_time=batch_time,
        batch_interval=batch_interval,
        output=output,
        until=until,
    )
