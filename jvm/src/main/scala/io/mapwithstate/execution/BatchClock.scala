package io.mapwithstate.execution

import org.apache.spark.sql.execution.datasources.v2.LowLatencyClock

/**
 * What time a batch's calls see (`batch_time()`), and when the keys due to time out are looked
 * for: one variant per kind of batch, chosen when the operator is planned and matched by
 * [[BatchReplayIterator]].
 *
 *  - [[BatchClock.OfTimeline]]: a micro-batch, or a batch of a replay. Every call of a batch
 *    sees the batch's time, and the [[TimeoutPolicy]] looks for due keys once, after the
 *    batch's records, against that time (as Spark's `FlatMapGroupsWithStateExec` and DStream's
 *    mapWithState do).
 *  - [[BatchClock.WallClock]]: a long-running batch of Real-Time Mode, which may last minutes.
 *    Each call sees the wall clock read for it (in milliseconds, Real-Time Mode's clock), and
 *    due keys are looked for between records, as they arrive, at most every `intervalMs`, and
 *    once more when the batch's records end; a key due is timed out against the clock then,
 *    whatever the batch's start. This is what Spark's `transformWithState` does in Real-Time
 *    Mode (its `TimerValues` give each call the clock read for it, and it fires its due timers
 *    after every record and at the input's end), but throttled: a look costs a read of the
 *    front of the state's expiry index, too much for every record of a busy partition. And
 *    when the task's records are handed off by a reader thread ([[RecordHandOff]]), a
 *    partition waiting for records also looks at the batch's start and then every
 *    `intervalMs` (at least [[WallClock.MinIdleWaitMs]]) while none arrives.
 *
 * Event-time timers time out against the batch's watermark in both, which Real-Time Mode only
 * advances between batches: within a long batch they fall due at its first look.
 */
sealed trait BatchClock extends Serializable

object BatchClock {

  /** Every call of a batch sees the batch's time; timeouts are looked for at its end. */
  case object OfTimeline extends BatchClock

  /**
   * Each call sees the wall clock; due keys are looked for between records at most every
   * `intervalMs` (0: before every record), and at the end of the batch's records.
   *
   * @param millis the clock, in milliseconds: Real-Time Mode's (`LowLatencyClock`, the one its
   *               source reads), or a test's
   */
  final case class WallClock(
      intervalMs: Long,
      millis: () => Long = () => LowLatencyClock.getTimeMillis()) extends BatchClock {
    require(intervalMs >= 0, s"bad interval: $intervalMs")

    /** The time now, in microseconds. */
    def nowMicros(): Long = millis() * 1000L
  }

  object WallClock {

    /**
     * The least time (ms) a partition waits for a record before it looks for due keys again
     * when none arrives: with an interval of 0 (a look before every record), an idle
     * partition would otherwise look without pause.
     */
    val MinIdleWaitMs: Long = 10L
  }

  /** Between records of a real-time batch, due keys are looked for at most this often. */
  val DefaultIntervalMs: Long = 100L
}
