package io.mapwithstate

import scala.annotation.varargs
import scala.jdk.CollectionConverters._

import io.mapwithstate.plan.{MapWithStateBuilder, MapWithStateRequest, OutputKind, StateSpecRequest}
import org.apache.spark.sql.{Column, DataFrame, Dataset, Encoders, Row}
import org.apache.spark.sql.catalyst.analysis.UnresolvedEventTimeWatermark
import org.apache.spark.sql.catalyst.expressions.{Expression, SortOrder}
import org.apache.spark.sql.catalyst.plans.logical.{EventTimeWatermark, LogicalPlan}
import org.apache.spark.sql.classic
import org.apache.spark.unsafe.types.CalendarInterval

/**
 * Spark's `mapWithState` for DataFrames, from Scala or Java: each key's records go, in order,
 * through a [[StateSpec]]'s state function on the executors, and the result is what `emit`
 * produces (`output = "emitted"`) or, after each batch, every key's state
 * (`output = "snapshots"`: `batch_time`, the key columns and the state's fields), or, for batch
 * input, every key's state after the last batch as [[StateReader.readState]] reads it
 * (`output = "final_state"`: the key columns, the state's fields, `last_updated`, `timeout_at`;
 * which `StateSpec.initialState(df, timeoutAt, lastUpdated)` takes back).
 * {{{
 *   val counts = MapWithState.mapWithState(words, Seq(col("word")), spec)
 *   val states = MapWithState.mapWithState(events, Seq(col("user")), spec,
 *     batchTime = col("ts"), batchInterval = "10 seconds", output = "snapshots")
 * }}}
 * It needs a classic session with `spark.sql.extensions=io.mapwithstate.MapWithStateExtensions`
 * (the planner for the plan it returns). The Spark Connect plugin and the Python client's classic
 * path both come through [[plan]], so every door builds and checks the same plan.
 */
object MapWithState {

  /**
   * The mapWithState of `df` (batch or streaming) by `keys` (an expression key needs an alias).
   *
   * @param values        the value columns the state function sees; default every non-key column
   * @param batchTime     batch input only: a TIMESTAMP column; the input is replayed as batches in
   *                      ascending batch time (null: the whole input is one batch)
   * @param batchInterval with `batchTime`: every step of this duration (`"10 seconds"`) is a
   *                      batch, empty ones included, so timeouts fire as they would live
   * @param orderBy       the order of a key's records within a batch (ascending unless the
   *                      Column is a sort order, `col("seq").desc`)
   * @param output        `"emitted"`, `"snapshots"` or (batch input) `"final_state"` or
   *                      `"final_watermark"` (one row: the event-time watermark after the last
   *                      batch, which `StateSpec.initialState(..., watermark)` resumes)
   * @param until         with `batchTime`: the replay goes on after its last record up to this
   *                      time (a TIMESTAMP or a string literal, `lit("2026-01-01 10:00:00")`),
   *                      with empty batches every `batchInterval` (or one batch at `until`), so
   *                      timeouts and timers due by then fire; see the README's replays
   * @param includeTimerOnlyKeys with `"final_state"`: also the keys holding only a timer (null
   *                      state fields), and a `has_state` column, false for them
   */
  def mapWithState(
      df: DataFrame,
      keys: Seq[Column],
      spec: StateSpec,
      values: Seq[Column] = Nil,
      batchTime: Column = null,
      batchInterval: String = null,
      orderBy: Seq[Column] = Nil,
      output: String = "emitted",
      until: Column = null,
      includeTimerOnlyKeys: Boolean = false): DataFrame =
    run(df, keys, spec, values, batchTime, batchInterval, orderBy, output, until,
      includeTimerOnlyKeys, groups = false)

  /**
   * Spark's `mapGroupsWithState` / `flatMapGroupsWithState` over `df`: the spec is called once
   * per key per batch, and its Columns may use aggregates over the key's records of the batch
   * (`count(lit(1))`, `sum(col("v"))`, any Spark aggregate); `emit` may be an array of structs
   * (many rows per call). Arguments as [[mapWithState]]'s, without values: the whole group is
   * in scope; `orderBy` is the order in which order-sensitive aggregates (`collect_list`,
   * `first`, `last`) read a key's records of a batch.
   */
  def mapGroupsWithState(
      df: DataFrame,
      keys: Seq[Column],
      spec: StateSpec,
      batchTime: Column = null,
      batchInterval: String = null,
      output: String = "emitted",
      orderBy: Seq[Column] = Nil,
      until: Column = null,
      includeTimerOnlyKeys: Boolean = false): DataFrame =
    run(df, keys, spec, Nil, batchTime, batchInterval, orderBy, output, until,
      includeTimerOnlyKeys, groups = true)

  /** Java: [[mapGroupsWithState]] with every argument (null or an empty list where not wanted). */
  def mapGroupsWithState(
      df: DataFrame,
      keys: java.util.List[Column],
      spec: StateSpec,
      batchTime: Column,
      batchInterval: String,
      output: String,
      orderBy: java.util.List[Column]): DataFrame =
    mapGroupsWithState(df, javaList(keys, "keys"), spec, batchTime, batchInterval,
      Option(output).getOrElse("emitted"), javaList(orderBy, "orderBy"))

  private def run(
      df: DataFrame,
      keys: Seq[Column],
      spec: StateSpec,
      values: Seq[Column],
      batchTime: Column,
      batchInterval: String,
      orderBy: Seq[Column],
      output: String,
      until: Column,
      includeTimerOnlyKeys: Boolean,
      groups: Boolean): DataFrame = {
    val input = classicDataset(df, "df")
    val session = input.sparkSession
    if (spec == null) throw MapWithStateException(ErrorCondition.InvalidArgument,
      "spec: a StateSpec is needed, got null")
    def expressions(columns: Seq[Column], what: String): Seq[Expression] = {
      if (columns == null) throw MapWithStateException(ErrorCondition.InvalidArgument,
        s"$what: a list of Columns is needed, got null")
      columns.zipWithIndex.map { case (c, i) =>
        if (c == null) throw MapWithStateException(ErrorCondition.InvalidArgument,
          s"$what[$i] is null; a Column is needed")
        session.expression(c)
      }
    }
    val request = MapWithStateRequest(
      input = input.queryExecution.logical,
      keys = expressions(keys, "keys"),
      values = expressions(values, "values"),
      spec = StateSpecRequest(
        stateSchema = spec.stateSchema,
        update = spec.update.map(session.expression),
        remove = spec.remove.map(session.expression),
        emit = spec.emit.map(session.expression),
        initialState = spec.initialStateData.map(d =>
          classicDataset(d, "initialState").queryExecution.logical),
        numPartitions = spec.numPartitionsSetting,
        timeout = spec.timeoutSetting,
        checkpointInterval = spec.checkpointIntervalSetting,
        timeoutAt = spec.timeoutAt.map(session.expression),
        timeoutDomain = spec.timeoutDomainSetting,
        initialStateTimeoutAt = spec.initialStateTimeoutAt,
        backend = spec.backendSetting,
        initialStateLastUpdated = spec.initialStateLastUpdated,
        migrate = spec.migration.map(session.expression),
        initialStateHasState = spec.initialStateHasState,
        initialStateWatermark = spec.initialStateWatermark.map(session.expression)),
      batchTime = Option(batchTime).map(session.expression),
      batchInterval = Option(batchInterval),
      orderBy = expressions(orderBy, "orderBy").map {
        case o: SortOrder => o
        case e => SortOrder(e, org.apache.spark.sql.catalyst.expressions.Ascending)
      },
      outputKind = outputKind(output, includeTimerOnlyKeys),
      watermark = watermarkOf(input.queryExecution.logical),
      groups = groups,
      until = Option(until).map(session.expression))
    // As Dataset.ofRows (private to Spark) does: the plan is analyzed as the Dataset is made.
    val built = plan(session, request)
    new classic.Dataset[Row](session, built, Encoders.row(built.schema))
  }

  /**
   * The input's `withWatermark(column, delay)`, as made (the first found walking down the plan):
   * a batch plan's analysis drops the watermark, so the plan as written is where a batch replay
   * learns it from, as the Connect plugin learns it from the relation as sent.
   */
  private def watermarkOf(plan: LogicalPlan): Option[(String, String)] = plan.collectFirst {
    case w: UnresolvedEventTimeWatermark => (w.eventTimeColExpr.name, intervalText(w.delay))
    case w: EventTimeWatermark => (w.eventTime.name, intervalText(w.delay))
  }

  private def intervalText(delay: CalendarInterval): String =
    s"${delay.months} months ${delay.days} days ${delay.microseconds} microseconds"

  /** Java: the emitted records of `df` by `keys`, every non-key column a value column. */
  @varargs
  def mapWithState(df: DataFrame, spec: StateSpec, keys: Column*): DataFrame =
    mapWithState(df, keys, spec)

  /** Java, with every argument of the Scala form (null or an empty list where not wanted). */
  def mapWithState(
      df: DataFrame,
      keys: java.util.List[Column],
      spec: StateSpec,
      values: java.util.List[Column],
      batchTime: Column,
      batchInterval: String,
      orderBy: java.util.List[Column],
      output: String): DataFrame =
    mapWithState(df, javaList(keys, "keys"), spec, javaList(values, "values"), batchTime,
      batchInterval, javaList(orderBy, "orderBy"), output)

  /**
   * The resolved, checked mapWithState plan of a request: the one function every door goes
   * through (this API, the Spark Connect plugin), so that they cannot drift apart.
   */
  def plan(session: classic.SparkSession, request: MapWithStateRequest): LogicalPlan =
    new MapWithStateBuilder(session).build(request)

  private def javaList(columns: java.util.List[Column], what: String): Seq[Column] =
    if (columns == null) Nil else columns.asScala.toSeq

  private def outputKind(output: String, includeTimerOnlyKeys: Boolean): OutputKind = {
    val kind = output match {
      case "emitted" => OutputKind.Emitted
      case "snapshots" => OutputKind.Snapshots
      case "final_state" => OutputKind.FinalState(includeTimerOnlyKeys)
      case "final_watermark" => OutputKind.FinalWatermark
      case other => throw MapWithStateException(ErrorCondition.InvalidArgument,
          "output must be 'emitted', 'snapshots', 'final_state' or 'final_watermark', got " +
            (if (other == null) "null" else s"'$other'"))
    }
    OutputKind.checkTimerOnlyKeys(kind, includeTimerOnlyKeys)
    kind
  }

  /** The plan is Catalyst, so the input must be a classic (in-process) Dataset. */
  private def classicDataset(df: Dataset[Row], what: String): classic.Dataset[Row] = df match {
    case d: classic.Dataset[Row @unchecked] => d
    case null => throw MapWithStateException(ErrorCondition.InvalidArgument,
        s"$what: a DataFrame is needed, got null")
    case other => throw MapWithStateException(ErrorCondition.InvalidArgument,
        s"$what must be a DataFrame of a classic SparkSession, got ${other.getClass.getName} (a " +
          "Spark Connect client reaches mapWithState through the Connect plugin instead)")
  }
}
