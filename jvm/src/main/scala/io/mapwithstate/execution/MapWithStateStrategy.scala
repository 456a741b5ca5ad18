package io.mapwithstate.execution

import io.mapwithstate.plan.{FunctionKind, MapWithState, TimerDomain}
import org.apache.spark.sql.catalyst.expressions.SortOrder
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
 * ([[GroupAggregation]]) is planned below it. A per-record function's `order_by` becomes the
 * order the operator requires of its input ([[WithinBatchOrder]]). A batch of Real-Time Mode
 * plans only what runs record by record ([[RealTimeMode]]).
 */
object MapWithStateStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case m: MapWithState if m.child.isStreaming =>
      val batch = StreamingQueryGlue.plannedMicroBatch(SparkSession.active,
        MapWithStateStreamExec.operatorId(m.stateOperatorIndex))
      val realTimeMode = batch.exists(_.realTimeMode)
      if (realTimeMode) RealTimeMode.check(m)
      // The initial state seeds a query's first batch only; a restarted query continues from
      // its checkpoint, so later batches do not even read it.
      val firstBatch = batch.forall(_.stateInfo.storeVersion == 0)
      val partitions = batch.map(_.stateInfo.numPartitions)
        .getOrElse(SparkSession.active.sessionState.conf.numShufflePartitions)
      val watermarkMs = batch.map(_.batchWatermarkMs).getOrElse(0L)
      val in = input(m, partitions, Some(LateRowFilterExec.Fixed(watermarkMs * 1000L)))
      MapWithStateStreamExec(m.keys, m.kind, m.function, m.options, m.output,
        batch.map(_.stateInfo), batch.map(_.batchTimestampMs).getOrElse(0L),
        batch.exists(_.terminatingTrigger), in.records,
        m.initialState.filter(_ => firstBatch).map(planLater), m.eventTime, watermarkMs,
        in.lateRows, in.withinBatchOrder, realTimeMode) :: Nil
    case m: MapWithState =>
      // Without batch_time a replay is one batch, which has no watermark of its own: nothing
      // is late but at or before a resumed run's.
      val watermark = (m.batchTime, m.options.watermarkDelayMs) match {
        case (Some(bt), Some(delay)) => Some(LateRowFilterExec.PerBatch(bt, delay))
        case (None, Some(_)) if m.options.resumedWatermarkMicros.isDefined =>
          Some(LateRowFilterExec.Fixed(TimeoutPolicy.NoWatermark))
        case _ => None
      }
      val in = input(m, m.options.numPartitions, watermark)
      MapWithStateExec(m.keys, m.kind, m.batchTime, m.function, m.options, m.output,
        in.records, m.initialState.map(planLater), m.eventTime, in.lateRows,
        in.withinBatchOrder, in.timeline) :: Nil
    case _ => Nil
  }

  /**
   * A stateful operator's input: its records, the metric of the late rows dropped before it,
   * and the order it requires of a key's records within a batch.
   */
  private case class OperatorInput(
      records: SparkPlan,
      lateRows: Option[SQLMetric] = None,
      withinBatchOrder: Seq[SortOrder] = Nil,
      timeline: Option[SparkPlan] = None)

  /**
   * The operator's input. A per-record function's is the child's records (the operator drops
   * late rows itself), numbered by arrival with `order_by` ([[WithinBatchOrder]]): the order
   * the operator then requires, which Spark sorts each partition by. A group function's is
   * its aggregated rows ([[GroupAggregation]], which sorts for `order_by` itself); with
   * event-time timers its late rows are dropped before the aggregation, against `watermark`
   * when there is one, in another operator than the stateful one: both count them in the one
   * metric returned. A batch replay's batches then come from the records before the filter
   * (`timeline`), so a batch whose records are all late still runs, as a per-record
   * function's does and as a micro-batch of late rows does in a stream: its timers fire.
   */
  private def input(
      m: MapWithState,
      numPartitions: Int,
      watermark: Option[LateRowFilterExec.Watermark]): OperatorInput =
    m.kind match {
      case FunctionKind.PerRecord(_, orderBy) if orderBy.nonEmpty =>
        val (numbered, arrival) = WithinBatchOrder.numbered(planLater(m.child))
        OperatorInput(numbered, withinBatchOrder = WithinBatchOrder.of(orderBy, arrival))
      case _: FunctionKind.PerRecord => OperatorInput(planLater(m.child))
      case group: FunctionKind.PerGroup =>
        val eventTimeTimers = m.eventTime.filter(_ =>
          m.options.timerDomain.contains(TimerDomain.EventTime))
        val lateRows = eventTimeTimers.map(_ =>
          SQLMetrics.createMetric(
            SparkSession.active.sparkContext, MapWithStateExecBase.LateRowsDescription))
        val dropLate = for (eventTime <- eventTimeTimers; metric <- lateRows; w <- watermark)
          yield (in: SparkPlan) => LateRowFilterExec(eventTime, w, m.options, metric, in)
        val replayed = watermark.collect { case _: LateRowFilterExec.PerBatch => () }
        val timeline = for (_ <- dropLate; _ <- replayed) yield planLater(m.child)
        OperatorInput(GroupAggregation.plan(m, group, planLater(m.child), numPartitions,
            dropLate), lateRows, timeline = timeline)
    }
}
