package io.mapwithstate.bench

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.streaming.{GroupState, GroupStateTimeout, OutputMode}

/**
 * S4's workload as a Scala user writes it with `flatMapGroupsWithState` and
 * `ProcessingTimeTimeout`: every key carries a timer. A batch's records add to their key's
 * count and set its timer to `(key % 100 + 1) × step` after the batch (keys from `timedKeys`
 * on: a day, so that a grown state does not expire more keys per batch); a key whose timer
 * passed returns (key, count) and re-arms it a full cycle (100 × step) later, keeping its
 * state. Only timing-out calls return rows, so a batch's output rows are its expired keys.
 * The same logic as ours in bench/connect_systems.py (`timer_spec`).
 */
object TimerCount {

  /** The step (ms) and the keys below which timers are spread: the harness's settings. */
  final case class Params(stepMs: Long, timedKeys: Long) {
    def durationMs(key: Long): Long =
      if (key < timedKeys) (key % 100 + 1) * stepMs else TimerCount.FarMs
    def rearmMs: Long = 100 * stepMs
  }

  val FarMs: Long = 24L * 3600 * 1000

  /** Read from the conf the harness passes to spark-submit ("<step ms>,<timed keys>"). */
  val ConfKey = "spark.mapwithstate.bench.timers"

  def params(conf: String): Params = conf.split(",") match {
    case Array(step, timed) => Params(step.trim.toLong, timed.trim.toLong)
    case _ =>
      throw new IllegalArgumentException(s"$ConfKey must be '<step ms>,<timed keys>': $conf")
  }

  def query(params: Params)(source: DataFrame): DataFrame =
    source.as(Encoders.product[RunningCount.Record])
      .groupByKey(_.key)(Encoders.scalaLong)
      .flatMapGroupsWithState(OutputMode.Update(), GroupStateTimeout.ProcessingTimeTimeout())(
        (key: Long, records: Iterator[RunningCount.Record], state: GroupState[Long]) =>
          call(params, key, records, state))(
        Encoders.scalaLong, Encoders.product[RunningCount.KeyCount])
      .toDF()

  def call(params: Params, key: Long, records: Iterator[RunningCount.Record],
      state: GroupState[Long]): Iterator[RunningCount.KeyCount] = {
    if (state.hasTimedOut) {
      state.setTimeoutDuration(params.rearmMs)
      Iterator.single(RunningCount.KeyCount(key, state.getOption.getOrElse(0L)))
    } else {
      state.update(state.getOption.getOrElse(0L) + records.size)
      state.setTimeoutDuration(params.durationMs(key))
      Iterator.empty
    }
  }
}
