"""``map_groups_with_state``: Spark's ``flatMapGroupsWithState`` over a Spark Connect or classic
DataFrame."""

from typing import TYPE_CHECKING, Optional

from mapwithstate import _request
from mapwithstate._request import ColumnOrName, ColumnsOrNames
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
    order_by: Optional[ColumnsOrNames] = None,
    output: str = "emitted",
) -> "DataFrame":
    """Runs ``df`` through ``spec`` once per key and batch, like Spark's
    ``flatMapGroupsWithState``: the spec's Columns may use aggregates over the key's records of
    the batch (``F.count("*")``, ``F.sum("v")``, ``F.collect_list("v")``, any Spark aggregate).

    :param df: the input, batch or streaming, of a Spark Connect session or of a classic one.
    :param key: the key column(s): names or Columns (an expression needs an alias).
    :param spec: the :class:`StateSpec`.
    :param batch_time: batch input only: a TIMESTAMP column; the input is replayed as a sequence
        of batches in ascending batch time.
    :param batch_interval: with ``batch_time``: every step of this duration is a batch.
    :param order_by: the order in which order-sensitive aggregates (``collect_list``,
        ``first``, ``last``) read a key's records of a batch or micro-batch, ties in arrival
        order; without it they read them in no promised order.
    :param output: ``"emitted"`` or ``"snapshots"``.

    >>> from pyspark.sql import functions as F
    >>> import mapwithstate as mws
    >>> from mapwithstate import StateSpec, map_groups_with_state
    >>> spark = mws.local_session()  # doctest: +SKIP
    >>> rows = [("a", 2, "y"), ("a", 1, "x")]
    >>> df = spark.createDataFrame(rows, "k STRING, t INT, v STRING")  # doctest: +SKIP
    >>> spec = StateSpec.function("n BIGINT",
    ...     update=F.struct(F.count("*").alias("n")),
    ...     emit=F.struct(F.col("k"), F.collect_list("v").alias("vs")))
    >>> map_groups_with_state(df, "k", spec, order_by="t").show()  # doctest: +SKIP
    """
    return _request.run(
        df,
        groups=True,
        key=key,
        spec=spec,
        batch_time=batch_time,
        batch_interval=batch_interval,
        order_by=order_by,
        output=output,
    )
