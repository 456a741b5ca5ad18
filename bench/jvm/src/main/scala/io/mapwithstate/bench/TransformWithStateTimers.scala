package io.mapwithstate.bench

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.streaming.{ExpiredTimerInfo, OutputMode, StatefulProcessor, TTLConfig}
import org.apache.spark.sql.streaming.{TimeMode, TimerValues, ValueState}

/**
 * S4's workload with `transformWithState` and its processing-time timers (`TimerValues`), the
 * same logic as [[TimerCount]]: a batch's records add to their key's count (a `ValueState` on
 * Spark's RocksDB store) and set its timer `(key % 100 + 1) × step` after the batch (a day
 * from `timedKeys` on); a key whose timer fires returns (key, count) and registers the next a
 * full cycle (100 × step) later, keeping its state. Only fired timers return rows.
 *
 * "Set" replaces the key's timer, as `setTimeoutDuration` does: the state keeps the timer's
 * time, so the old one is deleted without listing the key's timers (`listTimers`, a scan).
 */
object TransformWithStateTimers {

  /** The key's count and the time its timer is due (processing time, ms). */
  final case class CountTimer(count: Long, timerMs: Long)

  final class Processor(params: TimerCount.Params)
    extends StatefulProcessor[Long, RunningCount.Record, RunningCount.KeyCount] {

    @transient private var state: ValueState[CountTimer] = _

    override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
      state = getHandle.getValueState[CountTimer]("state", Encoders.product[CountTimer],
        TTLConfig.NONE)
    }

    override def handleInputRows(key: Long, records: Iterator[RunningCount.Record],
        timerValues: TimerValues): Iterator[RunningCount.KeyCount] = {
      val previous = Option(state.get())
      previous.foreach(p => getHandle.deleteTimer(p.timerMs))
      val timerMs = timerValues.getCurrentProcessingTimeInMs() + params.durationMs(key)
      getHandle.registerTimer(timerMs)
      state.update(CountTimer(previous.map(_.count).getOrElse(0L) + records.size, timerMs))
      Iterator.empty
    }

    override def handleExpiredTimer(key: Long, timerValues: TimerValues,
        expiredTimerInfo: ExpiredTimerInfo): Iterator[RunningCount.KeyCount] = {
      val count = Option(state.get()).map(_.count).getOrElse(0L)
      val timerMs = timerValues.getCurrentProcessingTimeInMs() + params.rearmMs
      getHandle.registerTimer(timerMs)
      state.update(CountTimer(count, timerMs))
      Iterator.single(RunningCount.KeyCount(key, count))
    }
  }

  def query(params: TimerCount.Params)(source: DataFrame): DataFrame =
    TransformWithStateQuery(new Processor(params), Encoders.product[RunningCount.KeyCount])(source)
}
