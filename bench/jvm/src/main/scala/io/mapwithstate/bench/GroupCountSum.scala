package io.mapwithstate.bench

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.streaming.{GroupState, GroupStateTimeout, OutputMode}

/**
 * S5's workload as a Scala user writes it with `flatMapGroupsWithState`: per key and batch,
 * the count and sum of the key's records are added to its state, and one row (key, count,
 * sum) is returned; an idle timeout as in [[RunningCount]].
 */
object GroupCountSum {
  final case class KeyCountSum(key: Long, count: Long, sum: Long)

  def query(source: DataFrame): DataFrame =
    source.as(Encoders.product[RunningCount.Record])
      .groupByKey(_.key)(Encoders.scalaLong)
      .flatMapGroupsWithState(OutputMode.Update(), GroupStateTimeout.ProcessingTimeTimeout())(
        countSum)(Encoders.product[KeyCountSum], Encoders.product[KeyCountSum])
      .toDF()

  def countSum(key: Long, records: Iterator[RunningCount.Record], state: GroupState[KeyCountSum])
      : Iterator[KeyCountSum] = {
    if (state.hasTimedOut) {
      state.remove()
      Iterator.empty
    } else {
      var (n, sum) = state.getOption.map(s => (s.count, s.sum)).getOrElse((0L, 0L))
      records.foreach { r => n += 1; sum += r.value }
      val updated = KeyCountSum(key, n, sum)
      state.update(updated)
      state.setTimeoutDuration(RunningCount.IdleTimeout)
      Iterator.single(updated)
    }
  }
}
