package io.mapwithstate.execution

import io.mapwithstate.plan.{MapWithState, TimerDomain}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue

/**
 * Plans a [[MapWithState]]: over batch input as a [[MapWithStateExec]]; over streaming input as
 * a [[MapWithStateStreamExec]] with the state info of the micro-batch being planned (Spark's
 * IncrementalExecution assigns state info only to its own operators, and its state schema
 * rule needs it during planning, so it is filled in here), under the operator id of the node's
 * number in its query (see [[io.mapwithstate.plan.NumberStateOperators]]). A group function's
 * aggregation step ([[GroupAggregation]]) is planned below either operator.
 */
object MapWithStateStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case m: MapWithState if m.child.isStreaming =>
      val batch = StreamingQueryGlue.plannedMicroBatch(SparkSession.active,
        MapWithStateStreamExec.operatorId(m.stateOperatorIndex))
      // The initial state seeds a query's first batch only; a restarted query continues from
      // its checkpoint, so later batches do not even read it.
      val firstBatch = batch.forall(_.stateInfo.storeVersion == 0)
      val partitions = batch.map(_.stateInfo.numPartitions)
        .getOrElse(SparkSession.active.sessionState.conf.numShufflePartitions)
      val watermarkMs = batch.map(_.batchWatermarkMs).getOrElse(0L)
      val lateRows = lateRowsMetric(m)
      MapWithStateStreamExec(m.keys, m.values, m.function, m.options, m.output,
        batch.map(_.stateInfo), batch.map(_.batchTimestampMs).getOrElse(0L),
        batch.exists(_.terminatingTrigger),
        records(m, partitions, lateRows.map(_ -> LateRowFilterExec.Fixed(watermarkMs * 1000L))),
        m.initialState.filter(_ => firstBatch).map(planLater), m.eventTime, watermarkMs,
        timingOutValues(m), lateRows) :: Nil
    case m: MapWithState =>
      val lateRows = lateRowsMetric(m)
      // Without batch_time a replay is one batch, which has no watermark: nothing is late.
      val watermark = for (bt <- m.batchTime; delay <- m.options.watermarkDelayMs)
        yield LateRowFilterExec.PerBatch(bt, delay)
      MapWithStateExec(m.keys, m.values, m.batchTime, m.orderBy, m.function, m.options, m.output,
        records(m, m.options.numPartitions, for (l <- lateRows; w <- watermark) yield (l, w)),
        m.initialState.map(planLater), m.eventTime, timingOutValues(m), lateRows) :: Nil
    case _ => Nil
  }

  /**
   * The operator's input: the child's records, or for a group function its aggregated rows,
   * late rows dropped first (counted in the metric, against the watermark) when `dropLate`
   * is set.
   */
  private def records(m: MapWithState, numPartitions: Int,
      dropLate: Option[(SQLMetric, LateRowFilterExec.Watermark)]): SparkPlan =
    if (!m.groups) planLater(m.child)
    else GroupAggregation.plan(m, planLater(m.child), numPartitions, dropLate.map {
      case (metric, watermark) =>
        (input: SparkPlan) => LateRowFilterExec(m.eventTime.get, watermark, metric, input)
    })

  /**
   * A group function with event-time timers drops late rows before its aggregation, in another
   * operator than the stateful one; both count them in this one metric.
   */
  private def lateRowsMetric(m: MapWithState): Option[SQLMetric] =
    if (m.groups && m.eventTime.isDefined &&
        m.options.timerDomain.contains(TimerDomain.EventTime)) {
      Some(SQLMetrics.createMetric(SparkSession.active.sparkContext,
        MapWithStateExecBase.LateRowsDescription))
    } else None

  private def timingOutValues(m: MapWithState) =
    if (m.groups) Some(GroupAggregation.emptyInput(m)) else None
}
