package io.mapwithstate.bench

import org.apache.spark.sql.{DataFrame, Encoders}

/**
 * S5's workload with `transformWithState`, as [[GroupCountSum]] does it with
 * flatMapGroupsWithState: per key and batch the count and sum of the key's records are added
 * to its `ValueState` (Spark's RocksDB store) and one row (key, count, sum) is returned; the
 * hour's idle timeout as in [[TransformWithStateRunningCount]].
 */
object TransformWithStateCountSum {

  /** The key's count and sum, and when it last had records (processing time, ms). */
  final case class SeenCountSum(count: Long, sum: Long, lastSeenMs: Long)

  final class Processor
    extends IdleTimeoutProcessor[RunningCount.Record, GroupCountSum.KeyCountSum, SeenCountSum]()(
      Encoders.product[SeenCountSum]) {

    override protected def update(key: Long, previous: Option[SeenCountSum],
        records: Iterator[RunningCount.Record], nowMs: Long)
        : (SeenCountSum, Iterator[GroupCountSum.KeyCountSum]) = {
      var (n, sum) = previous.map(s => (s.count, s.sum)).getOrElse((0L, 0L))
      records.foreach { r => n += 1; sum += r.value }
      (SeenCountSum(n, sum, nowMs), Iterator.single(GroupCountSum.KeyCountSum(key, n, sum)))
    }

    override protected def lastSeenMs(state: SeenCountSum): Long = state.lastSeenMs
  }

  def query(source: DataFrame): DataFrame =
    TransformWithStateQuery(new Processor, Encoders.product[GroupCountSum.KeyCountSum])(source)
}
