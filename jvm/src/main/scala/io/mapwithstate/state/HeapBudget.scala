package io.mapwithstate.state

import io.mapwithstate.{MapWithStateConf, MapWithStateException}
import org.apache.spark.SparkEnv

/**
 * The ceiling on the heap one partition's [[StateMap]] may hold, checked as the map grows (every
 * [[HeapBudget.CheckEvery]] writes, against [[StateMap.memoryUsedBytes]]). Crossing it fails
 * the task with a [[MapWithStateException]] that names the partition, the state's size, the
 * limit and the ways out, instead of letting the map grow until the executor dies with an
 * OutOfMemoryError: in `local[*]` (notebooks, the local Connect server) the executor is the
 * server, and every other session on it would die too.
 *
 * The check is amortized over writes rather than made per allocation, so the map may overshoot
 * the limit by at most `CheckEvery` records (plus one hash-table growth); the default limit
 * leaves room for that.
 */
final class HeapBudget(partition: Int, limitBytes: Long) {
  private var writesUntilCheck = HeapBudget.CheckEvery

  /** Counts one write to `map`; checks the budget every `CheckEvery` writes. */
  def afterWrite(map: StateMap): Unit = {
    writesUntilCheck -= 1
    if (writesUntilCheck == 0) {
      writesUntilCheck = HeapBudget.CheckEvery
      check(map)
    }
  }

  /** Fails if `map` holds more heap than the budget allows. */
  def check(map: StateMap): Unit = {
    val used = map.memoryUsedBytes
    if (used > limitBytes) {
      throw MapWithStateException(io.mapwithstate.ErrorCondition.PartitionStateTooLarge,
        s"map_with_state: the state of partition $partition holds ${HeapBudget.describe(used)} " +
          s"of heap (${map.size} keys), over the limit of ${HeapBudget.describe(limitBytes)} per " +
          s"partition (${MapWithStateConf.MaxPartitionBytes}). Spread the state over more " +
          "partitions (StateSpec num_partitions, or spark.sql.shuffle.partitions for a new " +
          "streaming query), or keep it on the executors' local disk with " +
          "StateSpec.backend(\"rocksdb\")")
    }
  }
}

object HeapBudget {

  /** Writes between two checks: cheap (a check sums the map's pages) and a small overshoot. */
  val CheckEvery = 512

  /**
   * The share of the executor's heap all its partitions' state maps may hold together: the
   * rest is for Spark itself, the committed version a retried task needs, a background
   * snapshot and a hash table growing to twice its slots.
   */
  val DefaultHeapFraction = 0.4

  /**
   * The default per-partition limit, computed where the tasks run: the executor's heap share
   * divided among the partitions whose state it holds — the heap state partitions loaded in it
   * ([[DeltaChainStateStoreProvider.openProviders]]: a streaming query keeps every partition's
   * map between batches, so 4 partitions on 2 cores hold 4 maps), or the tasks it runs at once
   * (its cores; the machine's processors in local mode, where `spark.executor.cores` is unset;
   * a batch replay's maps live as long as their tasks), whichever is more.
   */
  def defaultLimitBytes: Long = {
    val cores = Option(SparkEnv.get).flatMap(_.conf.getOption("spark.executor.cores"))
      .flatMap(_.trim.toIntOption).filter(_ > 0)
      .getOrElse(Runtime.getRuntime.availableProcessors)
    limitBytes(Runtime.getRuntime.maxMemory, cores, DeltaChainStateStoreProvider.openProviders)
  }

  /** The heap share of `maxHeap` for one of `max(cores, heldPartitions)` partitions. */
  def limitBytes(maxHeap: Long, cores: Int, heldPartitions: Int): Long =
    (maxHeap * DefaultHeapFraction / math.max(1, math.max(cores, heldPartitions))).toLong

  private def describe(bytes: Long): String =
    if (bytes >= (1L << 20)) f"${bytes.toDouble / (1L << 20)}%.1f MB" else s"$bytes bytes"
}
