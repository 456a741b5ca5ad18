package io.mapwithstate.connect

import java.util.Optional

import io.mapwithstate.{proto, StateRepartitioner}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.plugin.RelationPlugin
import org.sparkproject.connect.protobuf.{Any => AnyProto}

/**
 * The Spark Connect entry point of `repartition_state`: a `Relation.extension` holding a
 * `mapwithstate.RepartitionState` is run by [[StateRepartitioner.plan]], as the JVM API runs
 * it, when the plan is made, and becomes the one-row summary. Connect makes the plan on every
 * analyze and execute, so the client executes it once and asks nothing else of it; a second
 * run with the same count finds nothing to do and says so (`keys` null). Registered with
 * `spark.connect.extensions.relation.classes`, beside [[StateReaderRelationPlugin]].
 */
class StateRepartitionRelationPlugin extends RelationPlugin {

  override def transform(relation: Array[Byte], planner: SparkConnectPlanner)
      : Optional[LogicalPlan] = {
    val message = AnyProto.parseFrom(relation)
    if (!message.is(classOf[proto.RepartitionState])) Optional.empty[LogicalPlan]()
    else {
      val rel = message.unpack(classOf[proto.RepartitionState])
      Optional.of(StateRepartitioner.plan(planner.session, rel.getCheckpoint,
          rel.getNumPartitions))
    }
  }
}
