package io.mapwithstate.bench

import org.apache.spark.sql.{DataFrame, Encoders}

/**
 * S1's and S2's running count as a Scala user writes it with Spark 4's `transformWithState`:
 * a `ValueState` per key on Spark's RocksDB store (the only one transformWithState runs on),
 * each record adding one and returning (key, count), with the hour's idle timeout kept by a
 * processing-time timer ([[IdleTimeoutProcessor]]).
 */
object TransformWithStateRunningCount {

  /** The key's count and when it last had records (processing time, ms). */
  final case class SeenCount(count: Long, lastSeenMs: Long)

  final class Processor
    extends IdleTimeoutProcessor[RunningCount.Record, RunningCount.KeyCount, SeenCount]()(
      Encoders.product[SeenCount]) {

    override protected def update(key: Long, previous: Option[SeenCount],
        records: Iterator[RunningCount.Record], nowMs: Long)
        : (SeenCount, Iterator[RunningCount.KeyCount]) = {
      var n = previous.map(_.count).getOrElse(0L)
      // Materialized before the state update, as RunningCount does: the count needs them all.
      val out = records.map { _ => n += 1; RunningCount.KeyCount(key, n) }.toVector
      (SeenCount(n, nowMs), out.iterator)
    }

    override protected def lastSeenMs(state: SeenCount): Long = state.lastSeenMs
  }

  def query(source: DataFrame): DataFrame =
    TransformWithStateQuery(new Processor, Encoders.product[RunningCount.KeyCount])(source)
}
