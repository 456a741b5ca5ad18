package io.mapwithstate.execution

import io.mapwithstate.plan.MapWithState
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy}
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue

/**
 * Plans a [[MapWithState]]: over batch input as a [[MapWithStateExec]]; over streaming input as
 * a [[MapWithStateStreamExec]] with the state info of the micro-batch being planned (Spark's
 * IncrementalExecution assigns state info only to its own operators, and its state schema
 * rule needs it during planning, so it is filled in here). A group function's aggregation
 * step ([[GroupAggregation]]) is planned below either operator.
 */
object MapWithStateStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case m: MapWithState if m.child.isStreaming =>
      val batch = StreamingQueryGlue.plannedMicroBatch(SparkSession.active,
        MapWithStateStreamExec.OperatorId)
      // The initial state seeds a query's first batch only; a restarted query continues from
      // its checkpoint, so later batches do not even read it.
      val firstBatch = batch.forall(_.stateInfo.storeVersion == 0)
      val partitions = batch.map(_.stateInfo.numPartitions)
        .getOrElse(SparkSession.active.sessionState.conf.numShufflePartitions)
      MapWithStateStreamExec(m.keys, m.values, m.function, m.options, m.output,
        batch.map(_.stateInfo), batch.map(_.batchTimestampMs).getOrElse(0L),
        batch.exists(_.terminatingTrigger), records(m, partitions),
        m.initialState.filter(_ => firstBatch).map(planLater), m.eventTime,
        batch.map(_.batchWatermarkMs).getOrElse(0L), timingOutValues(m)) :: Nil
    case m: MapWithState =>
      MapWithStateExec(m.keys, m.values, m.batchTime, m.orderBy, m.function, m.options, m.output,
        records(m, m.options.numPartitions), m.initialState.map(planLater), m.eventTime,
        timingOutValues(m)) :: Nil
    case _ => Nil
  }

  /** The operator's input: the child's records, or for a group function its aggregated rows. */
  private def records(m: MapWithState, numPartitions: Int): SparkPlan =
    if (m.groups) GroupAggregation.plan(m, planLater(m.child), numPartitions)
    else planLater(m.child)

  private def timingOutValues(m: MapWithState) =
    if (m.groups) Some(GroupAggregation.emptyInput(m)) else None
}
