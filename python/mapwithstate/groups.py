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
    order_by: Optional[ColumnsOrNames] = None,
    output: str = "emitted",
    until: Optional[Until] = None,
    include_timer_only_keys: bool = False,
) -> "DataFrame":
    """Runs ``df`` through ``spec`` once per key and batch, like Spark's
    ``flatMapGroupsWithState``.

    Each batch, the spec's state function is called once for every key with records in it,
    then for every key timing out. It sees the key columns, the key's state (``S.*``) and any
    Spark aggregate over the key's records of the batch (``F.count("*")``, ``F.sum("v")``,
    ``F.collect_list("v")``...; a Python function's ``rows``: ``len(rows)``,
    ``sum(r.v for r in rows)``...), computed before the state is touched, with partial
    aggregation before the shuffle. ``emit`` may be a struct (one row) or an array of structs
    (any number of rows).

    :param df: the input, batch or streaming, of a Spark Connect session or of a classic one
        (with the plugin jar and ``spark.sql.extensions`` set, see :mod:`mapwithstate.classic`).
    :param key: the key column(s): names or Columns (an expression needs an alias).
    :param spec: the :class:`StateSpec`; a non-key column outside an aggregate is an error, as
        in ``groupBy().agg()``.
    :param batch_time: batch input only: a TIMESTAMP column; the input is replayed as a sequence
        of batches in ascending batch time. Without it the whole input is one batch.
    :param batch_interval: with ``batch_time``: every step of this duration from the first to
        the last batch time is a batch, empty ones included, so timeouts fire as they would live.
    :param order_by: the order in which order-sensitive aggregates (``collect_list``,
        ``first``, ``last``) read a key's records of a batch or micro-batch, ties in arrival
        order; without it they read them in no promised order.
    :param output: ``"emitted"``, ``"snapshots"`` (every key's state after each batch) or,
        for a batch DataFrame, ``"final_state"``: every key's state after the last batch as
        :func:`~mapwithstate.read_state` shows it, which ``spec.initial_state(df,
        last_updated="last_updated")`` resumes, or ``"final_watermark"``: the event-time
        watermark after the last batch (see :func:`~mapwithstate.map_with_state`).
    :param until: with ``batch_time``: the replay goes on after its last record up to this
        time, as :func:`map_with_state`'s ``until``.
    :param include_timer_only_keys: with ``output="final_state"``: also the keys holding only
        a timer, and a ``has_state`` column, as :func:`~mapwithstate.map_with_state`'s.

    >>> from pyspark.sql import functions as F
    >>> import mapwithstate as mws
    >>> from mapwithstate import StateSpec, map_groups_with_state, functions as S
    >>> spark = mws.local_session()  # doctest: +SKIP
    >>> df = spark.createDataFrame([("a", 1), ("a", 2), ("b", 5)], "k STRING, v BIGINT")
    ... # doctest: +SKIP
    >>> spec = StateSpec.function("total BIGINT",
    ...     update=F.struct((F.coalesce(S.state("total"), F.lit(0)) + F.sum("v")).alias("total")),
    ...     emit=F.struct(F.col("k"), S.new_state("total").alias("total")))
    >>> map_groups_with_state(df, key="k", spec=spec).show()  # doctest: +SKIP
    >>> in_order = StateSpec.function("n BIGINT",
    ...     update=F.struct(F.count("*").alias("n")),
    ...     emit=F.struct(F.col("k"), F.collect_list("v").alias("vs")))
    >>> map_groups_with_state(df, "k", in_order, order_by="v").show()  # doctest: +SKIP
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
        until=until,
        include_timer_only_keys=include_timer_only_keys,
    )
