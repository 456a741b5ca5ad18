package io.mapwithstate.reader

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy}

/** Plans a [[StateReadRelation]] as a [[StateReadExec]]. */
object StateReadStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case r: StateReadRelation => StateReadExec(r.checkpoint, r.read, r.output) :: Nil
    case _ => Nil
  }
}
