package io.mapwithstate.execution

import io.mapwithstate.plan.{MapWithStateOptions, OutputKind, StateFunction, TimerDomain}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, UnsafeRow}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.metric.SQLMetric

/**
 * What the batch and the streaming mapWithState operators share: their inputs (the records,
 * clustered by key, and optionally the initial state, clustered alike), the timeout policy
 * their options give, and the [[PartitionRunner]] their tasks run. A concrete operator only
 * says where each partition's state comes from and which batches it runs.
 *
 * Both count the same metrics under the same names (see [[PartitionMetrics]]).
 */
trait MapWithStateExecBase extends SparkPlan {
  def keys: Seq[Attribute]
  def values: Seq[Attribute]
  def function: StateFunction
  def options: MapWithStateOptions
  def child: SparkPlan
  def initialState: Option[SparkPlan]
  /** The input's event-time column (from `withWatermark`), a column of `child`. */
  def eventTime: Option[Attribute]

  /**
   * A group function's aggregates over no records, in `values` order: the values a
   * timing-out call sees (None: a per-record function's timing-out calls see nulls).
   */
  def timingOutValues: Option[UnsafeRow]

  /**
   * A group function's late-row count, shared with the filter that drops its late rows before
   * its aggregation ([[LateRowFilterExec]]); None: the operator drops late rows itself.
   */
  def lateRowsMetric: Option[SQLMetric]

  /** Whether this operator drops late rows (a per-record function with event-time timers). */
  private def dropsLateRows: Boolean =
    timingOutValues.isEmpty && options.timerDomain.contains(TimerDomain.EventTime)

  override def children: Seq[SparkPlan] = child +: initialState.toSeq

  protected def timeoutPolicy: TimeoutPolicy =
    TimeoutPolicy.of(options.timeoutMs, options.checkpointInterval, options.timerDomain)

  /** The runner of this operator's tasks, with this operator's metrics. */
  protected def partitionRunner(): PartitionRunner = {
    val input = child.output
    def ordinal(a: Attribute): Int = input.indexWhere(_.exprId == a.exprId)
    val snapshots = options.outputKind == OutputKind.Snapshots
    PartitionRunner(
      // Snapshot output is the state alone: what `emit` would produce is not computed.
      function = if (snapshots) function.copy(emit = None) else function,
      inputWidth = input.size,
      keyOrdinals = keys.map(ordinal),
      dataOrdinals = (keys ++ values).map(ordinal),
      keyTypes = keys.map(_.dataType),
      snapshotLayout = if (snapshots) Some(output) else None,
      timeouts = timeoutPolicy,
      timingOutValues = timingOutValues.toSeq.flatMap { row =>
        values.zipWithIndex.map { case (v, i) => ordinal(v) -> row.get(i, v.dataType) }
      },
      groups = timingOutValues.isDefined,
      metrics = PartitionMetrics(
        numOutputRows = longMetric("numOutputRows"),
        numUpdatedStateRows = longMetric("numUpdatedStateRows"),
        numRemovedStateRows = longMetric("numRemovedStateRows"),
        numTimedOutKeys = longMetric(MapWithStateExecBase.TimedOutKeysMetric),
        numLateRowsDropped = metrics.get(MapWithStateExecBase.LateRowsMetric)),
      lateRows = eventTime.filter(_ => dropsLateRows).map(ordinal))
  }

  /** Each partition's records with the same partition of the initial state (or none). */
  protected def recordsAndInitialState(): RDD[(Iterator[InternalRow], Iterator[InternalRow])] =
    initialState match {
      case Some(init) =>
        child.execute().zipPartitions(init.execute()) { (records, initial) =>
          Iterator.single((records, initial))
        }
      case None =>
        child.execute().mapPartitions(records => Iterator.single((records, Iterator.empty)))
    }
}

object MapWithStateExecBase {
  val TimedOutKeysMetric = "numTimedOutKeys"
  /** Late rows dropped, in the metric and words of Spark's stateful operators. */
  val LateRowsMetric = "numRowsDroppedByWatermark"
  val LateRowsDescription = "number of rows which are dropped by watermark"
}
