package io.mapwithstate.execution

import io.mapwithstate.plan.TimerDomain

/**
 * Which batches look for keys that time out, and which keys do: those whose state was last
 * updated strictly before the batch's threshold.
 *
 * Batches are numbered from 1 in the query (a batch replay's timeline, or a streaming query's
 * micro-batches: the store version the batch makes), so that a replay and a stream over the
 * same batches fire the same timeouts. The policy also says whether a record refreshes its
 * key's update time when it leaves the state as it was: only when there is something to time
 * out. Keys are found through the state map's expiry index
 * ([[io.mapwithstate.state.StateMap.expiring]]), so a batch that looks costs the keys that
 * expire, not the whole state.
 *
 * With timers (`timeout_at`) the map's per-key time is the key's timer rather than its update
 * time: the two never coexist, as `timeout` and `timeout_at` exclude each other.
 */
sealed trait TimeoutPolicy extends Serializable {

  /** Whether a record that keeps its key's state still refreshes the key's update time. */
  def refreshesIdleKeys: Boolean

  /**
   * For the `batchNumber`-th batch (counting from 1), at `batchTime` (micros), the update time
   * below which keys time out; None when the batch looks for no timeouts.
   */
  final def threshold(
      batchNumber: Long,
      batchTime: Long,
      watermark: Long = TimeoutPolicy.NoWatermark): Option[Long] =
    if (scans(batchNumber)) dueBefore(batchTime, watermark) else None

  /** Whether the `batchNumber`-th batch looks for keys that time out. */
  def scans(batchNumber: Long): Boolean

  /**
   * At `time` (micros), with the batch's `watermark`, the update time below which keys are
   * due, whichever batch looks; None when none can be due. A real-time batch looks at the
   * wall clock between records ([[BatchClock.WallClock]]), whatever its number.
   */
  def dueBefore(time: Long, watermark: Long): Option[Long]
}

object TimeoutPolicy {

  /** Keys never time out. */
  case object Never extends TimeoutPolicy {
    override def refreshesIdleKeys: Boolean = false
    override def scans(batchNumber: Long): Boolean = false
    override def dueBefore(time: Long, watermark: Long): Option[Long] = None
  }

  /**
   * DStream's mapWithState idle timeout: a key times out once no record has come for it for
   * `timeoutMicros`; timed-out keys are found by a scan on every `scanEvery`-th batch only, as
   * a DStream scans when it checkpoints (every 10 batches by default), so a key may stay idle
   * for up to `scanEvery` batches longer than the timeout.
   */
  final case class Idle(timeoutMicros: Long, scanEvery: Int) extends TimeoutPolicy {
    require(timeoutMicros > 0 && scanEvery > 0, s"bad idle timeout: $this")

    override def refreshesIdleKeys: Boolean = true

    override def scans(batchNumber: Long): Boolean = batchNumber % scanEvery == 0

    override def dueBefore(time: Long, watermark: Long): Option[Long] = Some(time - timeoutMicros)
  }

  /**
   * `timeout_at` timers, as Spark's GroupState timeouts: checked on every batch, a key times
   * out once the threshold has strictly passed its timer — the batch time for processing-time
   * timers, the batch's watermark for event-time ones (none before a watermark exists).
   */
  final case class Timers(eventTime: Boolean) extends TimeoutPolicy {
    override def refreshesIdleKeys: Boolean = false

    override def scans(batchNumber: Long): Boolean = true

    override def dueBefore(time: Long, watermark: Long): Option[Long] =
      if (!eventTime) Some(time)
      else if (watermark == NoWatermark) None
      else Some(watermark)
  }

  /** A batch's watermark (micros) when the input has none, or none is known yet. */
  val NoWatermark: Long = Long.MinValue

  /**
   * The policy of a mapWithState's options: timers in their domain, or an idle timeout (ms)
   * scanned every n batches.
   */
  def of(timeoutMs: Option[Long], checkpointInterval: Int, timerDomain: Option[TimerDomain] = None)
      : TimeoutPolicy = (timeoutMs, timerDomain) match {
    case (_, Some(domain)) => Timers(eventTime = domain == TimerDomain.EventTime)
    case (Some(ms), None) => Idle(ms * 1000L, checkpointInterval)
    case (None, None) => Never
  }
}
