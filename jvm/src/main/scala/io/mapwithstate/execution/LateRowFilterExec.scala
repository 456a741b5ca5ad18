package io.mapwithstate.execution

import io.mapwithstate.plan.MapWithStateOptions
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, SortOrder}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.metric.SQLMetric

/**
 * Drops a group function's late rows before its aggregation: with event-time timers, a record
 * at or before its batch's watermark is late (Spark's rule, as for a per-record function in
 * [[BatchReplayIterator]]), and a group function's aggregates must not see it, so the rows are
 * dropped where they enter the aggregation ([[GroupAggregation]]), ahead of the stateful
 * operator. Each dropped row counts in `lateRows`, which is the stateful operator's own
 * `numRowsDroppedByWatermark` metric (the same metric object), so a query's progress reports
 * them with the operator, as for a per-record function.
 *
 * The watermark of a micro-batch is fixed when it is planned; a batch replay's depend on the
 * records of the earlier batches ([[ReplayWatermarks]]), computed here over this node's input
 * before the rows are filtered. Either is the batch's own watermark, which becomes the one its
 * rows are compared with by the operator's rule, `options.watermarkOf` (never before a resumed
 * run's starting watermark): the rule the stateful operator applies to the same batch, so the
 * filter and the operator agree on which rows are late.
 */
case class LateRowFilterExec(
    eventTime: Attribute,
    watermark: LateRowFilterExec.Watermark,
    options: MapWithStateOptions,
    lateRows: SQLMetric,
    child: SparkPlan) extends UnaryExecNode {

  override def output: Seq[Attribute] = child.output
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override protected def doExecute(): RDD[InternalRow] = {
    val eventOrdinal = ordinal(eventTime)
    val options = this.options
    val watermarkOf: InternalRow => Long = watermark match {
      case LateRowFilterExec.Fixed(micros) =>
        val batchWatermark = options.watermarkOf(micros)
        _ => batchWatermark
      case LateRowFilterExec.PerBatch(batchTime, delayMs) =>
        val batchOrdinal = ordinal(batchTime)
        // A record without a batch time fails in the operator, with its own error.
        val batchTimeOf = (row: InternalRow) =>
          if (row.isNullAt(batchOrdinal)) Long.MaxValue else row.getLong(batchOrdinal)
        val watermarkAt = ReplayWatermarks.of(
          ReplayWatermarks.maxEventTimes(child.execute(), batchTimeOf, eventOrdinal), delayMs)
        row =>
          if (row.isNullAt(batchOrdinal)) TimeoutPolicy.NoWatermark
          else options.watermarkOf(watermarkAt(row.getLong(batchOrdinal)))
    }
    val dropped = lateRows
    child.execute().mapPartitions { rows =>
      rows.filter { row =>
        val late = LateRowFilterExec.isLate(row, eventOrdinal, watermarkOf(row))
        if (late) dropped += 1
        !late
      }
    }
  }

  private def ordinal(a: Attribute): Int = child.output.indexWhere(_.exprId == a.exprId)

  override protected def withNewChildInternal(newChild: SparkPlan): SparkPlan =
    copy(child = newChild)
}

object LateRowFilterExec {

  /** Where the watermark a record is compared with comes from. */
  sealed trait Watermark

  /**
   * A micro-batch's own watermark (micros), the same for all records; a one-batch replay has
   * none of its own ([[TimeoutPolicy.NoWatermark]]).
   */
  case class Fixed(micros: Long) extends Watermark

  /**
   * A batch replay's: each record's batch (`batchTime`) has its own, from the largest event
   * times of the batches before it, with `delayMs`.
   */
  case class PerBatch(batchTime: Attribute, delayMs: Long) extends Watermark

  /**
   * Whether the record's event time (at `ordinal`) is at or before `watermark`: a late record.
   * Nothing is late without a watermark, and a record without an event time never is.
   */
  def isLate(row: InternalRow, ordinal: Int, watermark: Long): Boolean =
    watermark != TimeoutPolicy.NoWatermark && !row.isNullAt(ordinal) &&
    row.getLong(ordinal) <= watermark
}
