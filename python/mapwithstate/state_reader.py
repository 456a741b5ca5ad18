"""Reading map_with_state's state back from a streaming query's checkpoint, as DataFrames.

Both readers are relations of the plugin: the server resolves the checkpoint (its key and
state schemas, partitions and committed batches) and its executors read the state files in
parallel, one task per state partition, wherever the checkpoint is (local, HDFS, object store).
They only read: a running query's checkpoint can be read while it runs, and only committed
batches are ever returned. On a classic session the same read is made through the JVM API
``io.mapwithstate.StateReader``, which plans the same relation.
"""

from typing import TYPE_CHECKING, Optional, Union

from pyspark.sql.connect import proto
from pyspark.sql.connect.plan import LogicalPlan

from mapwithstate import classic
from mapwithstate.proto import state_reader_pb2, state_repartition_pb2

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql import SparkSession as ClassicSession
    from pyspark.sql.connect.client import SparkConnectClient
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    SparkSession = Union[ConnectSession, ClassicSession]

ReadMessage = Union[state_reader_pb2.ReadState, state_reader_pb2.ReadStateChanges]
#: The plugin's messages that are relations of their own (no input).
ExtensionMessage = Union[ReadMessage, state_repartition_pb2.RepartitionState]

__all__ = ["read_state", "read_state_changes"]


class ExtensionPlan(LogicalPlan):
    """A leaf plan node: packs one of the plugin's messages (``ReadState``,
    ``ReadStateChanges``, ``RepartitionState``) into ``Relation.extension``."""

    def __init__(self, message: ExtensionMessage) -> None:
        super().__init__(None)
        self._message = message

    def plan(self, session: "SparkConnectClient") -> proto.Relation:
        relation = self._create_proto_relation()
        relation.extension.Pack(self._message)
        return relation


def read_state(
    spark: "SparkSession",
    checkpoint: str,
    *,
    batch_id: Optional[int] = None,
    operator_id: Optional[int] = None,
    in_current_schema: bool = False,
    include_timer_only_keys: bool = False,
) -> "DataFrame":
    """Every key's map_with_state state as committed after one micro-batch of a streaming query.

    The columns are the key columns, the state's fields, ``last_updated`` (TIMESTAMP: the batch
    time of the key's last update), ``timeout_at`` (TIMESTAMP, null while the key has no pending
    timer) and ``partition`` (INT: the state partition holding the key). The types come from the
    checkpoint itself. With timers (``timeout_at``, in either ``timeout_domain``) the state
    files keep the pending timer as the key's one time, and ``last_updated`` is null.

    :param spark: a Spark Connect session on a server with the plugin, or a classic one with
        the plugin jar and its ``spark.sql.extensions`` (see :mod:`mapwithstate.classic`).
    :param checkpoint: the query's ``checkpointLocation``, as the server sees it.
    :param batch_id: the micro-batch after which to read the state; default the last committed
        one (when the DataFrame is planned: each action reads the latest).
    :param operator_id: which map_with_state operator's state, for a query with several (as
        Spark's state data source's ``operatorId``): its id, the ``state/<operator_id>/``
        directory of the checkpoint. A query's operators are numbered from 1000 in its plan,
        from the sources on (in a chain the first one, in a union the left side's first).
        Default: the checkpoint's only one; a checkpoint with several refuses the read,
        listing their ids.
    :param in_current_schema: a batch written before a restart changed the ``state_schema``
        is read in its own state schema by default; ``True`` gives it in the checkpoint's
        current one (the newest, which its query now runs in), converted as the restarts
        converted it (fields added are null, widened types widened). A batch whose state a
        ``StateSpec.migrate`` carried over cannot be converted so, and is refused
        (``MAPWITHSTATE_STATE_SCHEMA_CHANGED``).
    :param include_timer_only_keys: also the keys holding only a timer (a call set a timer and
        removed or never set the state, as flatMapGroupsWithState keeps such keys; their state
        fields null), and one more column before ``partition``, ``has_state`` (BOOLEAN, false
        for them). By default they are left out: no other column tells them from a key whose
        state fields are all null. ``StateSpec.initial_state(..., has_state="has_state")``
        resumes them, so their timers fire in the resumed query.
    :raises pyspark.errors.IllegalArgumentException: the path is not a map_with_state
        checkpoint, ``operator_id`` is not one of its map_with_state operators (or is missing
        while it has several), the batch is not committed or has been cleaned up (naming the
        oldest one still readable); a damaged or missing state file fails the action naming
        the file.

    >>> import mapwithstate as mws
    >>> spark = mws.local_session()  # doctest: +SKIP
    >>> mws.read_state(spark, "ck/").where("word = 'a'").show()  # doctest: +SKIP
    >>> mws.read_state(spark, "ck/", batch_id=3).count()  # doctest: +SKIP
    >>> mws.read_state(spark, "two_operators_ck/", operator_id=1001).show()  # doctest: +SKIP
    >>> mws.read_state(spark, "ck/", batch_id=0, in_current_schema=True)  # doctest: +SKIP
    >>> mws.read_state(spark, "ck/", include_timer_only_keys=True)  # doctest: +SKIP
    """
    _check_checkpoint(checkpoint)
    message = state_reader_pb2.ReadState(
        checkpoint=checkpoint,
        in_current_schema=_bool(in_current_schema, "in_current_schema"),
        include_timer_only_keys=_bool(include_timer_only_keys, "include_timer_only_keys"),
    )
    if batch_id is not None:
        message.batch_id = _non_negative_int(batch_id, "batch_id")
    _set_operator(message, operator_id)
    return _dataframe(spark, message)


def read_state_changes(
    spark: "SparkSession",
    checkpoint: str,
    *,
    start_batch: int,
    end_batch: Optional[int] = None,
    operator_id: Optional[int] = None,
    in_current_schema: bool = False,
) -> "DataFrame":
    """The change feed of a map_with_state query's state: one row per change of a key in the
    micro-batches ``start_batch`` to ``end_batch`` (inclusive; default the last committed one).

    The columns are ``batch_id`` (BIGINT), ``change`` (``"update"`` or ``"delete"``), the key
    columns and the state's fields (null for a delete). Applying the changes of batches k + 1 to
    m, in batch order, to the state after batch k gives the state after batch m.

    :param spark: a Spark Connect or classic session, as in :func:`read_state`.
    :param checkpoint: the query's ``checkpointLocation``, as the server sees it.
    :param start_batch: the first micro-batch whose changes to return.
    :param end_batch: the last one; default the last committed micro-batch.
    :param operator_id: which map_with_state operator's changes, as in :func:`read_state`.
    :param in_current_schema: the state's fields in the checkpoint's current state schema, as
        in :func:`read_state` (a range of changes is always in one schema: the restart that
        converts the state writes it whole, so a range starts after it).
    :raises pyspark.errors.IllegalArgumentException: as :func:`read_state`, for either batch.

    >>> import mapwithstate as mws
    >>> spark = mws.local_session()  # doctest: +SKIP
    >>> changes = mws.read_state_changes(spark, "ck/", start_batch=2)  # doctest: +SKIP
    >>> changes.where("change = 'delete'").show()  # doctest: +SKIP
    """
    _check_checkpoint(checkpoint)
    message = state_reader_pb2.ReadStateChanges(
        checkpoint=checkpoint,
        start_batch=_non_negative_int(start_batch, "start_batch"),
        in_current_schema=_bool(in_current_schema, "in_current_schema"),
    )
    if end_batch is not None:
        message.end_batch = _non_negative_int(end_batch, "end_batch")
    _set_operator(message, operator_id)
    return _dataframe(spark, message)


def _dataframe(spark: "SparkSession", message: ReadMessage) -> "DataFrame":
    """The read of ``message``: a plugin relation on Spark Connect, the JVM API on classic."""
    from pyspark.sql.connect.dataframe import DataFrame

    if classic.is_classic_session(spark):
        return classic.read_state(spark, message)
    return DataFrame(ExtensionPlan(message), session=connect_session(spark))


def connect_session(spark: object) -> "ConnectSession":
    """``spark`` as the Spark Connect session it must be when it is not a classic one."""
    from pyspark.sql.connect.session import SparkSession

    if not isinstance(spark, SparkSession):
        raise TypeError(
            f"spark must be a SparkSession (Spark Connect or classic), got {type(spark).__name__} "
            "(use mapwithstate.local_session() or SparkSession.builder...)"
        )
    return spark


def _check_checkpoint(checkpoint: str) -> None:
    if not isinstance(checkpoint, str) or not checkpoint:
        raise TypeError(f"checkpoint must be a non-empty path string, got {checkpoint!r}")


def _set_operator(message: ReadMessage, operator_id: Optional[int]) -> None:
    """Sets the message's ``operator_id`` when one is given; the server checks that the
    checkpoint has it."""
    if operator_id is not None:
        message.operator_id = _non_negative_int(operator_id, "operator_id")


def _bool(value: bool, what: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, got {type(value).__name__}")
    return value


def _non_negative_int(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value
