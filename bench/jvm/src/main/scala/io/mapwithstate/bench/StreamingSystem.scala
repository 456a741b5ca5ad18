package io.mapwithstate.bench

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.streaming.OutputMode

/**
 * One of the Structured Streaming systems [[BenchMain]] runs: its query over the scenario's
 * source, the output mode it writes in and the state store provider it runs on (none: the
 * stateless floor). Every such system is run the same way ([[StreamingRun]]), so a system is
 * only what sets it apart from the others.
 *
 * With S4's timer settings (the conf [[TimerCount.ConfKey]]) a system runs on their
 * processing-time trigger, so that the floor's batches and the timed systems' fall on the
 * same ticks; a query with timers needs those settings.
 */
final case class StreamingSystem(
    outputMode: OutputMode, provider: Option[String], query: StreamingSystem.Query) {

  /** Runs the system named `name` over `input`, its checkpoint under `dir`. */
  def run(spark: SparkSession, name: String, input: String, dir: String): Seq[Batch] = {
    val timers = spark.conf.getOption(TimerCount.ConfKey).map(TimerCount.params)
    val build = query match {
      case StreamingSystem.Plain(build) => build
      case StreamingSystem.Timed(build) =>
        build(timers.getOrElse(throw new IllegalArgumentException(
              s"$name sets timers: it needs S4's timer settings in ${TimerCount.ConfKey}")))
    }
    StreamingRun(spark, input, dir, outputMode, provider, timers.map(_.stepMs))(build)
  }
}

object StreamingSystem {

  /** A system's query over the source: without timers, or with S4's. */
  sealed trait Query

  /** A query without timers. */
  final case class Plain(build: DataFrame => DataFrame) extends Query

  /** A query whose keys carry timers, built from S4's timer settings. */
  final case class Timed(build: TimerCount.Params => DataFrame => DataFrame) extends Query

  /** A stateful system: its query in update mode on the state store `provider`. */
  def stateful(provider: String, query: Query): StreamingSystem =
    StreamingSystem(OutputMode.Update(), Some(provider), query)
}
