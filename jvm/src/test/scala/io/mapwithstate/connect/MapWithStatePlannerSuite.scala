package io.mapwithstate.connect

import java.nio.file.{Files, Paths}

import scala.jdk.CollectionConverters._

import io.mapwithstate.{LocalSpark, MapWithStateException}
import io.mapwithstate.plan.{
  FunctionKind,
  MapWithState,
  MapWithStateBuilder,
  OutputKind,
  StateFunctionInput
}
import io.mapwithstate.proto
import org.apache.spark.connect.proto.{Expression, Read, Relation, SQL}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, NamedExpression}
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.service.SessionHolder
import org.apache.spark.sql.types.TimestampType
import org.scalatest.funsuite.AnyFunSuite

/**
 * The Connect face without Python: `MapWithState` protos built here go through the plugin's
 * translation ([[MapWithStateRelationPlugin.toRequest]]) and the planner
 * ([[MapWithStateBuilder]]), and the plans, their results and their errors are checked, as
 * Delta Connect's planner suite does.
 */
class MapWithStatePlannerSuite extends AnyFunSuite with LocalSpark {

  private def planner = new SparkConnectPlanner(
    SessionHolder("user", java.util.UUID.randomUUID().toString, spark), None)

  private def sql(query: String): Relation =
    Relation.newBuilder().setSql(SQL.newBuilder().setQuery(query)).build()

  private def expr(text: String): Expression =
    Expression.newBuilder()
      .setExpressionString(Expression.ExpressionString.newBuilder().setExpression(text)).build()

  private val words = sql("SELECT * FROM VALUES ('a', 1), ('b', 2), ('a', 3) AS t(word, v)")

  private def runningCount(input: Relation = words): proto.MapWithState.Builder =
    proto.MapWithState.newBuilder()
      .setInput(input)
      .addKeys(expr("word"))
      .setSpec(proto.StateSpec.newBuilder()
          .setStateSchemaDdl("n BIGINT")
          .setUpdate(expr(s"named_struct('n', coalesce(${StateFunctionInput.State}.n, 0) + 1)"))
          .setEmit(expr(s"named_struct('word', word, 'n', ${StateFunctionInput.NewState}.n)")))
      .setOutput(proto.MapWithState.Output.OUTPUT_EMITTED)

  private def plan(message: proto.MapWithState.Builder): MapWithState =
    new MapWithStateBuilder(spark)
      .build(MapWithStateRelationPlugin.toRequest(message.build(), planner))

  private def rows(message: proto.MapWithState.Builder): Seq[InternalRow] =
    spark.sessionState.executePlan(plan(message)).executedPlan.executeCollect().toSeq

  private def error(message: proto.MapWithState.Builder): String =
    intercept[MapWithStateException](plan(message)).getMessage

  test("a running count: keys, values, function and options from the proto") {
    val p = plan(runningCount())
    assert(p.keys.map(_.name) === Seq("word"))
    // The count never reads `v`: see "value columns the function never reads are not read".
    assert(p.kind.values.isEmpty)
    assert(p.output.map(a => (a.name, a.dataType.simpleString)) ===
      Seq(("word", "string"), ("n", "bigint")))
    assert(p.options.outputKind === OutputKind.Emitted)
    assert(p.options.numPartitions === spark.sessionState.conf.numShufflePartitions)
    assert(p.options.timeoutMs.isEmpty && p.options.checkpointInterval === 10)
    assert(rows(runningCount()).map(r => (r.getUTF8String(0).toString, r.getLong(1))).sorted ===
      Seq(("a", 1L), ("a", 2L), ("b", 1L)))
  }

  test("a per-record function's value columns follow Spark's attribute rewrites") {
    val sum = runningCount(sql("SELECT * FROM VALUES ('a', 1, 10) AS t(word, v, w)"))
    sum.getSpecBuilder
      .setUpdate(expr(s"named_struct('n', coalesce(${StateFunctionInput.State}.n, 0) + w)"))
    val p = plan(sum)
    val FunctionKind.PerRecord(Seq(w), Nil) = p.kind
    val renamed = w.withExprId(NamedExpression.newExprId)
    val rewritten = p.transformExpressions {
      case a: Attribute if a.exprId == w.exprId => renamed
    }
    assert(rewritten.kind === FunctionKind.PerRecord(Seq(renamed), Nil))
    assert(rewritten.references.contains(renamed) && !rewritten.references.contains(w))
    assert(rewritten.functionName === "map_with_state")
  }

  test("value columns the function never reads are not read, nor shuffled") {
    val input =
      sql("SELECT * FROM VALUES ('a', 1, 10), ('b', 2, 20), ('a', 3, 30) AS t(word, v, w)")
    def exchangeColumns(message: proto.MapWithState.Builder): Seq[String] = {
      val executed = spark.sessionState.executePlan(plan(message)).executedPlan match {
        case adaptive: org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec =>
          adaptive.executedPlan
        case other => other
      }
      val exchanges = executed.collect {
        case e: org.apache.spark.sql.execution.exchange.ShuffleExchangeExec => e.output.map(_.name)
      }
      assert(exchanges.size === 1, executed.treeString)
      exchanges.head
    }
    val count = runningCount(input)
    assert(plan(count).kind.values.isEmpty)
    assert(plan(count).child.output.map(_.name) === Seq("word"))
    assert(exchangeColumns(count) === Seq("word"))
    assert(rows(count).map(r => (r.getUTF8String(0).toString, r.getLong(1))).sorted ===
      Seq(("a", 1L), ("a", 2L), ("b", 1L)))

    // A sum of `w` reads `w`, and only it; the function's columns still bind by position.
    val sum = runningCount(input)
    sum.getSpecBuilder
      .setUpdate(expr(s"named_struct('n', coalesce(${StateFunctionInput.State}.n, 0) + w)"))
      .setEmit(expr(s"named_struct('word', word, 'w', w, 'n', ${StateFunctionInput.NewState}.n)"))
    assert(plan(sum).kind.values.map(_.name) === Seq("w"))
    assert(exchangeColumns(sum) === Seq("word", "w"))
    assert(rows(sum).map(r => (r.getUTF8String(0).toString, r.getInt(1), r.getLong(2))).sorted ===
      Seq(("a", 10, 10L), ("a", 30, 40L), ("b", 20, 20L)))
  }

  test("an event-time column the function never reads is still there for late rows") {
    // With no value columns named, the event-time column is a value column too; dropping the
    // unread values must not drop the column the operator itself reads for lateness.
    val events = sql("SELECT word, v, timestamp_seconds(e) AS ts, timestamp_seconds(b) AS bt " +
      "FROM VALUES ('a', 1, 15, 0), ('a', 2, 4, 1), ('a', 3, 12, 1), ('b', 4, 2, 1) " +
      "AS t(word, v, e, b)")
    val watermarked = Relation.newBuilder().setWithWatermark(
      org.apache.spark.connect.proto.WithWatermark.newBuilder()
        .setInput(events).setEventTime("ts").setDelayThreshold("10 seconds")).build()
    val message = runningCount(watermarked).setBatchTime(expr("bt"))
    message.getSpecBuilder
      .setTimeoutAt(expr(s"${StateFunctionInput.Watermark} + INTERVAL 1 HOUR"))
      .setTimeoutDomain("event_time")
    val p = plan(message)
    assert(p.eventTime.map(_.name) === Some("ts"))
    assert(p.child.outputSet.contains(p.eventTime.get))
    // Batch 1's watermark is 15 - 10 = 5 s: a@4 and b@2 are late and dropped.
    assert(rows(message).map(r => (r.getUTF8String(0).toString, r.getLong(1))).sorted ===
      Seq(("a", 1L), ("a", 2L)))
  }

  test("snapshots: batch_time, the keys and the state's fields") {
    val message = runningCount().setOutput(proto.MapWithState.Output.OUTPUT_SNAPSHOTS)
    val p = plan(message)
    assert(p.output.map(_.name) === Seq("batch_time", "word", "n"))
    assert(p.output.head.dataType === TimestampType)
    assert(rows(message).map(r => (r.getUTF8String(1).toString, r.getLong(2))).sorted ===
      Seq(("a", 2L), ("b", 1L)))
  }

  test("settings travel: timeout, checkpoint interval, partitions, batch interval") {
    val message = runningCount()
      .setBatchTime(expr("timestamp_seconds(v)"))
      .setBatchInterval("2 seconds")
    message.getSpecBuilder.setTimeout("1 minute").setCheckpointInterval(3).setNumPartitions(5)
    val p = plan(message)
    assert(p.options.timeoutMs === Some(60000L))
    assert(p.options.checkpointInterval === 3)
    assert(p.options.numPartitions === 5)
    assert(p.options.batchIntervalMs === Some(2000L))
    assert(p.batchTime.map(_.dataType) === Some(TimestampType))
  }

  test("a missing state schema is refused, not read as an empty one") {
    val message = runningCount()
    message.getSpecBuilder.clearStateSchemaDdl()
    assert(error(message).contains("spec.state_schema is missing"))
  }

  test("an unspecified or unknown output kind is refused, not read as 'emitted'") {
    assert(error(runningCount().setOutput(proto.MapWithState.Output.OUTPUT_UNSPECIFIED))
        .contains("OUTPUT_UNSPECIFIED is not an output kind"))
    assert(error(runningCount().setOutputValue(42)).contains("unknown value 42"))
  }

  test("a missing input or spec is refused, naming the field") {
    assert(error(runningCount().clearInput()).contains("MapWithState.input is missing"))
    assert(error(runningCount().clearSpec()).contains("MapWithState.spec is missing"))
  }

  test("errors name the argument: key, batch_time, update, emit") {
    assert(error(runningCount().clearKeys().addKeys(expr("nope")))
        .startsWith("[MAPWITHSTATE_ANALYSIS_FAILED] key:"))
    assert(error(runningCount().setBatchTime(expr("v"))).contains(
        "batch_time must be a TIMESTAMP column"))
    val badUpdate = runningCount()
    badUpdate.getSpecBuilder.setUpdate(expr("named_struct('m', 1)"))
    assert(error(badUpdate).contains("field 'n' is missing"))
    val noEmit = runningCount()
    noEmit.getSpecBuilder.clearEmit()
    assert(error(noEmit).contains("output='emitted' needs an emit expression"))
  }

  test("over a stream, batch arguments are refused") {
    val rate = Relation.newBuilder().setRead(Read.newBuilder().setIsStreaming(true)
        .setDataSource(Read.DataSource.newBuilder().setFormat("rate"))).build()
    val stream = runningCount(rate).clearKeys().addKeys(expr("value AS word"))
    stream.getSpecBuilder.setEmit(expr(s"named_struct('n', ${StateFunctionInput.NewState}.n)"))
    assert(plan(stream).child.isStreaming)
    assert(error(stream.clone().setBatchTime(expr("timestamp"))).contains(
        "batch_time and batch_interval are for batch DataFrames"))
    val ordered = stream.clone().addOrderBy(Expression.SortOrder.newBuilder()
        .setChild(expr("timestamp"))
        .setDirection(Expression.SortOrder.SortDirection.SORT_DIRECTION_ASCENDING))
    assert(plan(ordered).kind.asInstanceOf[FunctionKind.PerRecord].orderBy.size === 1)
  }

  test("the reserved names are the ones state_spec.proto documents") {
    val protoFile = Paths.get(sys.props("mapwithstate.root"), "proto", "mapwithstate",
      "state_spec.proto")
    val documented = "__mws_[a-z_]+".r
      .findAllIn(new String(Files.readAllBytes(protoFile), "UTF-8")).toSet
    val scala = Set(StateFunctionInput.State, StateFunctionInput.StateExists,
      StateFunctionInput.IsTimingOut, StateFunctionInput.BatchTime, StateFunctionInput.NewState,
      StateFunctionInput.TimeoutAt, StateFunctionInput.Watermark)
    assert(documented === scala)
    assert(StateFunctionInput.contextAttributes(new org.apache.spark.sql.types.StructType()
        .add("n", "int")).map(_.name).toSet === scala)
    assert(scala.forall(_.startsWith(StateFunctionInput.ReservedPrefix)))
    assert(MapWithStateBuilder.BatchTimeColumn.startsWith(StateFunctionInput.ReservedPrefix))
    assert(!scala.contains(MapWithStateBuilder.BatchTimeColumn))
  }

  private def keyNames(m: proto.MapWithState): Seq[String] =
    m.getKeysList.asScala.toSeq.map(_.getExpressionString.getExpression)

  test("repeated keys keep their order") {
    val m = runningCount().addKeys(expr("v")).build()
    assert(keyNames(m) === Seq("word", "v"))
    assert(plan(m.toBuilder).keys.map(_.name) === Seq("word", "v"))
  }
}
