package io.mapwithstate.execution

import io.mapwithstate.MapWithStateException

/**
 * The batches of a replay, as their times in microseconds. `fromData` timelines come from a
 * batch_time column; a record belongs to the first batch whose time is not before its own.
 * With an event-time watermark on the input, each batch also has its watermark.
 */
case class BatchTimeline(
    times: Array[Long],
    fromData: Boolean,
    watermarks: Option[Array[Long]] = None) {
  def size: Int = times.length

  /** The event-time watermark of a batch (micros), or [[TimeoutPolicy.NoWatermark]]. */
  def watermarkAt(batch: Int): Long =
    watermarks.map(_(batch)).getOrElse(TimeoutPolicy.NoWatermark)

  def batchOf(recordTime: Long): Int = {
    val i = java.util.Arrays.binarySearch(times, recordTime)
    if (i >= 0) i else -i - 1
  }
}

object BatchTimeline {

  /**
   * The watermark of each batch of a replay, advanced as Structured Streaming advances it
   * (`WatermarkTracker`): after a batch, the largest event time seen so far (in whole
   * milliseconds) minus the delay, never moving back; none before the first batch with event
   * times completes.
   *
   * @param maxEventTimes each batch's largest event time (micros), or Long.MinValue for none
   */
  def watermarksOf(maxEventTimes: Array[Long], delayMs: Long): Array[Long] = {
    var watermarkMs = Long.MinValue
    maxEventTimes.map { maxMicros =>
      val current =
        if (watermarkMs == Long.MinValue) TimeoutPolicy.NoWatermark else watermarkMs * 1000L
      if (maxMicros != Long.MinValue) {
        // Spark's tracker starts at 0 and only moves forward.
        watermarkMs = math.max(math.max(watermarkMs, 0L), Math.floorDiv(maxMicros, 1000L) - delayMs)
      }
      current
    }
  }

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
        throw MapWithStateException(io.mapwithstate.ErrorCondition.LimitExceeded,
          s"batch_interval gives $count batches between the first and the last batch_time; at " +
            s"most $maxBatches are replayed: use a longer batch_interval (or raise " +
            s"${io.mapwithstate.MapWithStateConf.MaxReplayBatches})")
      }
      BatchTimeline(Array.tabulate(count.toInt)(i => first + i * step), fromData = true)
  }
}
