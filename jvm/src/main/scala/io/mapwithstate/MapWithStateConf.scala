package io.mapwithstate

import org.apache.spark.sql.internal.SQLConf

/**
 * The Spark settings of mapwithstate (`spark.mapwithstate.*`), read from the session's SQL
 * conf when a query is planned. Each default is what a user gets without setting anything.
 */
object MapWithStateConf {

  /** At most this many batches in a batch replay (distinct batch times, or interval steps). */
  val MaxReplayBatches = "spark.mapwithstate.maxReplayBatches"

  /** The heap state store writes a snapshot of a partition's state every n versions. */
  val SnapshotInterval = "spark.mapwithstate.stateStore.snapshotInterval"

  def maxReplayBatches(conf: SQLConf): Int =
    positiveInt(conf, MaxReplayBatches, execution.BatchTimeline.DefaultMaxBatches)

  def snapshotInterval(conf: SQLConf): Int =
    positiveInt(conf, SnapshotInterval, state.DeltaChainStateStoreProvider.DefaultSnapshotInterval)

  private def positiveInt(conf: SQLConf, key: String, default: Int): Int = {
    val text = conf.getConfString(key, default.toString)
    text.trim.toIntOption.filter(_ > 0).getOrElse {
      throw MapWithStateException(s"$key must be a positive integer, got '$text'")
    }
  }
}
