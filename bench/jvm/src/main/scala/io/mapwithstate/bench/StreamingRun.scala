package io.mapwithstate.bench

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.streaming.{OutputMode, Trigger}
import org.apache.spark.sql.types.{LongType, StructField, StructType}

/**
 * Runs one Structured Streaming query the way the suite measures every streaming system: the
 * scenario's Parquet files read one per micro-batch (`maxFilesPerTrigger=1`) under
 * `Trigger.AvailableNow`, written to the `noop` sink, per-batch numbers taken from the query's
 * `StreamingQueryProgress`.
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
    StructField("key", LongType, nullable = false), StructField("value", LongType, nullable = false)))

  /** Streams `input` through `build` with a fresh checkpoint under `dir`; `provider` is the
   * state store provider (fixed in the checkpoint when the query first starts). */
  def apply(spark: SparkSession, input: String, dir: String, outputMode: OutputMode,
      provider: Option[String])(
      build: DataFrame => DataFrame): Seq[Batch] = {
    provider.foreach(spark.conf.set("spark.sql.streaming.stateStore.providerClass", _))
    val source = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1L).parquet(input)
    val query = build(source).writeStream
      .format("noop")
      .outputMode(outputMode)
      .option("checkpointLocation", s"$dir/checkpoint")
      .trigger(Trigger.AvailableNow())
      .start()
    val maxSeconds = spark.conf.getOption(MaxQuerySecondsConf).map(_.toLong).getOrElse(600L)
    try {
      if (!query.awaitTermination(maxSeconds * 1000)) {
        throw new IllegalStateException(s"the query did not finish within $maxSeconds s")
      }
    } finally query.stop()
    query.recentProgress.toSeq.map { p =>
      val memory = if (p.stateOperators.isEmpty) -1L else p.stateOperators.map(_.memoryUsedBytes).sum
      Batch(p.numInputRows, p.durationMs.get("triggerExecution"), memory)
    }
  }
}
