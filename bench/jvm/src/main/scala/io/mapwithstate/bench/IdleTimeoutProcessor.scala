package io.mapwithstate.bench

import org.apache.spark.sql.Encoder
import org.apache.spark.sql.streaming.{ExpiredTimerInfo, OutputMode, StatefulProcessor, TTLConfig}
import org.apache.spark.sql.streaming.{TimeMode, TimerValues, ValueState}

/**
 * The idle timeout every other system of S1, S2 and S5 has (an hour without records drops the
 * key's state, with a call to the user's code when it does), as a transformWithState user
 * keeps it: in processing time (`TimeMode.ProcessingTime()`), one timer per key. The key's
 * state carries when it last had records; the timer is registered when the key first appears
 * and, when it fires, is registered again an hour after the last records, or the state is
 * cleared if there were none since. So a batch's records touch only the `ValueState`, as
 * flatMapGroupsWithState's `setTimeoutDuration` touches only its state row.
 *
 * Why not a timer re-armed per batch (`deleteTimer` and `registerTimer`: four more writes to
 * the timers' two column families per key and batch, for the same behaviour), nor a TTL on the
 * `ValueState` (no call when the state expires, and a write to the TTL index per update): this
 * is the cheapest way transformWithState offers to do what the others do.
 *
 * Subclasses say what the state is and what a key's records of a batch do to it.
 */
abstract class IdleTimeoutProcessor[I, O, S](implicit stateEncoder: Encoder[S])
  extends StatefulProcessor[Long, I, O] {

  @transient private var state: ValueState[S] = _

  /** The key's new state and its output for a batch's `records`, `previous` its state. */
  protected def update(key: Long, previous: Option[S], records: Iterator[I], nowMs: Long)
      : (S, Iterator[O])

  /** When the key last had records (processing time, ms), as `update` stored it. */
  protected def lastSeenMs(state: S): Long

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    state = getHandle.getValueState[S]("state", stateEncoder, TTLConfig.NONE)
  }

  override def handleInputRows(key: Long, records: Iterator[I], timerValues: TimerValues)
      : Iterator[O] = {
    val nowMs = timerValues.getCurrentProcessingTimeInMs()
    val previous = Option(state.get())
    if (previous.isEmpty) getHandle.registerTimer(nowMs + IdleTimeoutProcessor.IdleMs)
    val (next, out) = update(key, previous, records, nowMs)
    state.update(next)
    out
  }

  override def handleExpiredTimer(key: Long, timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[O] = {
    Option(state.get()).foreach { current =>
      val due = lastSeenMs(current) + IdleTimeoutProcessor.IdleMs
      if (due <= timerValues.getCurrentProcessingTimeInMs()) state.clear()
      else getHandle.registerTimer(due)
    }
    Iterator.empty // as flatMapGroupsWithState's RunningCount: a timed-out key emits nothing
  }
}

object IdleTimeoutProcessor {

  /** [[RunningCount.IdleTimeout]]: long enough that nothing expires while measuring. */
  val IdleMs: Long = 3600L * 1000
}
