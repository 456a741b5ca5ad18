"""Rewriting a stopped streaming query's map_with_state state into another number of partitions.

The server does the work: it checks that the query is stopped, rewrites the state of every
map_with_state / map_groups_with_state operator of the checkpoint (either backend, timers and
idle-timeout clocks as they are) into the new partitions with one Spark job per operator, and
records the change as a micro-batch of its own, so that the restarted query continues with the
new partitions exactly where it stopped. On a classic session the same rewrite is run through
the JVM API ``io.mapwithstate.StateRepartitioner``.
"""

from typing import TYPE_CHECKING, Union

from pyspark.sql import Row

from mapwithstate import classic
from mapwithstate.proto import state_repartition_pb2
from mapwithstate.state_reader import ExtensionPlan, connect_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession as ClassicSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    SparkSession = Union[ConnectSession, ClassicSession]

__all__ = ["repartition_state"]


def repartition_state(spark: "SparkSession", checkpoint: str, num_partitions: int) -> Row:
    """Rewrites a stopped streaming query's map_with_state state into ``num_partitions``
    partitions; the query restarted on ``checkpoint`` continues exactly as it would have.

    Every map_with_state / map_groups_with_state operator of the query is rewritten, on either
    backend, with its keys' timers and idle-timeout clocks as they are. The rewrite is a
    micro-batch of its own that reads no input: ``spark.sql.shuffle.partitions`` is recorded in
    its offset log entry, from which the restarted query takes it (whatever the session sets).
    It is committed last, so an interrupted repartition leaves the old state whole: running this
    again with the same ``num_partitions`` finishes it, and until then a restart of the query is
    refused. State read with :func:`mapwithstate.read_state` after it is read in the new
    partitions.

    :param spark: a Spark Connect session on a server with the plugin, or a classic one with
        the plugin jar and its ``spark.sql.extensions`` (see :mod:`mapwithstate.classic`).
    :param checkpoint: the query's ``checkpointLocation``, as the server sees it.
    :param num_partitions: the number of state partitions to rewrite into, at least 1.
    :returns: a Row ``(operators, keys, batch_id, old_partitions, new_partitions)``: the
        operator ids rewritten, the keys they hold (None when the state already had
        ``num_partitions`` partitions and nothing was done), the repartition's micro-batch id
        and the partition counts before and after.
    :raises pyspark.errors.IllegalArgumentException: the path is not a checkpoint, holds no
        map_with_state state (or also Spark's own stateful operators' state), its query is
        running (in this application, or elsewhere mid-batch) or ``num_partitions`` is
        above ``spark.mapwithstate.maxNumPartitions``.

    >>> import mapwithstate as mws
    >>> spark = mws.local_session()  # doctest: +SKIP
    >>> query.stop()  # doctest: +SKIP
    >>> mws.repartition_state(spark, "ck/", 16)  # doctest: +SKIP
    Row(operators=[1000], keys=52311, batch_id=8, old_partitions=4, new_partitions=16)
    """
    if not isinstance(checkpoint, str) or not checkpoint:
        raise TypeError(f"checkpoint must be a non-empty path string, got {checkpoint!r}")
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int):
        raise TypeError(f"num_partitions must be an int, got {type(num_partitions).__name__}")
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    message = state_repartition_pb2.RepartitionState(
        checkpoint=checkpoint, num_partitions=num_partitions
    )
    if classic.is_classic_session(spark):
        return classic.repartition_state(spark, message)
    from pyspark.sql.connect.dataframe import DataFrame

    # Executed once: the server runs the rewrite when it plans this relation.
    plan = ExtensionPlan(message)
    (summary,) = DataFrame(plan, session=connect_session(spark)).collect()
    return summary
