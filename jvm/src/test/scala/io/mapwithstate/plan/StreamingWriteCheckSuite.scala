package io.mapwithstate.plan

import io.mapwithstate.{LocalSpark, MapWithState, MapWithStateException, StateSpec, TempDirs}
import io.mapwithstate.functions._
import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.execution.streaming.runtime.MemoryStream
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming.{GroupState, GroupStateTimeout, OutputMode}
import org.scalatest.funsuite.AnyFunSuite

/**
 * What a streaming query's start refuses around a map_with_state beside Spark's own stateful
 * operators, which only the Scala API builds in one query (Python has no flatMapGroupsWithState):
 * Spark's global-watermark limit (UnsupportedOperationsSuite's "multiple stateful ops" cases)
 * with map_with_state on either side, and the switches that turn it off.
 */
class StreamingWriteCheckSuite extends AnyFunSuite with LocalSpark with TempDirs {

  private val CorrectnessCheck = "spark.sql.streaming.statefulOperator.checkCorrectness.enabled"

  /** (word, event) under a 5 s watermark on `event`. */
  private def events: DataFrame = {
    val input = MemoryStream[(String, Long)](
      Encoders.tuple(Encoders.STRING, Encoders.scalaLong), spark.sqlContext)
    input.toDF().select(col("_1").as("word"), timestamp_seconds(col("_2")).as("event"))
      .withWatermark("event", "5 seconds")
  }

  /** A running count per word; with `eventTime`, a timer 1 s after its latest record. */
  private def runningCount(eventTime: Boolean): StateSpec = {
    val spec = StateSpec.function("n BIGINT",
      update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
      emit = struct(col("word"), newState("n").as("n"), col("event").as("t")),
      timeoutAt = if (eventTime) col("event") + expr("INTERVAL 1 SECOND") else null)
    if (eventTime) spec.timeoutDomain("event_time") else spec
  }

  private def mapWithState(df: DataFrame, eventTime: Boolean = false): DataFrame =
    MapWithState.mapWithState(df, Seq(col("word")), runningCount(eventTime))

  /** Spark's flatMapGroupsWithState(Append) over `df`'s words, counting each batch's rows. */
  private def flatMapGroupsWithState(df: DataFrame, timeout: GroupStateTimeout): DataFrame = {
    val counts = (word: String, rows: Iterator[Row], _: GroupState[java.lang.Long]) =>
      Iterator((word, rows.size.toLong))
    df.groupByKey((r: Row) => r.getString(0))(Encoders.STRING)
      .flatMapGroupsWithState(OutputMode.Append(), timeout)(counts)(
        Encoders.LONG, Encoders.tuple(Encoders.STRING, Encoders.scalaLong))
      .toDF("word", "n")
  }

  /** The error starting `df` in `mode` gives, with `settings` set for the start; None if none. */
  private def startError(df: DataFrame, mode: String,
      settings: Map[String, String] = Map.empty): Option[String] = {
    var error: Option[String] = None
    withDir { dir =>
      settings.foreach { case (k, v) => spark.conf.set(k, v) }
      try {
        df.writeStream.format("memory").queryName(s"q${System.nanoTime()}")
          .outputMode(mode).option("checkpointLocation", dir.getPath).start().stop()
      } catch {
        case e: MapWithStateException => error = Some(e.getMessage)
      } finally settings.keys.foreach(spark.conf.unset)
    }
    error
  }

  private def assertRefused(df: DataFrame, mode: String, culprit: String): Unit = {
    val message = startError(df, mode)
    assert(message.exists(_.contains(culprit)), message)
    assert(message.exists(_.contains(GlobalWatermarkLimit.SparkMessage)), message)
  }

  test("flatMapGroupsWithState after map_with_state with event-time timers is refused") {
    assertRefused(flatMapGroupsWithState(mapWithState(events, eventTime = true),
      GroupStateTimeout.NoTimeout()), "append",
      "map_with_state with event-time timers (timeout_domain('event_time')) is followed by " +
        "flatMapGroupsWithState")
  }

  test("map_with_state after flatMapGroupsWithState with EventTimeTimeout is refused") {
    // Its rows have no event time: map_with_state over them counts them by word.
    assertRefused(mapWithState(flatMapGroupsWithState(events,
      GroupStateTimeout.EventTimeTimeout()).withColumn("event", current_timestamp())),
      "append",
      "flatMapGroupsWithState with GroupStateTimeout.EventTimeTimeout is followed by " +
        "map_with_state")
  }

  test("map_with_state after flatMapGroupsWithState with ProcessingTimeTimeout starts") {
    assert(startError(mapWithState(flatMapGroupsWithState(events,
      GroupStateTimeout.ProcessingTimeTimeout()).withColumn("event", current_timestamp())),
      "append").isEmpty)
  }

  test("dropDuplicates over an event-time column after event-time timers is refused") {
    // Spark holds a dropDuplicates to the limit only when one of its columns has a watermark.
    val deduplicated = mapWithState(events, eventTime = true)
      .withWatermark("t", "1 second").dropDuplicates("word", "t")
    assertRefused(deduplicated, "append",
      "is followed by dropDuplicates over an event-time column")
    val overWords = mapWithState(events, eventTime = true).dropDuplicates("word")
    assert(startError(overWords, "append").isEmpty)
  }

  test("the limit only warns with the correctness check off, and is off with Spark's checks") {
    val counted = mapWithState(events, eventTime = true).groupBy("word").count()
    assert(startError(counted, "update").exists(_.contains(GlobalWatermarkLimit.SparkMessage)))
    assert(startError(counted, "update", Map(CorrectnessCheck -> "false")).isEmpty)
    assert(startError(counted, "update",
      Map("spark.sql.streaming.unsupportedOperationCheck" -> "false")).isEmpty)
  }

  test("an aggregation before it in update mode is refused with the correctness check off") {
    val reread = mapWithState(events.groupBy("word").agg(max("event").as("event")))
    val message = startError(reread, "update", Map(CorrectnessCheck -> "false"))
    assert(message.exists(_.contains(
      "map_with_state reads the rows of a streaming aggregation in outputMode('update')")),
      message)
    assert(message.exists(_.contains("flatMapGroupsWithState in update mode is not supported " +
      "with aggregation")), message)
  }
}
