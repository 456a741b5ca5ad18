package io.mapwithstate.bench

import java.io.File

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.streaming.{OutputMode, Trigger}
import org.apache.spark.sql.types.{LongType, StructField, StructType}

/**
 * Runs one Structured Streaming query the way the suite measures every streaming system: the
 * scenario's Parquet files read one per micro-batch (`maxFilesPerTrigger=1`) under
 * `Trigger.AvailableNow`, written to the `noop` sink, per-batch numbers taken from the query's
 * `StreamingQueryProgress`.
 *
 * With `triggerMs` (S4's processing-time timers) batches start on a processing-time trigger
 * instead, so that every system's batch times are the same ticks of the clock and its timers
 * fall due alike, however fast it runs (a system slower than a tick runs late and sees more
 * timers due); the query is stopped once every file has had its batch.
 */
object StreamingRun {
  val HdfsProvider = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
  val RocksDbProvider = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

  /**
   * A query that runs longer is stopped and reported as failed (as bench/connect_systems.py):
   * 600 s, or `spark.mapwithstate.bench.maxQuerySeconds` (S6 grows 20M keys).
   */
  val MaxQuerySecondsConf = "spark.mapwithstate.bench.maxQuerySeconds"

  val schema: StructType = StructType(Seq(
      StructField("key", LongType, nullable = false),
      StructField("value", LongType, nullable = false)))

  /** Streams `input` through `build` with a fresh checkpoint under `dir`; `provider` is the
   * state store provider (fixed in the checkpoint when the query first starts). */
  def apply(spark: SparkSession, input: String, dir: String, outputMode: OutputMode,
      provider: Option[String], triggerMs: Option[Long] = None)(
      build: DataFrame => DataFrame): Seq[Batch] = {
    provider.foreach(spark.conf.set("spark.sql.streaming.stateStore.providerClass", _))
    val source = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1L).parquet(input)
    val query = build(source).writeStream
      .format("noop")
      .outputMode(outputMode)
      .option("checkpointLocation", s"$dir/checkpoint")
      .trigger(triggerMs.map(ms => Trigger.ProcessingTime(ms)).getOrElse(Trigger.AvailableNow()))
      .start()
    val maxSeconds = spark.conf.getOption(MaxQuerySecondsConf).map(_.toLong).getOrElse(600L)
    try {
      val files = new File(input).listFiles().count(_.getName.endsWith(".parquet"))
      val deadline = System.currentTimeMillis() + maxSeconds * 1000
      def finished: Boolean =
        if (triggerMs.isEmpty)
          query.awaitTermination(math.max(1L, deadline - System.currentTimeMillis()))
        else Option(query.lastProgress).exists(_.batchId >= files - 1) // one file per batch
      while (!finished) {
        if (System.currentTimeMillis() > deadline || !query.isActive) {
          query.exception.foreach(e => throw e)
          throw new IllegalStateException(
            s"the query did not finish within $maxSeconds s")
        }
        Thread.sleep(200)
      }
    } finally query.stop()
    query.recentProgress.toSeq.map { p =>
      val memory =
        if (p.stateOperators.isEmpty) -1L else p.stateOperators.map(_.memoryUsedBytes).sum
      Batch(p.numInputRows, p.durationMs.get("triggerExecution"), memory,
        if (p.sink == null) -1L else p.sink.numOutputRows)
    }
  }
}
