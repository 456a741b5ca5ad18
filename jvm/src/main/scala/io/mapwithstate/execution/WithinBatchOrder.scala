package io.mapwithstate.execution

import io.mapwithstate.plan.StateFunctionInput
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  Ascending,
  Attribute,
  MonotonicallyIncreasingID,
  SortOrder
}
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan}

/**
 * The order in which a key's records of one micro-batch reach a stream's state function when
 * the caller gives `order_by`: they are sorted within each state partition, after the shuffle
 * that brings a key's records together (Spark's `SortExec` with `global = false`, as Spark
 * sorts a flatMapGroupsWithState's input by its keys), never across partitions, so the sort
 * adds no shuffle. A per-record function's operator asks for this order as its required child
 * ordering; a group function's aggregation sorts by its keys and then this order
 * ([[GroupAggregation]]).
 *
 * Ties keep the order the records arrive in: each record is numbered before the shuffle (its
 * input partition, then its position there: Spark's `monotonically_increasing_id`), and that
 * number ends the sort order. The order is then total, so it holds whether or not the sorter
 * spills (the merge of spilled runs is not stable), and it is the same when a micro-batch is
 * run again after a failure, as its input partitions are. Without `order_by`, a per-record
 * function's records are neither numbered nor sorted; a group function's are when one of its
 * aggregates depends on their order (by arrival alone, see [[GroupAggregation]]).
 */
object WithinBatchOrder {

  /** The column of a record's arrival number: only the sort reads it, no operator above. */
  val ArrivalColumn: String = StateFunctionInput.ReservedPrefix + "arrival"

  /** `child` with each record's arrival number as its last column, and that column. */
  def numbered(child: SparkPlan): (SparkPlan, Attribute) = {
    val arrival = Alias(MonotonicallyIncreasingID(), ArrivalColumn)()
    (ProjectExec(child.output :+ arrival, child), arrival.toAttribute)
  }

  /** `orderBy`, then arrival: the order of a key's records within a micro-batch. */
  def of(orderBy: Seq[SortOrder], arrival: Attribute): Seq[SortOrder] =
    orderBy :+ SortOrder(arrival, Ascending)
}
