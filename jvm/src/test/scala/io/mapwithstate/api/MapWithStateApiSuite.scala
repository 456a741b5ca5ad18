package io.mapwithstate.api

import java.sql.Timestamp

import io.mapwithstate.{MapWithState, MapWithStateException, StateSpec}
import io.mapwithstate.functions._
import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.functions._
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/** The Scala API on a real local classic session, as a Scala or Java application uses it. */
class MapWithStateApiSuite extends AnyFunSuite with BeforeAndAfterAll {

  private lazy val spark: SparkSession = SparkSession.builder()
    .master("local[2]")
    .appName("MapWithStateApiSuite")
    .config("spark.sql.extensions", "io.mapwithstate.MapWithStateExtensions")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.ui.enabled", "false")
    .getOrCreate()

  override def afterAll(): Unit = spark.stop()

  private def words = spark.createDataFrame(Seq(("a", 1), ("b", 2), ("a", 3)))
    .toDF("word", "seq")

  private val runningCount = StateSpec.function("n BIGINT",
    update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
    emit = struct(col("word"), newState("n").as("n")))

  test("running count: each record emits its key's count so far") {
    val result = MapWithState.mapWithState(words, Seq(col("word")), runningCount,
      values = Seq(col("seq")), orderBy = Seq(col("seq")))
    assert(result.columns.toSeq == Seq("word", "n"))
    assert(result.collect().map(r => (r.getString(0), r.getLong(1))).sorted.toSeq ==
      Seq(("a", 1L), ("a", 2L), ("b", 1L)))
  }

  test("the Java form (varargs keys) gives the same rows") {
    val result = MapWithState.mapWithState(words, runningCount, col("word"))
    assert(result.collect().map(r => (r.getString(0), r.getLong(1))).sorted.toSeq ==
      Seq(("a", 1L), ("a", 2L), ("b", 1L)))
  }

  test("snapshots hold every key's state after each batch, with initial state") {
    val initial = spark.createDataFrame(Seq(("a", 10L), ("z", 5L))).toDF("word", "n")
    val result = MapWithState.mapWithState(words, Seq(col("word")),
      runningCount.initialState(initial), output = "snapshots")
    assert(result.columns.toSeq == Seq("batch_time", "word", "n"))
    assert(result.collect().map(r => (r.getString(1), r.getLong(2))).sorted.toSeq ==
      Seq(("a", 12L), ("b", 1L), ("z", 5L)))
  }

  test("a replay with a timeout: idle keys time out on the first checkpoint batch") {
    def t(s: Int) = new Timestamp(1767225600000L + s * 1000L)
    // a and b in the first batch, then only a, one record a second for 12 seconds
    val rows = Seq(("a", t(0)), ("b", t(0))) ++ (1 to 11).map(s => ("a", t(s)))
    val events = spark.createDataFrame(rows).toDF("word", "ts")
    val spec = StateSpec.function("n INT",
      update = when(col("ts").isNotNull, struct(lit(1).as("n"))),
      emit = when(isTimingOut(), struct(col("word"), batchTime().as("t"))))
      .timeout(java.time.Duration.ofSeconds(3))
    val timedOut = MapWithState.mapWithState(events, Seq(col("word")), spec,
      batchTime = col("ts"), batchInterval = "1 second").collect()
    // the 10th batch (9 s after the first) is the first full scan of the state
    assert(timedOut.toSeq == Seq(Row("b", t(9))))
  }

  test("errors name the argument: a missing key column, a bad output, a bad state schema") {
    val missingKey = intercept[MapWithStateException] {
      MapWithState.mapWithState(words, Seq(col("nope")), runningCount)
    }
    assert(missingKey.getMessage.startsWith("[MAPWITHSTATE_ANALYSIS_FAILED] key:"),
      missingKey.getMessage)
    assert(missingKey.getCondition == "MAPWITHSTATE_ANALYSIS_FAILED")
    assert(missingKey.getMessage.contains("nope"))
    val badOutput = intercept[MapWithStateException] {
      MapWithState.mapWithState(words, Seq(col("word")), runningCount, output = "all")
    }
    assert(badOutput.getMessage == "[MAPWITHSTATE_INVALID_ARGUMENT] output must be 'emitted', " +
      "'snapshots', 'final_state' or 'final_watermark', got 'all'")
    val badSchema = intercept[MapWithStateException] {
      MapWithState.mapWithState(words, Seq(col("word")),
        StateSpec.function("n BIGINTT", update = runningCount.update.get))
    }
    assert(badSchema.getMessage.contains("state_schema: 'n BIGINTT' is not a valid schema"))
  }
}
