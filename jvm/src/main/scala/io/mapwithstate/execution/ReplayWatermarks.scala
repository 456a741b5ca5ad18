package io.mapwithstate.execution

import scala.collection.mutable

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow

/**
 * The event-time watermarks of a batch replay, from its records: each batch's largest event
 * time, over all partitions (the watermark is global to the query, as in a stream), turned into
 * each batch's watermark by [[BatchTimeline.watermarksOf]].
 *
 * Shared by the replaying operator (its timeline's watermarks) and, for a group function, by the
 * late-row filter below its aggregation ([[LateRowFilterExec]]), which needs the watermark of
 * a record's batch before any record reaches the operator.
 */
object ReplayWatermarks {

  /**
   * The largest event time (micros) of each batch time that has records with an event time.
   *
   * @param batchTimeOf a record's batch time (micros)
   * @param eventOrdinal where the event time is in the records (null: no event time)
   */
  def maxEventTimes(rows: RDD[InternalRow], batchTimeOf: InternalRow => Long, eventOrdinal: Int)
      : Map[Long, Long] = {
    def merge(into: mutable.HashMap[Long, Long], t: Long, e: Long): Unit =
      if (into.get(t).forall(_ < e)) into(t) = e
    rows.mapPartitions { records =>
      val max = mutable.HashMap.empty[Long, Long]
      records.foreach { row =>
        if (!row.isNullAt(eventOrdinal)) merge(max, batchTimeOf(row), row.getLong(eventOrdinal))
      }
      Iterator.single(max)
    }.treeAggregate(mutable.HashMap.empty[Long, Long])(
      (acc, m) => { m.foreach { case (t, e) => merge(acc, t, e) }; acc },
      (a, b) => { b.foreach { case (t, e) => merge(a, t, e) }; a }).toMap
  }

  /**
   * Each batch's watermark (micros, or [[TimeoutPolicy.NoWatermark]]) as a function of its
   * batch time, from the largest event times of the batches: the watermark of the batch at `t`
   * is made of the batches before `t`. A record's batch time is one of the timeline's times
   * (the builder aligns them to the batch interval), so a batch time without event times, or
   * without records, has the watermark the batches before it left.
   */
  def of(maxEventTimes: Map[Long, Long], delayMs: Long): Long => Long = {
    val (times, maxima) = maxEventTimes.toArray.sortBy(_._1).unzip
    // One more entry: the watermark after every batch with event times.
    val watermarks = BatchTimeline.watermarksOf(maxima :+ Long.MinValue, delayMs)
    batchTime => {
      val i = java.util.Arrays.binarySearch(times, batchTime)
      watermarks(if (i >= 0) i else -i - 1)
    }
  }

  /**
   * The watermark after every batch (micros, or [[TimeoutPolicy.NoWatermark]]): the one a
   * batch after the replay's last would have, from all the replay's event times.
   */
  def afterLast(maxEventTimes: Map[Long, Long], delayMs: Long): Long =
    of(maxEventTimes, delayMs)(Long.MaxValue)
}
