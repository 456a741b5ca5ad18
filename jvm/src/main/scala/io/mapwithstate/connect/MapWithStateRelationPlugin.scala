package io.mapwithstate.connect

import java.util.Optional

import scala.jdk.CollectionConverters._

import io.mapwithstate.{ErrorCondition, MapWithState, MapWithStateException}
import io.mapwithstate.plan.{MapWithStateRequest, OutputKind, StateSpecRequest}
import io.mapwithstate.proto
import org.apache.spark.connect.proto.{Expression => ExpressionProto, Relation => RelationProto}
import org.apache.spark.sql.catalyst.expressions.SortOrder
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.connect.common.DataTypeProtoConverter
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.plugin.RelationPlugin
import org.apache.spark.sql.classic.SparkSession
import org.sparkproject.connect.protobuf.{
  Any => AnyProto,
  InvalidProtocolBufferException,
  Message,
  UnknownFieldSet
}

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
        MapWithStateRelationPlugin.parse(message, planner.session), planner)
      Optional.of(MapWithState.plan(planner.session, request))
    }
  }
}

object MapWithStateRelationPlugin {

  /** Spark Connect's own nesting limit for the messages it receives, and its default. */
  private val RecursionLimitKey = "spark.connect.grpc.marshallerRecursionLimit"
  private val DefaultRecursionLimit = 1024

  /**
   * The `MapWithState` in `message`, parsed with the nesting limit Spark Connect applies to its
   * own messages (protobuf's default of 100 would refuse plans Spark accepts: the embedded
   * input plan and expressions are as deep as the client made them). Fields this server does
   * not know are refused rather than ignored: a newer client asking for something this plugin
   * would silently not do is an error. Local data in it is checked before Spark reads it
   * ([[LocalRelationCheck]]).
   */
  private def parse(message: AnyProto, session: SparkSession): proto.MapWithState = {
    val limit = session.conf.getOption(RecursionLimitKey).map(_.toInt)
      .getOrElse(DefaultRecursionLimit)
    val input = message.getValue.newCodedInput()
    input.setRecursionLimit(limit)
    val rel =
      try proto.MapWithState.parseFrom(input)
      catch {
        case e: InvalidProtocolBufferException =>
          throw new MapWithStateException(ErrorCondition.MalformedRequest,
            s"the mapwithstate.MapWithState message is malformed: ${e.getMessage}", e)
      }
    refuseUnknownFields("MapWithState", rel.getUnknownFields)
    refuseUnknownFields("MapWithState.spec (StateSpec)", rel.getSpec.getUnknownFields)
    LocalRelationCheck.check(rel, "MapWithState")
    rel
  }

  private def refuseUnknownFields(where: String, fields: UnknownFieldSet): Unit = {
    if (!fields.asMap.isEmpty) {
      throw MapWithStateException(ErrorCondition.MalformedRequest,
        s"$where has fields this server does not know (numbers " +
          s"${fields.asMap.keySet.asScala.mkString(", ")}): the client is newer than the " +
          "mapwithstate plugin on the server, or the message is corrupt")
    }
  }

  def toRequest(rel: proto.MapWithState, planner: SparkConnectPlanner): MapWithStateRequest = {
    if (!rel.hasInput) throw MapWithStateException(ErrorCondition.MalformedRequest,
      "MapWithState.input is missing: the relation to run")
    if (!rel.hasSpec) throw MapWithStateException(ErrorCondition.MalformedRequest,
      "MapWithState.spec is missing: the StateSpec to run")
    val spec = rel.getSpec
    val stateSchema = spec.getStateSchemaCase match {
      case proto.StateSpec.StateSchemaCase.STATE_SCHEMA_DDL => Left(spec.getStateSchemaDdl)
      case proto.StateSpec.StateSchemaCase.STATE_SCHEMA_TYPE =>
        Right(DataTypeProtoConverter.toCatalystType(spec.getStateSchemaType))
      case proto.StateSpec.StateSchemaCase.STATESCHEMA_NOT_SET =>
        throw MapWithStateException(ErrorCondition.MalformedRequest,
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
        timeoutAt = opt(spec.hasTimeoutAt, spec.getTimeoutAt),
        timeoutDomain = if (spec.hasTimeoutDomain) Some(spec.getTimeoutDomain) else None,
        initialStateTimeoutAt =
          if (spec.hasInitialStateTimeoutAt) Some(spec.getInitialStateTimeoutAt) else None,
        backend = if (spec.hasBackend) Some(spec.getBackend) else None,
        initialStateLastUpdated =
          if (spec.hasInitialStateLastUpdated) Some(spec.getInitialStateLastUpdated) else None,
        migrate = opt(spec.hasMigrate, spec.getMigrate),
        initialStateWatermark = opt(spec.hasInitialStateWatermark, spec.getInitialStateWatermark),
        initialStateHasState =
          if (spec.hasInitialStateHasState) Some(spec.getInitialStateHasState) else None),
      batchTime = opt(rel.hasBatchTime, rel.getBatchTime),
      batchInterval = if (rel.hasBatchInterval) Some(rel.getBatchInterval) else None,
      orderBy = rel.getOrderByList.asScala.toSeq.map { o =>
        planner.transformExpression(ExpressionProto.newBuilder().setSortOrder(o).build())
          .asInstanceOf[SortOrder]
      },
      outputKind = outputKind(rel),
      watermark = watermarkOf(rel.getInput),
      groups = rel.getGroups,
      until = opt(rel.hasUntil, rel.getUntil))
  }

  /**
   * The `withWatermark(column, delay)` of the input as sent, the first found walking down its
   * relations. Spark's planner analyzes each relation as it goes, and on batch data that drops
   * the watermark (Spark ignores it there), so the proto is the one place a batch replay can
   * learn its watermark from.
   */
  private def watermarkOf(rel: RelationProto): Option[(String, String)] = {
    if (rel.hasWithWatermark) {
      val w = rel.getWithWatermark
      return Some((w.getEventTime, w.getDelayThreshold))
    }
    rel.getAllFields.values.asScala.iterator.flatMap {
      case r: RelationProto => watermarkOf(r)
      case m: Message => m.getAllFields.values.asScala.collectFirst {
          case r: RelationProto => r
        }.flatMap(watermarkOf)
      case _ => None
    }.nextOption()
  }

  private def outputKind(rel: proto.MapWithState): OutputKind = {
    val kind = rel.getOutput match {
      case proto.MapWithState.Output.OUTPUT_EMITTED => OutputKind.Emitted
      case proto.MapWithState.Output.OUTPUT_SNAPSHOTS => OutputKind.Snapshots
      case proto.MapWithState.Output.OUTPUT_FINAL_STATE =>
        OutputKind.FinalState(rel.getIncludeTimerOnlyKeys)
      case proto.MapWithState.Output.OUTPUT_FINAL_WATERMARK => OutputKind.FinalWatermark
      case other =>
        throw MapWithStateException(ErrorCondition.MalformedRequest,
          s"output: ${if (other == proto.MapWithState.Output.UNRECOGNIZED) s"unknown value " +
              s"${rel.getOutputValue}"
            else other} is not an output kind; expected OUTPUT_EMITTED, " +
            "OUTPUT_SNAPSHOTS, OUTPUT_FINAL_STATE or OUTPUT_FINAL_WATERMARK")
    }
    OutputKind.checkTimerOnlyKeys(kind, rel.getIncludeTimerOnlyKeys)
    kind
  }
}
