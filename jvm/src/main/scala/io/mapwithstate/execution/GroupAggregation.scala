package io.mapwithstate.execution

import io.mapwithstate.plan.{FunctionKind, MapWithState}
import org.apache.spark.sql.catalyst.expressions.{Alias, Ascending, NamedExpression, SortOrder}
import org.apache.spark.sql.catalyst.expressions.aggregate.{
  AggregateExpression,
  Average,
  BitAndAgg,
  BitOrAgg,
  BitXorAgg,
  Complete,
  Count,
  HyperLogLogPlusPlus,
  Max,
  Min,
  Sum
}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import org.apache.spark.sql.execution.aggregate.{AggUtils, SortAggregateExec}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.types.{
  ByteType,
  DataType,
  DecimalType,
  IntegerType,
  LongType,
  ShortType
}

/**
 * The aggregation step of a map_groups_with_state: the aggregates of its state function over
 * each key's records of each batch, as one row per (key, batch) — the keys, the batch time
 * (batch replays only) and the aggregate results — which the stateful operator then runs
 * through the function as if it were one record.
 *
 * It is planned as physical operators directly, as Spark plans a `groupBy().agg()`: a partial
 * aggregation before the shuffle (so a key with many records per batch sends one row per
 * partition), the shuffle, and the final aggregation. A logical `Aggregate` is avoided on
 * purpose: over a stream Spark would make it a stateful streaming aggregation with a state
 * store of its own, while here each micro-batch's aggregates start from nothing.
 *
 * The shuffle is by the keys alone (not the batch time) into the stateful operator's
 * partitions, so it is the one shuffle the operator needs too. With `order_by`, or with an
 * aggregate whose result depends on the order it reads the records in (`collect_list`,
 * `first`, a sum of doubles), there is no partial aggregation: see [[inOrder]]. Without
 * `order_by` such aggregates read a key's records in the order they arrive, as a
 * per-record function's calls do: merged partial buffers would not keep it (nor would Spark's
 * hash aggregation once it falls back to sorting, past 128 keys a task).
 *
 * With an event-time column, the aggregated row also has the key's largest event time of the
 * batch, under the event-time column's own name and id: all a batch replay needs to compute
 * its watermarks (the largest event time of each batch). With event-time timers, late rows are
 * dropped before the partial aggregation ([[LateRowFilterExec]]), so no aggregate sees them;
 * the largest event time of the rows that are left moves the watermark exactly as that of all
 * of them would (a late row is at or before the watermark, so it could not have moved it).
 */
object GroupAggregation {

  /**
   * The aggregated rows of `child` (the node's child, planned) in `numPartitions`: the
   * aggregates of `group`, the node's kind.
   *
   * @param lateRows with event-time timers, the filter that drops late rows first
   */
  def plan(
      m: MapWithState,
      group: FunctionKind.PerGroup,
      child: SparkPlan,
      numPartitions: Int,
      lateRows: Option[SparkPlan => LateRowFilterExec] = None): SparkPlan = {
    val grouping = m.keys ++ m.batchTime.toSeq
    // The event time as a key column is in the aggregated row already.
    val eventTime = m.eventTime.filterNot(et => m.keys.exists(_.exprId == et.exprId))
    val aggregates = group.boundAggregates ++
      eventTime.map(et => AggregateExpression(Max(et), Complete, isDistinct = false))
    val results = grouping ++ (group.values ++ eventTime).zip(aggregates).map { case (v, agg) =>
      Alias(agg.resultAttribute, v.name)(exprId = v.exprId)
    }
    val input = lateRows.fold(child)(_(child))
    val partitioning = HashPartitioning(m.keys, numPartitions)
    if (group.orderBy.isEmpty && aggregates.forall(readsInAnyOrder)) {
      val Seq(finalAggregate) =
        AggUtils.planAggregateWithoutDistinct(grouping, aggregates, results, input)
      val Seq(partialAggregate) = finalAggregate.children
      finalAggregate.withNewChildren(Seq(ShuffleExchangeExec(partitioning, partialAggregate)))
    } else {
      inOrder(grouping, aggregates, results, group.orderBy, input, partitioning)
    }
  }

  /**
   * Whether an aggregate's result is the same whatever order it reads the records in, so it
   * may be computed from partial aggregates merged in shuffle order: counts, minima, maxima,
   * exact sums and averages, bitwise folds (Spark's own `bool_and`, `count_if` and the like are
   * these by now, see `ExecutableExpressions`). Anything else is taken to depend on the order.
   */
  private def readsInAnyOrder(agg: AggregateExpression): Boolean = {
    def exact(t: DataType) = t match {
      case ByteType | ShortType | IntegerType | LongType | _: DecimalType => true
      case _ => false
    }
    agg.aggregateFunction match {
      case _: Count | _: Min | _: Max | _: BitAndAgg | _: BitOrAgg | _: BitXorAgg => true
      case _: HyperLogLogPlusPlus => true
      case s: Sum => exact(s.child.dataType)
      case a: Average => exact(a.child.dataType)
      case _ => false
    }
  }

  /**
   * The aggregation when the order of a key's records matters: order-sensitive aggregates
   * (`collect_list`, `first`, `last`) must read them in `order_by`'s order, or in arrival
   * order without one, which partial aggregates merged in shuffle order would not keep. So
   * the records themselves are shuffled, sorted within each partition by the grouping, then
   * `order_by`, then arrival ([[WithinBatchOrder]]), and aggregated in one pass (Spark's sort
   * aggregation, which reads each group's rows in the order they come).
   */
  private def inOrder(
      grouping: Seq[NamedExpression],
      aggregates: Seq[AggregateExpression],
      results: Seq[NamedExpression],
      orderBy: Seq[SortOrder],
      input: SparkPlan,
      partitioning: HashPartitioning): SparkPlan = {
    val (numbered, arrival) = WithinBatchOrder.numbered(input)
    val sorted = SortExec(
      grouping.map(g => SortOrder(g.toAttribute, Ascending)) ++
        WithinBatchOrder.of(orderBy, arrival),
      global = false, ShuffleExchangeExec(partitioning, numbered))
    val complete = aggregates.map(_.copy(mode = Complete))
    SortAggregateExec(
      requiredChildDistributionExpressions = Some(partitioning.expressions),
      isStreaming = false,
      numShufflePartitions = None,
      groupingExpressions = grouping,
      aggregateExpressions = complete,
      aggregateAttributes = complete.map(_.resultAttribute),
      initialInputBufferOffset = 0,
      resultExpressions = results,
      child = sorted)
  }
}
