"""``StateSpec``: the state function of a mapWithState, as in Spark's ``StateSpec.function``."""

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping, Optional, Tuple, Union

from pyspark.sql import Column
from pyspark.sql.types import StructType

from mapwithstate import ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["StateSpec"]

Duration = Union[str, timedelta]
SettingValue = Union[int, str]


@dataclass(frozen=True)
class Setting:
    """One plain-valued builder setting of a ``StateSpec``: its name, which is both the Python
    builder method's and the ``mapwithstate.StateSpec`` proto field's, and the builder method
    of the JVM ``io.mapwithstate.StateSpec`` that sets it."""

    name: str
    jvm_method: str


#: The settings table: both serializers (the Connect proto in ``connect_plan``, the JVM spec in
#: ``classic``) iterate it, so that a new plain-valued setting is one row here.
SETTINGS: Mapping[str, Setting] = {
    s.name: s
    for s in (
        Setting("num_partitions", "numPartitions"),
        Setting("timeout", "timeout"),
        Setting("checkpoint_interval", "checkpointInterval"),
        Setting("timeout_domain", "timeoutDomain"),
        Setting("backend", "backend"),
    )
}

#: The spec's Column fields, in the order the JVM's ``StateSpec.function`` takes them after the
#: schema; each is also the name of its ``mapwithstate.StateSpec`` proto field.
COLUMNS: Tuple[str, ...] = ("update", "remove", "emit", "timeout_at")


@dataclass(frozen=True)
class InitialState:
    """The state loaded before the first batch: a DataFrame of the key columns and the state's
    fields, and optionally the names of its columns holding each key's first timer and, for
    state read back that the query resumes, each key's last update time."""

    df: "DataFrame"
    timeout_at: Optional[str] = None
    last_updated: Optional[str] = None
    #: The BOOLEAN column saying which keys have a state (false: a timer only), if named.
    has_state: Optional[str] = None
    #: The event-time watermark the resumed run starts from, if given.
    watermark: Optional[Union[datetime, str]] = None


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
    >>> dict(spec.settings)
    {'timeout': '30 minutes', 'num_partitions': 4}
    """

    state_schema: Union[str, StructType]
    update: Optional[Column] = None
    remove: Optional[Column] = None
    emit: Optional[Column] = None
    timeout_at: Optional[Column] = None
    #: The state loaded before the first batch (:meth:`initial_state`), if any.
    initial: Optional[InitialState] = None
    #: The plain-valued settings made so far, by their names in ``SETTINGS``.
    settings: Mapping[str, SettingValue] = field(default_factory=lambda: MappingProxyType({}))
    #: How a restart converts the checkpoint's state from an older schema (:meth:`migrate`).
    migration: Optional[Column] = None

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
        if isinstance(state_schema, str):
            # Spark's parser would refuse it only when the query is planned; say it here.
            ddl.check_struct(state_schema, "state_schema")
        elif not isinstance(state_schema, StructType):
            raise TypeError(
                "state_schema must be a DDL string or a StructType, got "
                f"{type(state_schema).__name__}"
            )
        for name, column in (
            ("update", update),
            ("remove", remove),
            ("emit", emit),
            ("timeout_at", timeout_at),
        ):
            if column is not None and not isinstance(column, Column):
                raise TypeError(f"{name} must be a Column, got {type(column).__name__}")
        return StateSpec(state_schema, update, remove, emit, timeout_at)

    def initial_state(
        self,
        df: "DataFrame",
        timeout_at: Optional[str] = None,
        last_updated: Optional[str] = None,
        has_state: Optional[str] = None,
        watermark: Optional[Union[datetime, str]] = None,
    ) -> "StateSpec":
        """Loads ``df`` — the key columns and the state's fields, one row per key — before the
        first batch. With ``timeout_at`` (a column name of ``df``, a TIMESTAMP; null for
        none) each key also starts with that timer. :func:`map_with_state` only seeds the
        state with it, as a DStream's ``mapWithState`` does; :func:`map_groups_with_state`
        also calls each of its keys in the first batch, with no records if it has none there
        (aggregates over no rows), as ``flatMapGroupsWithState`` does.

        With ``last_updated`` (a column name of ``df``, a TIMESTAMP) the query *resumes* state
        read back — the rows of :func:`~mapwithstate.read_state` or of a replay's
        ``output="final_state"``, taken as they are — as if the run that left it had gone
        on: each key's idle clock (:meth:`timeout`) runs from its ``last_updated`` (a null
        value: from the first batch's time, as without it), and no key is called before a
        record or its timeout calls it (a group function's keys are not called in the first
        batch: the earlier run called them). With ``timeout_at`` timers a key's one time is
        its timer, and ``last_updated`` (null in such state) is not used. ``df`` may then also
        hold read_state's other columns: ``partition`` and, when not named as ``timeout_at``,
        ``timeout_at``; both are ignored. Any other extra column is refused.

        Two more arguments resume what the default columns cannot carry (both need
        ``last_updated``). ``has_state`` names the BOOLEAN column that says which keys have a
        state — ``has_state``, which ``read_state`` and ``output="final_state"`` add when
        asked with ``include_timer_only_keys=True`` — and a row where it is false resumes a
        key holding only its timer (its state fields are not read), so the timer fires in the
        resumed run as in one long run. A ``has_state`` column that is not named is refused,
        as any other extra column. ``watermark`` (a ``datetime``, or a string Spark casts to
        TIMESTAMP; the input needs ``withWatermark``) is the event-time watermark the run
        starts from: a replay's ``output="final_watermark"``. Every batch's watermark is then
        the later of it and the query's own — for late rows, event-time timers and
        ``S.watermark()``, in every batch, also after a restart from the checkpoint with the
        same spec — which is what one run over the history and the live data would have.

        >>> from pyspark.sql import functions as F
        >>> from mapwithstate import StateSpec, functions as S
        >>> spec = StateSpec.function(
        ...     "n BIGINT", update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")))
        >>> history = spark.createDataFrame(  # doctest: +SKIP
        ...     [("a", 3, datetime(2026, 1, 1), None)],
        ...     "word STRING, n BIGINT, last_updated TIMESTAMP, timeout_at TIMESTAMP")
        >>> live = spec.timeout("1 day").initial_state(  # doctest: +SKIP
        ...     history, last_updated="last_updated")
        >>> resumed = spec.initial_state(  # doctest: +SKIP
        ...     final, timeout_at="timeout_at", last_updated="last_updated",
        ...     has_state="has_state", watermark=datetime(2026, 1, 1, 9, 59))
        """
        from pyspark.sql import DataFrame as AnyDataFrame

        if not isinstance(df, AnyDataFrame):
            raise TypeError(f"initial_state must be a DataFrame, got {type(df).__name__}")
        columns = (("timeout_at", timeout_at), ("last_updated", last_updated))
        for name, column in columns + (("has_state", has_state),):
            if column is not None and not isinstance(column, str):
                raise TypeError(
                    f"initial_state's {name} must be a column name, got {type(column).__name__}"
                )
        if watermark is not None and not isinstance(watermark, (datetime, str)):
            raise TypeError(
                "initial_state's watermark must be a datetime or a string Spark casts to "
                f"TIMESTAMP ('2026-01-01 10:00:00'), got {type(watermark).__name__}"
            )
        resumed_only = [
            name
            for name, value in (("has_state", has_state), ("watermark", watermark))
            if value is not None
        ]
        if resumed_only and last_updated is None:
            raise ValueError(
                f"initial_state's {' and '.join(resumed_only)} resume state read back "
                "(read_state's or output='final_state''s rows): name its last_updated column "
                "too (last_updated='last_updated')"
            )
        return replace(
            self, initial=InitialState(df, timeout_at, last_updated, has_state, watermark)
        )

    def timeout_domain(self, domain: str) -> "StateSpec":
        """What ``timeout_at`` timers are compared with: ``"processing_time"`` (the default;
        the batch time, as ``GroupStateTimeout.ProcessingTimeTimeout``) or ``"event_time"``
        (the input's watermark, from ``withWatermark``, as ``EventTimeTimeout``; records at
        or before the watermark are then dropped as late)."""
        if not isinstance(domain, str):
            raise TypeError(f"timeout_domain must be a string, got {type(domain).__name__}")
        return self._with("timeout_domain", domain)

    def num_partitions(self, n: int) -> "StateSpec":
        """Spreads the state over ``n`` partitions (default: the session's shuffle partitions)."""
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"num_partitions must be an int, got {type(n).__name__}")
        return self._with("num_partitions", n)

    def timeout(self, duration: Duration) -> "StateSpec":
        """Removes a key's state when no record has come for it for ``duration``: a string such
        as ``"30 seconds"`` or a ``timedelta``. Timed-out keys are found on checkpoint batches
        (see :meth:`checkpoint_interval`), and the state function is called for each one.
        Cannot be combined with ``timeout_at``."""
        return self._with("timeout", duration_text(duration, "timeout"))

    def checkpoint_interval(self, n_batches: int) -> "StateSpec":
        """Scans the state for timed-out keys on every ``n_batches``-th batch (default 10, as
        Spark checkpoints a mapWithState every 10 batch intervals)."""
        if not isinstance(n_batches, int) or isinstance(n_batches, bool):
            raise TypeError(f"checkpoint_interval must be an int, got {type(n_batches).__name__}")
        return self._with("checkpoint_interval", n_batches)

    def backend(self, name: str) -> "StateSpec":
        """Where each partition's state is kept: ``"memory"`` (the default: on the heap, the
        fastest, held to ``spark.mapwithstate.stateStore.maxPartitionBytes``) or ``"rocksdb"``
        (Spark's RocksDB state store on the executors' local disk, for state larger than
        memory). A streaming query keeps the backend its checkpoint was started with."""
        if not isinstance(name, str):
            raise TypeError(f"backend must be a str, got {type(name).__name__}")
        return self._with("backend", name)

    def migrate(self, update: Column) -> "StateSpec":
        """How a query restarted from its checkpoint with a changed ``state_schema`` turns each
        key's old state into the new: ``update``, a struct Column with the new state's fields
        (by name and in order, as ``update`` of :meth:`function`), over the **old** state —
        :func:`~mapwithstate.functions.state` names a field of the schema the checkpoint
        holds — and the key columns; a null struct removes the key. It replaces the automatic
        conversion of a compatible change (see "Changing the state schema" in the docs), so
        renames, splits, recomputed fields and any type change work.

        Applied on the server once per key, in the first micro-batch after the restart and
        before the key's first call in the new schema; each key keeps its timer and idle
        clock. Once that batch is committed the state is in the new schema: a later restart
        with the same schema ignores ``migrate`` (nothing to migrate), so the migration runs
        exactly once however often the query restarts. A migration that fails on a key fails
        the query naming the key, and leaves the checkpoint as the old query left it. A field
        the old schema does not have is refused at ``start()``, listing the old fields.

        >>> from pyspark.sql import functions as F
        >>> from mapwithstate import StateSpec, functions as S
        >>> spec = StateSpec.function(  # the state was "count BIGINT"
        ...     "total BIGINT, doubled BIGINT",
        ...     update=F.struct((F.coalesce(S.state("total"), F.lit(0)) + 1).alias("total"),
        ...                     (F.coalesce(S.state("total"), F.lit(0)) * 2 + 2).alias("doubled")),
        ... ).migrate(F.struct(S.state("count").alias("total"),
        ...                    (S.state("count") * 2).alias("doubled")))
        >>> spec.migration is not None
        True
        """
        if not isinstance(update, Column):
            raise TypeError(f"migrate must be a Column, got {type(update).__name__}")
        return replace(self, migration=update)

    def _with(self, name: str, value: SettingValue) -> "StateSpec":
        assert name in SETTINGS, name
        return replace(self, settings=MappingProxyType({**self.settings, name: value}))


def duration_text(value: Duration, what: str) -> str:
    """A duration as the server parses it; the server also checks that it makes sense."""
    if isinstance(value, timedelta):
        return f"{value // timedelta(microseconds=1)} microseconds"
    if isinstance(value, str):
        return value
    raise TypeError(
        f"{what} must be a string such as '30 seconds' or a timedelta, got {type(value).__name__}"
    )
