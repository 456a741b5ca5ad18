package io.mapwithstate.connect

import java.util.Optional

import io.mapwithstate.{proto, StateReader}
import io.mapwithstate.reader.StateReadRequest
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.plugin.RelationPlugin
import org.sparkproject.connect.protobuf.{Any => AnyProto}

/**
 * The Spark Connect entry point of the state reader: a `Relation.extension` holding a
 * `mapwithstate.ReadState` or `mapwithstate.ReadStateChanges` becomes a [[StateReadRequest]],
 * planned by [[StateReader.plan]] as the JVM API plans it. The plan resolves the checkpoint
 * (schema, partitions, last committed batch) and checks the requested batches, reading files
 * only; Connect calls it on every analyze and execute, so "the latest batch" is the latest when
 * the plan is made. Registered with `spark.connect.extensions.relation.classes`, beside
 * [[MapWithStateRelationPlugin]].
 */
class StateReaderRelationPlugin extends RelationPlugin {

  override def transform(relation: Array[Byte], planner: SparkConnectPlanner)
      : Optional[LogicalPlan] = {
    val message = AnyProto.parseFrom(relation)
    def option(has: Boolean, value: Long): Option[Long] = Option.when(has)(value)
    val request = if (message.is(classOf[proto.ReadState])) {
      val rel = message.unpack(classOf[proto.ReadState])
      Some(StateReadRequest.State(rel.getCheckpoint, option(rel.hasBatchId, rel.getBatchId),
          option(rel.hasOperatorId, rel.getOperatorId), rel.getInCurrentSchema,
          rel.getIncludeTimerOnlyKeys))
    } else if (message.is(classOf[proto.ReadStateChanges])) {
      val rel = message.unpack(classOf[proto.ReadStateChanges])
      Some(StateReadRequest.Changes(rel.getCheckpoint, rel.getStartBatch,
          option(rel.hasEndBatch, rel.getEndBatch), option(rel.hasOperatorId, rel.getOperatorId),
          rel.getInCurrentSchema))
    } else {
      None
    }
    request.fold(Optional.empty[LogicalPlan]())(r =>
      Optional.of(StateReader.plan(planner.session, r)))
  }
}
