package io.mapwithstate.connect

import io.mapwithstate.{LocalSpark, MapWithStateException}
import io.mapwithstate.execution.{
  LateRowFilterExec,
  MapWithStateExec,
  MapWithStateExecBase,
  WithinBatchOrder
}
import io.mapwithstate.plan.{FunctionKind, MapWithState, MapWithStateBuilder, StateFunctionInput}
import io.mapwithstate.proto
import org.apache.spark.connect.proto.{Expression, Relation, SQL, WithWatermark}
import org.apache.spark.sql.catalyst.expressions.{Ascending, Attribute, Descending, NamedExpression}
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.service.SessionHolder
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import org.apache.spark.sql.execution.SortExec
import org.apache.spark.sql.execution.aggregate.{BaseAggregateExec, SortAggregateExec}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.scalatest.funsuite.AnyFunSuite

/**
 * Group functions (`FunctionKind.PerGroup`) through the plugin's translation and the planner:
 * the aggregates taken out of the function, the physical plan (partial aggregation, one
 * shuffle, final aggregation, the stateful operator; with event-time timers the late-row filter
 * below them), results and errors.
 */
class GroupFunctionPlannerSuite extends AnyFunSuite with LocalSpark with AdaptiveSparkPlanHelper {

  private def planner = new SparkConnectPlanner(
    SessionHolder("user", java.util.UUID.randomUUID().toString, spark), None)

  private def expr(text: String): Expression =
    Expression.newBuilder()
      .setExpressionString(Expression.ExpressionString.newBuilder().setExpression(text)).build()

  private val input = Relation.newBuilder().setSql(SQL.newBuilder().setQuery(
      "SELECT * FROM VALUES ('a', 1, 'x'), ('b', 2, 'y'), ('a', 3, 'z') AS t(word, v, s)")).build()

  private val state = StateFunctionInput.State
  private val newState = StateFunctionInput.NewState

  private def counts(emit: String = s"named_struct('word', word, 'n', $newState.n, " +
        "'s', sum(v))"): proto.MapWithState.Builder =
    proto.MapWithState.newBuilder()
      .setInput(input)
      .addKeys(expr("word"))
      .setGroups(true)
      .setSpec(proto.StateSpec.newBuilder()
          .setStateSchemaDdl("n BIGINT")
          .setUpdate(expr(s"named_struct('n', coalesce($state.n, 0) + count(*))"))
          .setEmit(expr(emit)))
      .setOutput(proto.MapWithState.Output.OUTPUT_EMITTED)

  private def plan(message: proto.MapWithState.Builder): MapWithState =
    new MapWithStateBuilder(spark)
      .build(MapWithStateRelationPlugin.toRequest(message.build(), planner))

  private def error(message: proto.MapWithState.Builder): String =
    intercept[MapWithStateException](plan(message)).getMessage

  test("the aggregates become the function's value columns, each computed once") {
    val p = plan(counts(s"named_struct('word', word, 'n', count(*), 's', sum(v))"))
    val group = p.kind match {
      case g: FunctionKind.PerGroup => g
      case other => fail(s"not a group function: $other")
    }
    assert(group.values.map(_.name) === Seq("__mws_agg_0", "__mws_agg_1"))
    assert(group.aggregates.expressions.map(_.sql) === Seq("count(1)", "sum(t.v)"))
    // A timing-out call's aggregates over no records: count 0, sum null.
    assert(group.emptyInput.getLong(0) === 0L && group.emptyInput.isNullAt(1))
    // The column the aggregates do not read is not carried to the aggregation.
    assert(p.child.output.map(_.name) === Seq("word", "v"))
  }

  test("planned as partial aggregation, one shuffle by key, final aggregation, the operator") {
    val p = plan(counts())
    val qe = spark.sessionState.executePlan(p)
    val executed = qe.executedPlan
    val operator = collect(executed) { case m: MapWithStateExec => m }
    assert(operator.size === 1)
    assert(operator.head.kind === p.kind)
    assert(collect(executed) { case a: BaseAggregateExec => a }.size === 2)
    assert(collect(executed) { case s: ShuffleExchangeExec => s }.size === 1)
    val rows = qe.executedPlan.executeCollect().map(r =>
      (r.getUTF8String(0).toString, r.getLong(1), r.getLong(2))).sorted.toSeq
    assert(rows === Seq(("a", 2L, 4L), ("b", 1L, 2L)))
  }

  test("with order_by: the records shuffled once, sorted by key then order_by, one aggregation") {
    // 'a' has x (v 1) and z (v 3): in order_by's descending v, z then x.
    val message = counts("named_struct('word', word, 'vs', concat_ws(',', collect_list(s)), " +
      "'f', first(s))").addOrderBy(Expression.SortOrder.newBuilder().setChild(expr("v"))
        .setDirection(Expression.SortOrder.SortDirection.SORT_DIRECTION_DESCENDING))
    val p = plan(message)
    val qe = spark.sessionState.executePlan(p)
    val executed = qe.executedPlan
    val aggregates = collect(executed) { case a: BaseAggregateExec => a }
    assert(aggregates.size === 1 && aggregates.head.isInstanceOf[SortAggregateExec])
    assert(collect(executed) { case s: ShuffleExchangeExec => s }.size === 1)
    val sorts = collect(aggregates.head) { case s: SortExec => s }
    assert(sorts.size === 1 && !sorts.head.global)
    assert(sorts.head.sortOrder.map(o => (o.child.references.head.name, o.direction)) === Seq(
      ("word", Ascending), (s"${MapWithStateBuilder.OrderColumnPrefix}0", Descending),
      (WithinBatchOrder.ArrivalColumn, Ascending)))
    val rows = executed.executeCollect().map(r =>
      (r.getUTF8String(0).toString, r.getUTF8String(1).toString, r.getUTF8String(2).toString))
    assert(rows.sorted.toSeq === Seq(("a", "z,x", "z"), ("b", "y", "y")))
  }

  test("the aggregates' input columns follow Spark's attribute rewrites; the results do not") {
    val p = plan(counts())
    val FunctionKind.PerGroup(_, Seq(v), values, _, _) = p.kind
    val renamed = v.withExprId(NamedExpression.newExprId)
    val rewritten = p.transformExpressions {
      case a: Attribute if a.exprId == v.exprId => renamed
    }
    val group @ FunctionKind.PerGroup(_, inputs, sameValues, _, _) = rewritten.kind
    assert(inputs === Seq(renamed) && sameValues === values)
    assert(group.boundAggregates.flatMap(_.references).map(_.exprId) === Seq(renamed.exprId))
    assert(rewritten.references.contains(renamed) && !rewritten.references.contains(v))
    // The node produces the aggregates' results: they are not input it misses.
    assert(p.missingInput.isEmpty, p.missingInput)
  }

  test("an array emit gives its elements' fields as the output") {
    val p = plan(counts(s"array(named_struct('word', word, 'n', count(*)), " +
        "named_struct('word', word, 'n', max(v)))"))
    assert(p.output.map(_.name) === Seq("word", "n"))
  }

  test("errors name the expression: a value column, nested aggregates, the state") {
    assert(error(counts("named_struct('word', word, 'v', v)")).contains(
        "emit: [MISSING_AGGREGATION] the non-aggregating expression \"v\""))
    assert(error(counts("named_struct('n', sum(count(*)))")).contains("NESTED_AGGREGATE_FUNCTION"))
    assert(error(counts(s"named_struct('n', sum($state.n))")).contains(
        s"reads '$state'"))
    assert(error(counts("count(*)")).contains("emit must be a struct"))
    assert(error(counts().addValues(expr("v"))).contains("takes no value columns"))
  }

  test("with event-time timers, late rows are dropped below the partial aggregation") {
    val events = Relation.newBuilder().setSql(SQL.newBuilder().setQuery(
        "SELECT word, v, timestamp_seconds(e) AS ts, timestamp_seconds(b) AS bt FROM VALUES " +
          "('a', 1, 15, 0), ('a', 2, 4, 1), ('a', 3, 12, 1), ('b', 4, 2, 1) AS t(word, v, e, b)"))
    val watermarked = Relation.newBuilder().setWithWatermark(WithWatermark.newBuilder()
        .setInput(events).setEventTime("ts").setDelayThreshold("10 seconds")).build()
    val message = counts("named_struct('word', word, 'rows', count(*), 's', sum(v))")
      .setInput(watermarked).setBatchTime(expr("bt"))
    // The state is the key's largest event time of its last batch; its timer an hour later.
    message.getSpecBuilder.setStateSchemaDdl("n TIMESTAMP")
      .setUpdate(expr("named_struct('n', max(ts))"))
      .setTimeoutAt(expr(s"$newState.n + INTERVAL 1 HOUR")).setTimeoutDomain("event_time")
    val qe = spark.sessionState.executePlan(plan(message))
    val executed = qe.executedPlan
    val filter = collect(executed) { case f: LateRowFilterExec => f }
    assert(filter.size === 1)
    assert(collect(executed) {
      case a: BaseAggregateExec if a.child.isInstanceOf[LateRowFilterExec] => a
    }.size === 1)
    val rows = executed.executeCollect().map(r =>
      (r.getUTF8String(0).toString, r.getLong(1), r.getLong(2))).sorted.toSeq
    // Batch 1's watermark is 15 - 10 = 5 s: a@4 and b@2 are late, so b is not called at all.
    assert(rows === Seq(("a", 1L, 1L), ("a", 1L, 3L)))
    val operator = collect(executed) { case m: MapWithStateExec => m }.head
    assert(operator.metrics(MapWithStateExecBase.LateRowsMetric).value === 2)
  }
}
