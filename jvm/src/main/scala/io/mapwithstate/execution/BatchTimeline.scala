package io.mapwithstate.execution

import io.mapwithstate.{ErrorCondition, MapWithStateConf, MapWithStateException}

/**
 * The batches of a replay, as their times in microseconds. `fromData` timelines come from a
 * batch_time column; a record belongs to the first batch whose time is not before its own.
 * With an event-time watermark on the input, each batch also has its watermark.
 *
 * @param endsAtUntil whether the last batch was added at the replay's `until`, after the
 *                    batch of the last record: it has no records, and its watermark is that of
 *                    a stream whose event time reached `until` ([[withWatermarks]])
 */
case class BatchTimeline(
    times: Array[Long],
    fromData: Boolean,
    watermarks: Option[Array[Long]] = None,
    endsAtUntil: Boolean = false) {
  def size: Int = times.length

  /**
   * The timeline with each batch's watermark (micros, or [[TimeoutPolicy.NoWatermark]]), as
   * the records give them, but for a batch added at `until`: there the watermark is `until`
   * minus the delay (in whole milliseconds, not before the epoch) when that is later, as if
   * the event time of a live stream had reached `until`, so event-time timers due by then fire.
   */
  def withWatermarks(fromRecords: Array[Long], delayMs: Long): BatchTimeline = {
    val watermarks = fromRecords.clone()
    if (endsAtUntil) watermarks(size - 1) = math.max(watermarks(size - 1), atUntil(delayMs))
    copy(watermarks = Some(watermarks))
  }

  /**
   * The watermark after the last batch (micros, or [[TimeoutPolicy.NoWatermark]]), which the
   * batch after it would have, from `afterRecords` (the records' watermark after every batch):
   * with a batch added at `until`, at least `until` minus the delay, as that batch has.
   */
  def watermarkAfterLast(afterRecords: Long, delayMs: Long): Long =
    if (endsAtUntil) math.max(afterRecords, atUntil(delayMs)) else afterRecords

  /** `until` (the last batch's time) minus the delay, in whole milliseconds, not before 0. */
  private def atUntil(delayMs: Long): Long =
    math.max(Math.floorDiv(times.last, 1000L) - delayMs, 0L) * 1000L

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
   * an interval every step from the first time until the last time is covered. With `until`
   * (micros, not before the last time) the timeline goes on after the last time, as a live
   * stream's clock would: every step of the interval before `until`, then a last batch at
   * `until` itself (without an interval, that batch alone); with no records, it is the one
   * batch at `until`.
   */
  def of(
      times: Array[Long],
      intervalMicros: Option[Long],
      maxBatches: Int = DefaultMaxBatches,
      until: Option[Long] = None): BatchTimeline = {
    val fromRecords = intervalMicros match {
      case _ if times.isEmpty => Array.empty[Long]
      case None => times
      case Some(step) =>
        val first = times.head
        val count = (times.last - first + step - 1) / step + 1
        checkCount(count, maxBatches, "between the first and the last batch_time")
        Array.tabulate(count.toInt)(i => first + i * step)
    }
    // The last batch of the records' timeline (the last time, or the step that covers it).
    val last = fromRecords.lastOption
    for (end <- until; lastTime <- last if end < lastTime) {
      throw MapWithStateException(ErrorCondition.UntilBeforeLastBatch,
        s"until (${instant(end)}) is before the replay's last batch time (${instant(lastTime)}" +
          s"${if (intervalMicros.isDefined) ", aligned to batch_interval" else ""}): the " +
          "timeline only goes on after its last record; give an until at or after it")
    }
    until.filter(end => last.forall(_ < end)) match {
      case None => BatchTimeline(fromRecords, fromData = true)
      case Some(end) =>
        val after = (intervalMicros, last) match {
          case (Some(step), Some(lastTime)) =>
            val count = (end - lastTime + step - 1) / step // the steps before until, and until
            checkCount(fromRecords.length + count, maxBatches, "up to until")
            Array.tabulate(count.toInt)(i => math.min(lastTime + (i + 1) * step, end))
          case _ => Array(end)
        }
        BatchTimeline(fromRecords ++ after, fromData = true, endsAtUntil = true)
    }
  }

  private def checkCount(count: Long, maxBatches: Int, where: String): Unit =
    if (count > maxBatches) {
      throw MapWithStateException(ErrorCondition.LimitExceeded,
        s"batch_interval gives $count batches $where; at most $maxBatches are replayed: use " +
          s"a longer batch_interval (or raise ${MapWithStateConf.MaxReplayBatches})")
    }

  private def instant(micros: Long): String =
    java.time.Instant.EPOCH.plus(micros, java.time.temporal.ChronoUnit.MICROS).toString
}
