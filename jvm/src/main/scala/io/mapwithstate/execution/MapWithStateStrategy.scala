package io.mapwithstate.execution

import io.mapwithstate.plan.{FunctionKind, MapWithState, TimerDomain}
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
 * number in its query (see [[io.mapwithstate.plan.NumberStateOperators]]). Either operator gets
 * the node's [[FunctionKind]] as it is; a group function's aggregation step
 * ([[GroupAggregation]]) is planned below it. Over a stream, a per-record function's
 * `order_by` becomes the order the operator requires of its input ([[WithinBatchOrder]]).
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
      val (input, lateRows) =
        this.input(m, partitions, Some(LateRowFilterExec.Fixed(watermarkMs * 1000L)))
      // A per-record function's order_by is the order its operator asks of its input, which
      // Spark then sorts within each state partition (a group function's aggregation sorts).
      val (records, withinBatchOrder) = m.kind match {
        case FunctionKind.PerRecord(_, orderBy) if orderBy.nonEmpty =>
          val (numbered, arrival) = WithinBatchOrder.numbered(input)
          (numbered, WithinBatchOrder.of(orderBy, arrival))
        case _ => (input, Nil)
      }
      MapWithStateStreamExec(m.keys, m.kind, m.function, m.options, m.output,
        batch.map(_.stateInfo), batch.map(_.batchTimestampMs).getOrElse(0L),
        batch.exists(_.terminatingTrigger), records,
        m.initialState.filter(_ => firstBatch).map(planLater), m.eventTime, watermarkMs,
        lateRows, withinBatchOrder) :: Nil
    case m: MapWithState =>
      // Without batch_time a replay is one batch, which has no watermark: nothing is late.
      val watermark = for (bt <- m.batchTime; delay <- m.options.watermarkDelayMs)
        yield LateRowFilterExec.PerBatch(bt, delay)
      val (records, lateRows) = input(m, m.options.numPartitions, watermark)
      MapWithStateExec(m.keys, m.kind, m.batchTime, m.function, m.options, m.output, records,
        m.initialState.map(planLater), m.eventTime, lateRows) :: Nil
    case _ => Nil
  }

  /**
   * The operator's input, and the metric of the late rows dropped before it. A per-record
   * function's input is the child's records (the operator drops late rows itself). A group
   * function's is its aggregated rows ([[GroupAggregation]]); with event-time timers its late
   * rows are dropped before the aggregation, against `watermark` when there is one, in another
   * operator than the stateful one: both count them in the one metric returned.
   */
  private def input(
      m: MapWithState,
      numPartitions: Int,
      watermark: Option[LateRowFilterExec.Watermark]): (SparkPlan, Option[SQLMetric]) =
    m.kind match {
      case _: FunctionKind.PerRecord => (planLater(m.child), None)
      case group: FunctionKind.PerGroup =>
        val eventTimeTimers = m.eventTime.filter(_ =>
          m.options.timerDomain.contains(TimerDomain.EventTime))
        val lateRows = eventTimeTimers.map(_ =>
          SQLMetrics.createMetric(
            SparkSession.active.sparkContext, MapWithStateExecBase.LateRowsDescription))
        val dropLate = for (eventTime <- eventTimeTimers; metric <- lateRows; w <- watermark)
          yield (in: SparkPlan) => LateRowFilterExec(eventTime, w, metric, in)
        (GroupAggregation.plan(m, group, planLater(m.child), numPartitions, dropLate), lateRows)
    }
}
