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
 * rule needs it during planning, so it is filled in here).
 */
object MapWithStateStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case m: MapWithState if m.child.isStreaming =>
      val batch = StreamingQueryGlue.plannedMicroBatch(SparkSession.active,
        MapWithStateStreamExec.OperatorId)
      // The initial state seeds a query's first batch only; a restarted query continues from
      // its checkpoint, so later batches do not even read it.
      val firstBatch = batch.forall(_.stateInfo.storeVersion == 0)
      MapWithStateStreamExec(m.keys, m.values, m.function, m.options, m.output,
        batch.map(_.stateInfo), batch.map(_.batchTimestampMs).getOrElse(0L),
        batch.exists(_.terminatingTrigger), planLater(m.child),
        m.initialState.filter(_ => firstBatch).map(planLater), m.eventTime,
        batch.map(_.batchWatermarkMs).getOrElse(0L)) :: Nil
    case m: MapWithState =>
      MapWithStateExec(m.keys, m.values, m.batchTime, m.orderBy, m.function, m.options, m.output,
        planLater(m.child), m.initialState.map(planLater), m.eventTime) :: Nil
    case _ => Nil
  }
}
