package io.mapwithstate.bench

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.streaming.{GroupState, GroupStateTimeout, OutputMode}

/** A running count per key with an idle timeout, as a Scala user writes it today with
 * `flatMapGroupsWithState` and `ProcessingTimeTimeout`: the workload every system runs. */
object RunningCount {
  final case class Record(key: Long, value: Long)
  final case class KeyCount(key: Long, count: Long)

  /** Long enough that nothing expires while measuring; set so that timeout support is on. */
  val IdleTimeout = "1 hour"

  def query(source: DataFrame): DataFrame = {
    val records = source.as(Encoders.product[Record])
    records
      .groupByKey(_.key)(Encoders.scalaLong)
      .flatMapGroupsWithState(OutputMode.Update(), GroupStateTimeout.ProcessingTimeTimeout())(
        count)(
        Encoders.scalaLong, Encoders.product[KeyCount])
      .toDF()
  }

  def count(key: Long, records: Iterator[Record], state: GroupState[Long]): Iterator[KeyCount] = {
    if (state.hasTimedOut) {
      state.remove()
      Iterator.empty
    } else {
      var n = state.getOption.getOrElse(0L)
      // Materialized before the state update: the iterator must be consumed to know the count.
      val out = ArrayBuffer.empty[KeyCount]
      records.foreach { _ => n += 1; out += KeyCount(key, n) }
      state.update(n)
      state.setTimeoutDuration(IdleTimeout)
      out.iterator
    }
  }
}
