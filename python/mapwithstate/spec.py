"""``StateSpec``: the state function of a mapWithState, as in Spark's ``StateSpec.function``."""
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Optional, Union

from pyspark.sql import Column
from pyspark.sql.types import StructType

from mapwithstate.proto import state_spec_pb2

if TYPE_CHECKING:
    from pyspark.sql.connect.client import SparkConnectClient
    from pyspark.sql.connect.dataframe import DataFrame

__all__ = ["StateSpec"]

Duration = Union[str, timedelta]


@dataclass(frozen=True)
class StateSpec:
    """What a key's state is, how each record changes it, and what each record emits.

    Build one with :meth:`StateSpec.function`; the other methods return a new ``StateSpec``
    with one more setting, as Spark's ``StateSpec`` builder does.

    >>> from pyspark.sql import functions as F
    >>> from mapwithstate import StateSpec, functions as S
    >>> spec = (StateSpec.function(
    ...         "n BIGINT",
    ...         update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
    ...         emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    ...     .timeout("30 minutes")
    ...     .num_partitions(4))
    """

    state_schema: Union[str, StructType]
    update: Optional[Column] = None
    remove: Optional[Column] = None
    emit: Optional[Column] = None
    _initial_state: Optional["DataFrame"] = None
    _num_partitions: Optional[int] = None
    _timeout: Optional[str] = None
    _checkpoint_interval: Optional[int] = None
    timeout_at: Optional[Column] = None
    _timeout_domain: Optional[str] = None
    _initial_state_timeout_at: Optional[str] = None
    _backend: Optional[str] = None

    @staticmethod
    def function(
        state_schema: Union[str, StructType],
        *,
        update: Optional[Column] = None,
        remove: Optional[Column] = None,
        emit: Optional[Column] = None,
        timeout_at: Optional[Column] = None,
    ) -> "StateSpec":
        """A state function over a state of type ``state_schema``.

        :param state_schema: the state's struct type, as a DDL string (``"n BIGINT"``) or a
            ``StructType``.
        :param update: a struct Column with the state's fields: the key's new state. A null
            struct keeps the state as it was; without ``update`` the state never changes.
        :param remove: a boolean Column: true removes the key's state (remove wins over update).
        :param emit: a struct Column whose fields are the output columns of
            ``output="emitted"``; a null struct emits nothing for the record.
        :param timeout_at: a TIMESTAMP Column evaluated on every call, after ``update`` (so
            :func:`~mapwithstate.functions.new_state` is in scope): the key's timer, as
            Spark's ``GroupState.setTimeoutTimestamp``; null clears it. The key times out in
            the first batch whose threshold (see :meth:`timeout_domain`) is strictly after
            it, with one call where ``is_timing_out()`` is true; its state is kept unless
            ``remove`` is true. As in Spark, a key may hold a timer without a state (a call
            that removes the state, or never made one, but sets a timer): its later calls see
            ``state_exists()`` false. Cannot be combined with :meth:`timeout`. As Spark's
            ``GroupState`` does, a call may not set a timer that is already due: one not after
            ``batch_time()`` (processing time) or, in event time, one not after the epoch or
            earlier than ``watermark()``; the query fails naming the key and the timer.

        The Columns see the key and value columns by name and the functions of
        :mod:`mapwithstate.functions`.
        """
        if not isinstance(state_schema, (str, StructType)):
            raise TypeError(
                f"state_schema must be a DDL string or a StructType, got {type(state_schema).__name__}")
        for name, column in (("update", update), ("remove", remove), ("emit", emit),
                             ("timeout_at", timeout_at)):
            if column is not None and not isinstance(column, Column):
                raise TypeError(f"{name} must be a Column, got {type(column).__name__}")
        return StateSpec(state_schema, update, remove, emit, timeout_at=timeout_at)

    def initial_state(self, df: "DataFrame", timeout_at: Optional[str] = None) -> "StateSpec":
        """Loads ``df`` — the key columns and the state's fields, one row per key — before the
        first batch. With ``timeout_at`` (a column name of ``df``, a TIMESTAMP; null for
        none) each key also starts with that timer. :func:`map_with_state` only seeds the
        state with it, as a DStream's ``mapWithState`` does; :func:`map_groups_with_state`
        also calls each of its keys in the first batch, with no records if it has none there
        (aggregates over no rows), as ``flatMapGroupsWithState`` does."""
        from pyspark.sql import DataFrame as AnyDataFrame

        if not isinstance(df, AnyDataFrame):
            raise TypeError(f"initial_state must be a DataFrame, got {type(df).__name__}")
        if timeout_at is not None and not isinstance(timeout_at, str):
            raise TypeError(f"initial_state's timeout_at must be a column name, got "
                            f"{type(timeout_at).__name__}")
        return replace(self, _initial_state=df, _initial_state_timeout_at=timeout_at)

    def timeout_domain(self, domain: str) -> "StateSpec":
        """What ``timeout_at`` timers are compared with: ``"processing_time"`` (the default;
        the batch time, as ``GroupStateTimeout.ProcessingTimeTimeout``) or ``"event_time"``
        (the input's watermark, from ``withWatermark``, as ``EventTimeTimeout``; records at
        or before the watermark are then dropped as late)."""
        if not isinstance(domain, str):
            raise TypeError(f"timeout_domain must be a string, got {type(domain).__name__}")
        return replace(self, _timeout_domain=domain)

    def num_partitions(self, n: int) -> "StateSpec":
        """Spreads the state over ``n`` partitions (default: the session's shuffle partitions)."""
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"num_partitions must be an int, got {type(n).__name__}")
        return replace(self, _num_partitions=n)

    def timeout(self, duration: Duration) -> "StateSpec":
        """Removes a key's state when no record has come for it for ``duration``: a string such
        as ``"30 seconds"`` or a ``timedelta``. Timed-out keys are found on checkpoint batches
        (see :meth:`checkpoint_interval`), and the state function is called for each one.
        Cannot be combined with ``timeout_at``."""
        return replace(self, _timeout=_duration(duration, "timeout"))

    def checkpoint_interval(self, n_batches: int) -> "StateSpec":
        """Scans the state for timed-out keys on every ``n_batches``-th batch (default 10, as
        Spark checkpoints a mapWithState every 10 batch intervals)."""
        if not isinstance(n_batches, int) or isinstance(n_batches, bool):
            raise TypeError(f"checkpoint_interval must be an int, got {type(n_batches).__name__}")
        return replace(self, _checkpoint_interval=n_batches)

    def backend(self, name: str) -> "StateSpec":
        """Where each partition's state is kept: ``"memory"`` (the default: on the heap, the
        fastest, held to ``spark.mapwithstate.stateStore.maxPartitionBytes``) or ``"rocksdb"``
        (Spark's RocksDB state store on the executors' local disk, for state larger than
        memory). A streaming query keeps the backend its checkpoint was started with."""
        if not isinstance(name, str):
            raise TypeError(f"backend must be a str, got {type(name).__name__}")
        return replace(self, _backend=name)

    def to_proto(self, client: "SparkConnectClient") -> state_spec_pb2.StateSpec:
        """The ``mapwithstate.StateSpec`` message for this spec."""
        message = state_spec_pb2.StateSpec()
        if isinstance(self.state_schema, str):
            message.state_schema_ddl = self.state_schema
        else:
            from pyspark.sql.connect.types import pyspark_types_to_proto_types

            message.state_schema_type.CopyFrom(pyspark_types_to_proto_types(self.state_schema))
        if self.update is not None:
            message.update.CopyFrom(self.update.to_plan(client))
        if self.remove is not None:
            message.remove.CopyFrom(self.remove.to_plan(client))
        if self.emit is not None:
            message.emit.CopyFrom(self.emit.to_plan(client))
        if self._initial_state is not None:
            message.initial_state.CopyFrom(self._initial_state._plan.plan(client))
        if self._num_partitions is not None:
            message.num_partitions = self._num_partitions
        if self._timeout is not None:
            message.timeout = self._timeout
        if self._checkpoint_interval is not None:
            message.checkpoint_interval = self._checkpoint_interval
        if self.timeout_at is not None:
            message.timeout_at.CopyFrom(self.timeout_at.to_plan(client))
        if self._timeout_domain is not None:
            message.timeout_domain = self._timeout_domain
        if self._initial_state_timeout_at is not None:
            message.initial_state_timeout_at = self._initial_state_timeout_at
        if self._backend is not None:
            message.backend = self._backend
        return message


def _duration(value: Duration, what: str) -> str:
    """A duration as the server parses it; the server also checks that it makes sense."""
    if isinstance(value, timedelta):
        return f"{value // timedelta(microseconds=1)} microseconds"
    if isinstance(value, str):
        return value
    raise TypeError(f"{what} must be a string such as '30 seconds' or a timedelta, "
                    f"got {type(value).__name__}")
