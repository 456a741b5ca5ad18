package io.mapwithstate.execution

import io.mapwithstate.plan.MapWithState
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, BoundReference, Expression, GenericInternalRow, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete, DeclarativeAggregate, ImperativeAggregate, Max}
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
   * The aggregated rows of `child` (the node's child, planned) in `numPartitions`.
   *
   * @param lateRows with event-time timers, the filter that drops late rows first
   */
  def plan(
      m: MapWithState,
      child: SparkPlan,
      numPartitions: Int,
      lateRows: Option[SparkPlan => LateRowFilterExec] = None): SparkPlan = {
    val grouping = m.keys ++ m.batchTime.toSeq
    // The event time as a key column is in the aggregated row already.
    val eventTime = m.eventTime.filterNot(et => m.keys.exists(_.exprId == et.exprId))
    val aggregates = m.boundAggregates.map(aggregateOf) ++
      eventTime.map(et => AggregateExpression(Max(et), Complete, isDistinct = false))
    val results = grouping ++ (m.values ++ eventTime).zip(aggregates).map { case (v, agg) =>
      Alias(agg.resultAttribute, v.name)(exprId = v.exprId)
    }
    val input = lateRows.fold(child)(_(child))
    val Seq(finalAggregate) =
      AggUtils.planAggregateWithoutDistinct(grouping, aggregates, results, input)
    val Seq(partialAggregate) = finalAggregate.children
    finalAggregate.withNewChildren(Seq(
      ShuffleExchangeExec(HashPartitioning(m.keys, numPartitions), partialAggregate)))
  }

  /**
   * The aggregates over no records — `count` 0, `sum` null, `collect_list` empty — as one row
   * in the order of `values`: what a timing-out call sees, as a key with no records in the
   * batch has nothing to aggregate.
   */
  def emptyInput(m: MapWithState): UnsafeRow = {
    val values = m.boundAggregates.map(a => emptyValue(aggregateOf(a)))
    UnsafeProjection.create(m.values.zipWithIndex.map { case (v, i) =>
      BoundReference(i, v.dataType, nullable = true)
    })(new GenericInternalRow(values.toArray)).copy()
  }

  private def emptyValue(agg: AggregateExpression): Any = agg.aggregateFunction match {
    case d: DeclarativeAggregate =>
      val initial = d.aggBufferAttributes.map(_.exprId).zip(d.initialValues).toMap
      d.evaluateExpression.transform {
        case a: Attribute if initial.contains(a.exprId) => initial(a.exprId)
      }.eval(InternalRow.empty)
    case i: ImperativeAggregate =>
      val buffer = new GenericInternalRow(i.aggBufferAttributes.size)
      val f = i.withNewMutableAggBufferOffset(0).withNewInputAggBufferOffset(0)
      f.initialize(buffer)
      f.eval(buffer)
  }

  private def aggregateOf(e: Expression): AggregateExpression = e match {
    case agg: AggregateExpression => agg
    case other => throw new IllegalStateException(s"not an aggregate: ${other.sql}")
  }
}
