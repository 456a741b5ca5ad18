package io.mapwithstate.execution

import java.util.UUID

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.spark.SparkContext
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.util.SerializableConfiguration

/**
 * The Hadoop configuration of each recent query run's state stores, broadcast once per run
 * rather than once per micro-batch as Spark's `StateStoreRDD` does: serializing and
 * broadcasting it (~40 KiB) is driver work before each batch's job can start, and each
 * batch's tasks would then read a new broadcast. A query run's session, and so its
 * configuration, is fixed when the run starts, but a micro-batch that finds it changed
 * (compared entry by entry, which costs far less than a broadcast) gets a new broadcast. A
 * broadcast dropped from here is cleaned by Spark once no RDD holds it.
 */
object HadoopConfBroadcasts {
  private val MaxRuns = 16

  private case class Entry(
      context: SparkContext,
      entries: Map[String, String],
      broadcast: Broadcast[SerializableConfiguration])

  private val byRun = new java.util.LinkedHashMap[UUID, Entry](16, 0.75f, true) {
    override def removeEldestEntry(eldest: java.util.Map.Entry[UUID, Entry]): Boolean =
      size > MaxRuns
  }

  @volatile private var made = 0L

  /** How many broadcasts this JVM has made (for tests). */
  def broadcasts: Long = made

  /** `conf` broadcast for query run `run` in `sc`: the run's broadcast while `conf` is its. */
  def of(
      sc: SparkContext,
      run: UUID,
      conf: Configuration): Broadcast[SerializableConfiguration] = {
    val entries = conf.iterator().asScala.map(e => e.getKey -> e.getValue).toMap
    byRun.synchronized {
      val known = byRun.get(run)
      if (known != null && (known.context eq sc) && known.entries == entries) {
        known.broadcast
      } else {
        val broadcast = sc.broadcast(new SerializableConfiguration(conf))
        made += 1
        byRun.put(run, Entry(sc, entries, broadcast))
        broadcast
      }
    }
  }
}
