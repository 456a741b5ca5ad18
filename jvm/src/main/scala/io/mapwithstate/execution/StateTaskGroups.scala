package io.mapwithstate.execution

import io.mapwithstate.MapWithStateConf
import org.apache.spark.SparkContext
import org.apache.spark.sql.internal.SQLConf

/**
 * Which state partitions each task of a micro-batch's stateful stage serves, in order.
 *
 * Spark runs a task per state partition. In local mode one executor holds every partition, so
 * there is no locality to keep, and tasks beyond the executor's cores only queue behind each
 * other, each paying its own fixed cost: launch, deserializing the task, a result buffer and
 * a status update, large beside a small micro-batch's work for one partition. There, the
 * stage runs one task per core, each serving a contiguous run of partitions one after another:
 * its store loaded, its records run, committed, then the next. Each partition keeps its own
 * store, version and files, so the checkpoint is the same as with a task per partition, and a
 * restart may change the grouping freely.
 *
 * Anywhere else (a cluster, `local-cluster`), or with
 * [[MapWithStateConf.CoalesceLocalStoreTasks]] off, a task per partition, as Spark's own
 * operators: there a partition's state lives on the executor that loaded it last, and a task
 * serving partitions of two executors would move one of them.
 */
object StateTaskGroups {

  /** One task per partition: `partitions` groups of one. */
  def single(partitions: Int): Array[Array[Int]] = Array.tabulate(partitions)(Array(_))

  /**
   * Partitions `0 until partitions` in `tasks` contiguous runs whose sizes differ by at most
   * one (the larger ones first); every partition in exactly one run, in order.
   */
  def split(partitions: Int, tasks: Int): Array[Array[Int]] = {
    require(partitions >= 0 && tasks >= 1, s"cannot split $partitions partitions into $tasks tasks")
    val n = math.min(tasks, partitions)
    // Run i starts after the i larger runs (up to `extra` of them) and the smaller ones before.
    val (base, extra) = if (n == 0) (0, 0) else (partitions / n, partitions % n)
    Array.tabulate(n) { i =>
      val start = i * base + math.min(i, extra)
      Array.range(start, start + base + (if (i < extra) 1 else 0))
    }
  }

  /** The groups of a stage over `partitions` state partitions in this session (on the driver). */
  def of(partitions: Int, sc: SparkContext, conf: SQLConf): Array[Array[Int]] = {
    val cores = sc.defaultParallelism
    if (sc.isLocal && MapWithStateConf.coalesceLocalStoreTasks(conf) && partitions > cores) {
      split(partitions, cores)
    } else {
      single(partitions)
    }
  }
}
