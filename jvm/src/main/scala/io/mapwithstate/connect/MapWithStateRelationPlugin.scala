package io.mapwithstate.connect

import java.util.Optional

import scala.jdk.CollectionConverters._

import io.mapwithstate.{MapWithState, MapWithStateException}
import io.mapwithstate.plan.{MapWithStateRequest, OutputKind, StateSpecRequest}
import io.mapwithstate.proto
import org.apache.spark.connect.proto.{Expression => ExpressionProto}
import org.apache.spark.sql.catalyst.expressions.SortOrder
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.connect.common.DataTypeProtoConverter
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.plugin.RelationPlugin
import org.sparkproject.connect.protobuf.{Any => AnyProto}

/**
 * The Spark Connect entry point: a `Relation.extension` holding a `mapwithstate.MapWithState`
 * message becomes a mapWithState plan. It only translates the proto — Spark Connect's planner
 * turns the embedded relations and expressions into Catalyst, [[MapWithStateBuilder]] checks
 * and resolves the rest — and it has no side effects, as Connect calls it on every analyze and
 * execute. Registered with `spark.connect.extensions.relation.classes`.
 */
class MapWithStateRelationPlugin extends RelationPlugin {

  override def transform(relation: Array[Byte], planner: SparkConnectPlanner)
    : Optional[LogicalPlan] = {
    val message = AnyProto.parseFrom(relation)
    if (!message.is(classOf[proto.MapWithState])) {
      Optional.empty()
    } else {
      val request = MapWithStateRelationPlugin.toRequest(
        message.unpack(classOf[proto.MapWithState]), planner)
      Optional.of(MapWithState.plan(planner.session, request))
    }
  }
}

object MapWithStateRelationPlugin {

  def toRequest(rel: proto.MapWithState, planner: SparkConnectPlanner): MapWithStateRequest = {
    if (!rel.hasInput) throw MapWithStateException("MapWithState.input is missing: the relation to run")
    if (!rel.hasSpec) throw MapWithStateException("MapWithState.spec is missing: the StateSpec to run")
    val spec = rel.getSpec
    val stateSchema = spec.getStateSchemaCase match {
      case proto.StateSpec.StateSchemaCase.STATE_SCHEMA_DDL => Left(spec.getStateSchemaDdl)
      case proto.StateSpec.StateSchemaCase.STATE_SCHEMA_TYPE =>
        Right(DataTypeProtoConverter.toCatalystType(spec.getStateSchemaType))
      case proto.StateSpec.StateSchemaCase.STATESCHEMA_NOT_SET =>
        throw MapWithStateException(
          "spec.state_schema is missing: a StateSpec needs the state's type, as a DDL string " +
            "or a DataType")
    }
    def opt(has: Boolean, e: => ExpressionProto) =
      if (has) Some(planner.transformExpression(e)) else None

    MapWithStateRequest(
      input = planner.transformRelation(rel.getInput),
      keys = rel.getKeysList.asScala.toSeq.map(planner.transformExpression),
      values = rel.getValuesList.asScala.toSeq.map(planner.transformExpression),
      spec = StateSpecRequest(
        stateSchema = stateSchema,
        update = opt(spec.hasUpdate, spec.getUpdate),
        remove = opt(spec.hasRemove, spec.getRemove),
        emit = opt(spec.hasEmit, spec.getEmit),
        initialState =
          if (spec.hasInitialState) Some(planner.transformRelation(spec.getInitialState)) else None,
        numPartitions = if (spec.hasNumPartitions) Some(spec.getNumPartitions) else None,
        timeout = if (spec.hasTimeout) Some(spec.getTimeout) else None,
        checkpointInterval =
          if (spec.hasCheckpointInterval) Some(spec.getCheckpointInterval) else None,
        backend = if (spec.hasBackend) Some(spec.getBackend) else None),
      batchTime = opt(rel.hasBatchTime, rel.getBatchTime),
      batchInterval = if (rel.hasBatchInterval) Some(rel.getBatchInterval) else None,
      orderBy = rel.getOrderByList.asScala.toSeq.map { o =>
        planner.transformExpression(ExpressionProto.newBuilder().setSortOrder(o).build())
          .asInstanceOf[SortOrder]
      },
      outputKind = outputKind(rel))
  }

  private def outputKind(rel: proto.MapWithState): OutputKind = rel.getOutput match {
    case proto.MapWithState.Output.OUTPUT_EMITTED => OutputKind.Emitted
    case proto.MapWithState.Output.OUTPUT_SNAPSHOTS => OutputKind.Snapshots
    case other =>
      throw MapWithStateException(
        s"output: ${if (other == proto.MapWithState.Output.UNRECOGNIZED) s"unknown value " +
          s"${rel.getOutputValue}" else other} is not an output kind; expected OUTPUT_EMITTED " +
          "or OUTPUT_SNAPSHOTS")
  }
}
