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

  /**
   * For a large partition state (a snapshot of 4 MB or more), the heap state store's next
   * snapshot also waits until the deltas since the last one hold this fraction of its bytes
   * (default 0.5; 0: the interval alone decides). See `DeltaChainStateStoreProvider.snapshotDue`.
   */
  val SnapshotDeltaRatio = "spark.mapwithstate.stateStore.snapshotDeltaRatio"

  /**
   * The heap one partition's state may hold with the memory backend (bytes, or a size such as
   * "512m"); unset, a safe share of each executor's heap per partition of state it holds, or
   * per core if it has more cores (see
   * [[state.HeapBudget.defaultLimitBytes]]).
   */
  val MaxPartitionBytes = "spark.mapwithstate.stateStore.maxPartitionBytes"

  /**
   * The backend of a StateSpec that names none (`memory` by default): a session can move every
   * query's state to RocksDB without changing its specs.
   */
  val Backend = "spark.mapwithstate.stateStore.backend"

  /**
   * In local mode (`local[n]`: one executor holds every state partition), whether a
   * micro-batch's stateful stage runs a task per core, each serving a run of state partitions
   * one after another, rather than a task per partition (default true). See
   * [[execution.StateTaskGroups]].
   */
  val CoalesceLocalStoreTasks = "spark.mapwithstate.stateStore.coalesceLocalTasks"

  /**
   * In a real-time batch (Real-Time Mode), the least time in milliseconds between two looks
   * for the keys due to time out, made as records arrive (default 100; 0: before every
   * record), and how often a partition that gets no records looks (at least every 10 ms).
   * See [[execution.BatchClock.WallClock]].
   */
  val RealTimeTimerInterval = "spark.mapwithstate.realTimeMode.timerIntervalMs"

  def backend(conf: SQLConf): String =
    conf.getConfString(Backend, state.StateBackend.MemoryName).trim.toLowerCase(
      java.util.Locale.ROOT)

  def maxReplayBatches(conf: SQLConf): Int =
    positiveInt(conf, MaxReplayBatches, execution.BatchTimeline.DefaultMaxBatches)

  def snapshotInterval(conf: SQLConf): Int =
    positiveInt(conf, SnapshotInterval, state.DeltaChainStateStoreProvider.DefaultSnapshotInterval)

  def snapshotDeltaRatio(conf: SQLConf): Double = {
    val text = conf.getConfString(SnapshotDeltaRatio,
      state.DeltaChainStateStoreProvider.DefaultSnapshotDeltaRatio.toString)
    text.trim.toDoubleOption.filter(r => r >= 0 && !r.isInfinite).getOrElse {
      throw MapWithStateException(ErrorCondition.InvalidConf,
        s"$SnapshotDeltaRatio must be a number of at least 0, got '$text'")
    }
  }

  def maxPartitionBytes(conf: SQLConf): Option[Long] =
    conf.getConfString(MaxPartitionBytes, null) match {
      case null => None
      case text =>
        val bytes =
          try org.apache.spark.network.util.JavaUtils.byteStringAsBytes(text.trim)
          catch {
            case _: NumberFormatException => -1L
          }
        if (bytes <= 0) {
          throw MapWithStateException(ErrorCondition.InvalidConf,
            s"$MaxPartitionBytes must be a positive size in bytes (such as 536870912 or 512m), " +
              s"got '$text'")
        }
        Some(bytes)
    }

  def coalesceLocalStoreTasks(conf: SQLConf): Boolean = {
    val text = conf.getConfString(CoalesceLocalStoreTasks, "true")
    text.trim.toLowerCase(java.util.Locale.ROOT).toBooleanOption.getOrElse {
      throw MapWithStateException(ErrorCondition.InvalidConf,
        s"$CoalesceLocalStoreTasks must be true or false, got '$text'")
    }
  }

  def realTimeTimerIntervalMs(conf: SQLConf): Long = {
    val default = execution.BatchClock.DefaultIntervalMs
    val text = conf.getConfString(RealTimeTimerInterval, default.toString)
    text.trim.toLongOption.filter(_ >= 0).getOrElse {
      throw MapWithStateException(ErrorCondition.InvalidConf,
        s"$RealTimeTimerInterval must be a whole number of milliseconds, 0 or more, got '$text'")
    }
  }

  private def positiveInt(conf: SQLConf, key: String, default: Int): Int = {
    val text = conf.getConfString(key, default.toString)
    text.trim.toIntOption.filter(_ > 0).getOrElse {
      throw MapWithStateException(ErrorCondition.InvalidConf,
        s"$key must be a positive integer, got '$text'")
    }
  }
}
