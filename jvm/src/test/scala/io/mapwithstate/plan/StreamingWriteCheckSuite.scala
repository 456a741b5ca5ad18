package io.mapwithstate.plan

import io.mapwithstate.{LocalSpark, MapWithState, MapWithStateException, StateSpec, TempDirs}
import io.mapwithstate.execution.MapWithStateStreamExec
import io.mapwithstate.functions._
import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.execution.streaming.runtime.{MemoryStream, StreamingQueryWrapper}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming.{GroupState, GroupStateTimeout, OutputMode}
import org.scalatest.funsuite.AnyFunSuite

/**
 * What a streaming query's start refuses around a map_with_state beside Spark's own stateful
 * operators, which only the Scala API builds in one query (Python has no flatMapGroupsWithState):
 * Spark's global-watermark limit (UnsupportedOperationsSuite's "multiple stateful ops" cases)
 * with map_with_state on either side, and the switches that turn it off; and several
 * map_with_state in one query (its "multiple flatMapGroupsWithStates" cases): numbered each
 * with its own state operator id, allowed in append mode only.
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

  /** Spark's flatMapGroupsWithState over `df`'s words, counting each batch's rows. */
  private def flatMapGroupsWithState(df: DataFrame, timeout: GroupStateTimeout,
      mode: OutputMode = OutputMode.Append()): DataFrame = {
    val counts = (word: String, rows: Iterator[Row], _: GroupState[java.lang.Long]) =>
      Iterator((word, rows.size.toLong))
    df.groupByKey((r: Row) => r.getString(0))(Encoders.STRING)
      .flatMapGroupsWithState(mode, timeout)(counts)(
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

  /** A running count per `value`, emitting (word, n). */
  private val valueCount = StateSpec.function("n BIGINT",
    update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
    emit = struct(col("value").as("word"), newState("n").as("n")))

  /** The running count of the words, then a running count of the (word, n) rows per n. */
  private def chained(input: MemoryStream[String]): DataFrame = {
    val first = MapWithState.mapWithState(input.toDF(), Seq(col("value")), valueCount)
    MapWithState.mapWithState(first.select(col("n").cast("string").as("value")),
      Seq(col("value")), valueCount)
  }

  test("two chained map_with_state run in append mode, each on its own state operator id") {
    withDir { dir =>
      val input = MemoryStream[String](Encoders.STRING, spark.sqlContext)
      val query = chained(input).writeStream.format("memory").queryName("chained")
        .outputMode("append").option("checkpointLocation", dir.getPath).start()
      try {
        input.addData("a", "b", "a")
        query.processAllAvailable()
        input.addData("a", "c")
        query.processAllAvailable()
        // Counts 1, 2 (a), 1 (b); then 3 (a), 1 (c): n "1" is seen three times, "2" and "3"
        // once each, in emission order.
        val rows = spark.table("chained").collect().map(r => (r.getString(0), r.getLong(1)))
        assert(rows.sorted.toSeq == Seq(("1", 1L), ("1", 2L), ("1", 3L), ("2", 1L), ("3", 1L)))
        val execution = query.asInstanceOf[StreamingQueryWrapper].streamingQuery.lastExecution
        val byId = execution.executedPlan.collect {
          case op: MapWithStateStreamExec => op.stateInfo.get.operatorId -> op
        }.toMap
        assert(byId.keySet == Set(1000L, 1001L))
        // The one nearest the source is the first: it keeps the id a lone map_with_state has.
        assert(byId(1001L).child.exists(_ eq byId(1000L)))
        Seq(1000, 1001).foreach { id =>
          assert(new java.io.File(dir, s"state/$id/0/_metadata/schema").isFile, id)
        }
        val progress = query.lastProgress.stateOperators
        assert(progress.length == 2 && progress.map(_.numRowsTotal).sorted.toSeq == Seq(3L, 3L))
      } finally query.stop()
    }
  }

  test("several map_with_state in update or complete mode are refused, with Spark's words") {
    val twice = MemoryStream[String](Encoders.STRING, spark.sqlContext)
    val message = startError(chained(twice), "update")
    assert(message.exists(_.contains("this one has 2 (map_with_state, map_with_state) in " +
          "outputMode('update')")), message)
    assert(
      message.exists(_.contains("Multiple flatMapGroupsWithStates are not supported when " +
          "they are not all in append mode or the output mode is not append")), message)
    val counted = chained(twice).groupBy("word").count()
    assert(startError(counted, "complete").exists(_.contains(
          "this one has 2 (map_with_state, map_with_state) in outputMode('complete')")))
    // Spark's switch for its own checks lets them run, as it lets its own operators.
    assert(startError(chained(twice), "update",
        Map("spark.sql.streaming.unsupportedOperationCheck" -> "false")).isEmpty)
  }

  test("map_with_state after map_with_state with event-time timers is refused in append mode") {
    // The chain's one global watermark: the first one's timers emit rows older than it.
    assertRefused(mapWithState(mapWithState(events, eventTime = true)
          .select(col("word"), col("t").as("event"))), "append",
      "map_with_state with event-time timers (timeout_domain('event_time')) is followed by " +
        "map_with_state")
  }

  test("a flatMapGroupsWithState of Spark's counts among them") {
    val input = MemoryStream[String](Encoders.STRING, spark.sqlContext)
    val counted = MapWithState.mapWithState(input.toDF(), Seq(col("value")), valueCount)
      .select(col("word"))
    def sparks(mode: OutputMode) =
      flatMapGroupsWithState(counted, GroupStateTimeout.NoTimeout(), mode)
    assert(startError(sparks(OutputMode.Append()), "append").isEmpty)
    // Spark's own check passes it (its one operator is in the query's mode); ours does not.
    val message = startError(sparks(OutputMode.Update()), "update")
    assert(message.exists(_.contains(
          "this one has 2 (flatMapGroupsWithState, map_with_state) in outputMode('update')")),
      message)
  }
}
