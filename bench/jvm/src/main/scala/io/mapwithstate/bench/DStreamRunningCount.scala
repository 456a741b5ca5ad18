package io.mapwithstate.bench

import java.io.File
import java.util.concurrent.{CountDownLatch, TimeUnit}

import scala.annotation.nowarn
import scala.collection.mutable

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.streaming.{Milliseconds, Minutes, State, StateSpec, StreamingContext}

/**
 * The anchor this project reproduces: Spark's DStream `mapWithState` with a timeout, fed the
 * scenario's Parquet files through `queueStream`, one file per batch.
 *
 * DStreams report no per-batch input size or state memory, so each batch is timed around its
 * output job (which includes the state RDD's periodic checkpoint, as Structured Streaming's
 * batch time includes its state commit). Only the RDD checkpoint directory is set: metadata
 * checkpointing would need the queue to be serializable, and mapWithState needs only the former.
 */
@nowarn("cat=deprecation") // DStreams are deprecated; measuring them is the point.
object DStreamRunningCount {
  private val BatchInterval = Milliseconds(100)

  def run(spark: SparkSession, input: String, dir: String): Seq[Batch] = {
    val sc = spark.sparkContext
    sc.setCheckpointDir(s"$dir/checkpoint")
    val files =
      new File(input).listFiles().filter(_.getName.endsWith(".parquet")).map(_.getPath).sorted
    val sizes = files.map(f => spark.read.parquet(f).count())
    val queue = mutable.Queue[RDD[(Long, Long)]]()
    files.foreach { f =>
      queue += spark.read.schema(StreamingRun.schema).parquet(f).rdd.map(r =>
        (r.getLong(0), r.getLong(1)))
    }

    val ssc = new StreamingContext(sc, BatchInterval)
    val spec = StateSpec.function(count _).timeout(Minutes(60)).numPartitions(
      spark.conf.get("spark.sql.shuffle.partitions").toInt)
    val batches = mutable.ArrayBuffer.empty[Batch]
    val done = new CountDownLatch(1)
    ssc.queueStream(queue, oneAtATime = true).mapWithState(spec).foreachRDD { rdd =>
      if (batches.size < files.length) {
        val start = System.nanoTime()
        rdd.foreachPartition(_.foreach(_ => ()))
        batches += Batch(sizes(batches.size), (System.nanoTime() - start) / 1000000, -1L)
        if (batches.size == files.length) done.countDown()
      }
    }
    ssc.start()
    try {
      if (!done.await(2, TimeUnit.HOURS)) throw new IllegalStateException("DStream run timed out")
    } finally ssc.stop(stopSparkContext = false, stopGracefully = false)
    batches.toSeq
  }

  private def count(key: Long, value: Option[Long], state: State[Long]): (Long, Long) = {
    if (state.isTimingOut()) return (key, state.get())
    val n = state.getOption().getOrElse(0L) + 1
    state.update(n)
    (key, n)
  }
}
