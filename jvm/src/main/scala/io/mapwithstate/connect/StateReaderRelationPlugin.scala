package io.mapwithstate.connect

import java.util.Optional

import io.mapwithstate.proto
import io.mapwithstate.reader.{QueryCheckpoint, StateRead, StateReadRelation}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.plugin.RelationPlugin
import org.sparkproject.connect.protobuf.{Any => AnyProto}

/**
 * The Spark Connect entry point of the state reader: a `Relation.extension` holding a
 * `mapwithstate.ReadState` or `mapwithstate.ReadStateChanges` becomes a [[StateReadRelation]]
 * over the named checkpoint. It resolves the checkpoint (schema, partitions, last committed
 * batch) and checks the requested batches, reading files only; Connect calls it on every
 * analyze and execute, so "the latest batch" is the latest when the plan is made. Registered
 * with `spark.connect.extensions.relation.classes`, beside [[MapWithStateRelationPlugin]].
 */
class StateReaderRelationPlugin extends RelationPlugin {

  override def transform(relation: Array[Byte], planner: SparkConnectPlanner)
    : Optional[LogicalPlan] = {
    val message = AnyProto.parseFrom(relation)
    lazy val hadoopConf = planner.session.sessionState.newHadoopConf()
    // Both messages name the checkpoint and, optionally, which map_with_state operator of it.
    def checkpointOf(location: String, hasOperatorId: Boolean, operatorId: Long) =
      QueryCheckpoint.resolve(location, hadoopConf, Option.when(hasOperatorId)(operatorId))
    if (message.is(classOf[proto.ReadState])) {
      val rel = message.unpack(classOf[proto.ReadState])
      val checkpoint = checkpointOf(rel.getCheckpoint, rel.hasOperatorId, rel.getOperatorId)
      val batchId = if (rel.hasBatchId) Some(rel.getBatchId) else None
      Optional.of(StateReadRelation(checkpoint,
        StateRead.At(checkpoint.versionOf(batchId, hadoopConf))))
    } else if (message.is(classOf[proto.ReadStateChanges])) {
      val rel = message.unpack(classOf[proto.ReadStateChanges])
      val checkpoint = checkpointOf(rel.getCheckpoint, rel.hasOperatorId, rel.getOperatorId)
      val end = if (rel.hasEndBatch) Some(rel.getEndBatch) else None
      val (first, last) = checkpoint.changeRange(rel.getStartBatch, end, hadoopConf)
      Optional.of(StateReadRelation(checkpoint, StateRead.Changes(first, last)))
    } else {
      Optional.empty()
    }
  }
}
