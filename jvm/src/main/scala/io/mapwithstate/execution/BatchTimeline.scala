package io.mapwithstate.execution

import io.mapwithstate.MapWithStateException

/**
 * The batches of a replay, as their times in microseconds. `fromData` timelines come from a
 * batch_time column; a record belongs to the first batch whose time is not before its own.
 */
case class BatchTimeline(times: Array[Long], fromData: Boolean) {
  def size: Int = times.length

  def batchOf(recordTime: Long): Int = {
    val i = java.util.Arrays.binarySearch(times, recordTime)
    if (i >= 0) i else -i - 1
  }
}

object BatchTimeline {
  /**
   * Batch replays are capped (`spark.mapwithstate.maxReplayBatches`): the driver collects the
   * distinct batch times, and each batch costs every partition a step.
   */
  val DefaultMaxBatches = 1000000

  /** One batch at `time`: a DataFrame without batch_time. */
  def single(time: Long): BatchTimeline = BatchTimeline(Array(time), fromData = false)

  /**
   * The batches for records with these (sorted, distinct) times: the times themselves, or with
   * an interval every step from the first time until the last time is covered.
   */
  def of(times: Array[Long], intervalMicros: Option[Long], maxBatches: Int = DefaultMaxBatches)
    : BatchTimeline = intervalMicros match {
    case _ if times.isEmpty => BatchTimeline(Array.empty, fromData = true)
    case None => BatchTimeline(times, fromData = true)
    case Some(step) =>
      val first = times.head
      val count = (times.last - first + step - 1) / step + 1
      if (count > maxBatches) {
        throw MapWithStateException(
          s"batch_interval gives $count batches between the first and the last batch_time; at " +
            s"most $maxBatches are replayed: use a longer batch_interval (or raise " +
            s"${io.mapwithstate.MapWithStateConf.MaxReplayBatches})")
      }
      BatchTimeline(Array.tabulate(count.toInt)(i => first + i * step), fromData = true)
  }
}
