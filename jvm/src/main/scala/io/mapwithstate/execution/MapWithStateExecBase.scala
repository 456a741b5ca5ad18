package io.mapwithstate.execution

import io.mapwithstate.plan.{FunctionKind, MapWithStateOptions, OutputKind, StateFunction}
import io.mapwithstate.plan.TimerDomain
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.metric.SQLMetric

/**
 * What the batch and the streaming mapWithState operators share: their inputs (the records,
 * clustered by key, and optionally the initial state, clustered alike), the timeout policy
 * their options give, and the [[PartitionRunner]] their tasks run. A concrete operator only
 * says where each partition's state comes from and which batches it runs.
 *
 * Both run the [[FunctionKind]] of their logical node, unchanged, and count the same metrics
 * under the same names (see [[PartitionMetrics]]).
 */
trait MapWithStateExecBase extends SparkPlan {
  def keys: Seq[Attribute]
  def kind: FunctionKind
  def function: StateFunction
  def options: MapWithStateOptions
  def child: SparkPlan
  def initialState: Option[SparkPlan]

  /** The input's event-time column (from `withWatermark`), a column of `child`. */
  def eventTime: Option[Attribute]

  /**
   * A group function's late-row count, shared with the filter that drops its late rows before
   * its aggregation ([[LateRowFilterExec]]); None: the operator drops late rows itself.
   */
  def lateRowsMetric: Option[SQLMetric]

  override def children: Seq[SparkPlan] = child +: initialState.toSeq

  protected def timeoutPolicy: TimeoutPolicy =
    TimeoutPolicy.of(options.timeoutMs, options.checkpointInterval, options.timerDomain)

  /** The runner of this operator's tasks, with this operator's metrics. */
  protected def partitionRunner(): PartitionRunner = {
    val input = child.output
    def ordinal(a: Attribute): Int = input.indexWhere(_.exprId == a.exprId)
    val stateRows = options.outputKind match {
      // The final watermark runs no state function (see MapWithStateExec).
      case OutputKind.Emitted | OutputKind.FinalWatermark => None
      case OutputKind.Snapshots => Some(StateRowsAfterBatch.Snapshots(output.map(_.dataType)))
      case OutputKind.FinalState(timerOnlyKeys) => Some(StateRowsAfterBatch.FinalState(
            output.map(_.dataType), function.stateType.length,
            timers = options.timerDomain.isDefined, timerOnlyKeys))
    }
    // With event-time timers, late rows are dropped by the operator from a per-record
    // function's records, and before the aggregation from a group function's.
    val lateRows = kind match {
      case _: FunctionKind.PerRecord =>
        eventTime.filter(_ => options.timerDomain.contains(TimerDomain.EventTime)).map(ordinal)
      case _: FunctionKind.PerGroup => None
    }
    PartitionRunner(
      // State output is the state alone: what `emit` would produce is not computed.
      function = if (stateRows.isDefined) function.copy(emit = None) else function,
      kind = kind,
      inputWidth = input.size,
      keyOrdinals = keys.map(ordinal),
      valueOrdinals = kind.values.map(ordinal),
      keyTypes = keys.map(_.dataType),
      stateRows = stateRows,
      initialState = options.initialState,
      timeouts = timeoutPolicy,
      metrics = PartitionMetrics(
        numOutputRows = longMetric("numOutputRows"),
        numUpdatedStateRows = longMetric("numUpdatedStateRows"),
        numRemovedStateRows = longMetric("numRemovedStateRows"),
        numTimedOutKeys = longMetric(MapWithStateExecBase.TimedOutKeysMetric),
        numLateRowsDropped = metrics.get(MapWithStateExecBase.LateRowsMetric)),
      lateRows = lateRows)
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
