package io.mapwithstate.execution

import io.mapwithstate.MapWithStateException
import io.mapwithstate.plan.MapWithState
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy}

/** Plans a [[MapWithState]] over batch input as a [[MapWithStateExec]]. */
object MapWithStateStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case m: MapWithState if m.child.isStreaming =>
      throw MapWithStateException(
        "map_with_state over a streaming DataFrame is not supported yet; use a batch DataFrame " +
          "with batch_time to replay recorded batches")
    case m: MapWithState =>
      MapWithStateExec(m.keys, m.values, m.batchTime, m.orderBy, m.function, m.options, m.output,
        planLater(m.child), m.initialState.map(planLater)) :: Nil
    case _ => Nil
  }
}
