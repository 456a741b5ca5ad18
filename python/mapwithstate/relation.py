"""``map_with_state``: Spark's ``DStream.mapWithState`` over a Spark Connect or classic
DataFrame."""

from typing import TYPE_CHECKING, Optional

from mapwithstate import _request
from mapwithstate._request import ColumnOrName, ColumnsOrNames, Until
from mapwithstate.spec import Duration, StateSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["map_with_state"]


def map_with_state(
    df: "DataFrame",
    key: ColumnsOrNames,
    spec: StateSpec,
    *,
    value: Optional[ColumnsOrNames] = None,
    batch_time: Optional[ColumnOrName] = None,
    batch_interval: Optional[Duration] = None,
    order_by: Optional[ColumnsOrNames] = None,
    output: str = "emitted",
    until: Optional[Until] = None,
    include_timer_only_keys: bool = False,
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
    :param order_by: the order of a key's records within a batch, or within a micro-batch of
        a stream (sorted within each state partition, ties in arrival order); without it a
        stream's records come in arrival order.
    :param output: ``"emitted"``, ``"snapshots"`` (every key's state after each batch) or,
        for a batch DataFrame, ``"final_state"``: every key's state after the last batch (with
        ``until``, the batch at ``until``), one row per key with the columns of
        :func:`~mapwithstate.read_state` but ``partition``: the key columns, the state's
        fields, ``last_updated`` and ``timeout_at``. ``spec.initial_state(df,
        timeout_at=..., last_updated="last_updated")`` resumes it in another query, a stream
        or a replay of later data, which then goes on exactly as one run over both would
        (see the backfill recipe); a stream refuses it (use ``read_state``). Or
        ``"final_watermark"`` (the input needs ``withWatermark``): one row, ``watermark``
        (TIMESTAMP; null while no record had an event time), the event-time watermark after
        the last batch — the largest event time less the delay, at least ``until`` less the
        delay — which ``spec.initial_state(..., watermark=...)`` resumes, so late rows and
        event-time timers go on as in one run over both; it runs no state function.
    :param until: with ``batch_time``: the replay goes on after its last record up to this
        time (a ``datetime``, or a string Spark casts to TIMESTAMP), with an empty batch every
        ``batch_interval`` and the last one at ``until`` (without ``batch_interval``, that one
        batch), so idle timeouts and timers due by then fire as they would live; with an
        event-time watermark, the batch at ``until`` has the watermark ``until`` minus the
        delay. It may not be before the last batch time; streams take none.
    :param include_timer_only_keys: with ``output="final_state"``: also the keys holding only
        a timer (a call set a timer and removed or never set the state; their state fields
        null), and one more column, ``has_state`` (BOOLEAN, false for them), which
        ``spec.initial_state(..., has_state="has_state")`` resumes, so their timers fire in
        the resumed run. Without it such keys are left out, as ``read_state`` leaves them.

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
    return _request.run(
        df,
        groups=False,
        key=key,
        spec=spec,
        value=value,
        batch_time=batch_time,
        batch_interval=batch_interval,
        order_by=order_by,
        output=output,
        until=until,
        include_timer_only_keys=include_timer_only_keys,
    )
