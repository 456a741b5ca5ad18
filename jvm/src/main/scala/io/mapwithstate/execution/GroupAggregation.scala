package io.mapwithstate.execution

import io.mapwithstate.plan.{FunctionKind, MapWithState}
import org.apache.spark.sql.catalyst.expressions.Alias
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete, Max}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.aggregate.AggUtils
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec

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
 * partitions, so it is the one shuffle the operator needs too.
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
    val Seq(finalAggregate) =
      AggUtils.planAggregateWithoutDistinct(grouping, aggregates, results, input)
    val Seq(partialAggregate) = finalAggregate.children
    finalAggregate.withNewChildren(Seq(
        ShuffleExchangeExec(HashPartitioning(m.keys, numPartitions), partialAggregate)))
  }
}
