"""The vocabulary of a state function: Columns that stand for the key's state and the batch.

Inside ``StateSpec.function(update=..., remove=..., emit=...)`` the key and value columns are
in scope by their own names (``F.col("word")``), and these functions give the rest::

    from pyspark.sql import functions as F
    from mapwithstate import StateSpec, functions as S

    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")),
    )

They only mean something inside a StateSpec; elsewhere Spark reports them as unknown columns.

They return the kind of Column ``pyspark.sql.functions`` returns at the time of the call — a
Spark Connect Column in a Connect process, a classic Column while a classic SparkContext is
active — so they mix with the rest of the state function; before any session exists they
return Connect Columns, which a classic session cannot use: build a classic spec after
``SparkSession.builder.getOrCreate()``.
"""

from typing import Optional

from pyspark.sql import Column

__all__ = [
    "state",
    "new_state",
    "state_exists",
    "is_timing_out",
    "batch_time",
    "timeout_at",
    "watermark",
]

#: The state function's own input columns, by function, as state_spec.proto defines them (the
#: one place the client names them; tests/test_contract.py checks them against the proto).
RESERVED_COLUMNS = {
    "state": "__mws_state",
    "state_exists": "__mws_state_exists",
    "is_timing_out": "__mws_is_timing_out",
    "batch_time": "__mws_batch_time",
    "new_state": "__mws_new_state",
    "timeout_at": "__mws_timeout_at",
    "watermark": "__mws_watermark",
}
_STATE = RESERVED_COLUMNS["state"]
_STATE_EXISTS = RESERVED_COLUMNS["state_exists"]
_IS_TIMING_OUT = RESERVED_COLUMNS["is_timing_out"]
_BATCH_TIME = RESERVED_COLUMNS["batch_time"]
_NEW_STATE = RESERVED_COLUMNS["new_state"]
_TIMEOUT_AT = RESERVED_COLUMNS["timeout_at"]
_WATERMARK = RESERVED_COLUMNS["watermark"]


def _col(name: str) -> Column:
    """``name`` as the Column kind in use: classic while a classic SparkContext is active (and
    the process is not in Connect mode, as ``pyspark.sql.functions`` decides), else Connect."""
    from pyspark import SparkContext
    from pyspark.sql.utils import is_remote

    if not is_remote() and SparkContext._active_spark_context is not None:
        from pyspark.sql import functions as classic_or_connect

        return classic_or_connect.col(name)
    # Connect's own functions make Connect Columns whether or not a session exists.
    from pyspark.sql.connect import functions as connect

    return connect.col(name)


def _struct_or_field(name: str, field: Optional[str]) -> Column:
    column = _col(name)
    return column if field is None else column.getField(field)


def state(field: Optional[str] = None) -> Column:
    """The key's state before the current record: the whole struct, or one field of it.

    Null when the key has no state (see :func:`state_exists`). For a timing-out call it is the
    state that times out.

    >>> S.state("n")  # doctest: +SKIP
    """
    return _struct_or_field(_STATE, field)


def new_state(field: Optional[str] = None) -> Column:
    """The key's state after the current record (usable in ``emit`` only).

    It is what ``update`` produced, or the state as it was when ``update`` gave null; null when
    the record removed the state or the key times out.
    """
    return _struct_or_field(_NEW_STATE, field)


def state_exists() -> Column:
    """Whether the key had a state before the current record (a BOOLEAN Column)."""
    return _col(_STATE_EXISTS)


def is_timing_out() -> Column:
    """True when the call is for a key whose state times out: its value columns are null.
    With the idle ``timeout``, ``update`` and ``remove`` are not applied, ``emit`` is, then the
    state is removed; with ``timeout_at`` timers all of them apply and the state is kept unless
    ``remove`` is true."""
    return _col(_IS_TIMING_OUT)


def batch_time() -> Column:
    """The time of the batch being processed (a TIMESTAMP Column). In a long batch of
    Real-Time Mode (``trigger(realTime=...)``), the wall clock read for the call instead (see
    docs/kafka.md)."""
    return _col(_BATCH_TIME)


def timeout_at() -> Column:
    """The key's timer before the current call (a TIMESTAMP Column), null when it has none."""
    return _col(_TIMEOUT_AT)


def watermark() -> Column:
    """The current event-time watermark (a TIMESTAMP Column), null when the input has none
    (no ``withWatermark``) or none is known yet (before the first batch of a replay)."""
    return _col(_WATERMARK)
