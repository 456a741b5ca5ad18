package io.mapwithstate

import java.time.{Duration => JDuration}

import org.apache.spark.sql.{Column, DataFrame}
import org.apache.spark.sql.types.StructType

/**
 * The state function of a mapWithState, as in Spark's `StateSpec.function`: what a key's state
 * is (`stateSchema`), and three Columns evaluated per record — `update` (a struct with the
 * state's fields: the key's new state; null keeps it), `remove` (a boolean; wins over update)
 * and `emit` (a struct whose fields are the output columns; null emits nothing). The Columns see
 * the key and value columns by name and the state through [[io.mapwithstate.functions]].
 *
 * Immutable: each setting returns a new spec, as Spark's `StateSpec` builder does. Absent
 * Columns may be given as `null` (for Java); Scala callers name the ones they pass:
 * {{{
 *   import org.apache.spark.sql.functions._
 *   import io.mapwithstate.functions._
 *   val spec = StateSpec.function("n BIGINT",
 *       update = struct((coalesce(state("n"), lit(0)) + 1).as("n")),
 *       emit = struct(col("word"), newState("n").as("n")))
 *     .timeout("30 minutes")
 * }}}
 * The spec is plain data; [[MapWithState.mapWithState]] checks it against the input, so a bad
 * schema or Column is reported there, naming the argument.
 */
final class StateSpec private (
    val stateSchema: Either[String, StructType],
    val update: Option[Column],
    val remove: Option[Column],
    val emit: Option[Column],
    val initialStateData: Option[DataFrame],
    val numPartitionsSetting: Option[Int],
    val timeoutSetting: Option[String],
    val checkpointIntervalSetting: Option[Int],
    val timeoutAt: Option[Column],
    val timeoutDomainSetting: Option[String],
    val initialStateTimeoutAt: Option[String],
    val backendSetting: Option[String] = None,
    val initialStateLastUpdated: Option[String] = None,
    val migration: Option[Column] = None,
    val initialStateHasState: Option[String] = None,
    val initialStateWatermark: Option[Column] = None) extends Serializable {

  private def copy(
      initialStateData: Option[DataFrame] = initialStateData,
      numPartitionsSetting: Option[Int] = numPartitionsSetting,
      timeoutSetting: Option[String] = timeoutSetting,
      checkpointIntervalSetting: Option[Int] = checkpointIntervalSetting,
      timeoutDomainSetting: Option[String] = timeoutDomainSetting,
      initialStateTimeoutAt: Option[String] = initialStateTimeoutAt,
      backendSetting: Option[String] = backendSetting,
      initialStateLastUpdated: Option[String] = initialStateLastUpdated,
      migration: Option[Column] = migration,
      initialStateHasState: Option[String] = initialStateHasState,
      initialStateWatermark: Option[Column] = initialStateWatermark): StateSpec =
    new StateSpec(stateSchema, update, remove, emit, initialStateData, numPartitionsSetting,
      timeoutSetting, checkpointIntervalSetting, timeoutAt, timeoutDomainSetting,
      initialStateTimeoutAt, backendSetting, initialStateLastUpdated, migration,
      initialStateHasState, initialStateWatermark)

  /**
   * Loads `df` — the key columns and the state's fields, one row per key — before the first
   * batch (of a stream: its first batch only; a restarted query continues from its checkpoint).
   * mapWithState only seeds the state with it; mapGroupsWithState also calls each of its keys
   * in that first batch, with no records if it has none there, as flatMapGroupsWithState does.
   */
  def initialState(df: DataFrame): StateSpec = {
    require(df != null, "initialState: the DataFrame is null")
    copy(initialStateData = Some(df), initialStateTimeoutAt = None, initialStateLastUpdated = None,
      initialStateHasState = None, initialStateWatermark = None)
  }

  /** [[initialState]] whose TIMESTAMP column `timeoutAt` gives each key's starting timer. */
  def initialState(df: DataFrame, timeoutAt: String): StateSpec = {
    require(df != null, "initialState: the DataFrame is null")
    copy(initialStateData = Some(df), initialStateTimeoutAt = Option(timeoutAt),
      initialStateLastUpdated = None, initialStateHasState = None, initialStateWatermark = None)
  }

  /**
   * [[initialState]] resuming state read back — [[StateReader.readState]]'s rows, or a
   * replay's `output = "final_state"` — so that a query continues where the run that left it
   * stopped: `timeoutAt` (null: none) names each key's timer, `lastUpdated` its last update
   * time (TIMESTAMP; a null value: the first batch's time). A key's idle clock then runs from
   * its last update, and mapGroupsWithState does not call the keys in the first batch (the
   * earlier run called them). read_state's `partition` column, and its `timeout_at` when not
   * named, are ignored.
   * {{{
   *   val history = MapWithState.mapWithState(old, Seq(col("user")), spec,
   *     batchTime = col("ts"), output = "final_state")
   *   val live = MapWithState.mapWithState(stream, Seq(col("user")),
   *     spec.initialState(history, null, "last_updated"))
   * }}}
   */
  def initialState(df: DataFrame, timeoutAt: String, lastUpdated: String): StateSpec =
    initialState(df, timeoutAt, lastUpdated, null, null)

  /**
   * [[initialState]] resuming state read back, as the three-argument form, and also (each
   * null when not wanted): `hasState`, the BOOLEAN column saying which keys have a state
   * (`has_state` of [[StateReader.readState]] or of `output = "final_state"`, asked for with
   * `includeTimerOnlyKeys`; false resumes the key holding only its timer), and `watermark`, a
   * TIMESTAMP Column (a literal) the event-time watermark starts from — a replay's
   * `output = "final_watermark"` — below which no batch's watermark goes, so late rows and
   * event-time timers go on as one run over the history and the live data would.
   * {{{
   *   val wm = MapWithState.mapWithState(old, Seq(col("user")), spec, batchTime = col("ts"),
   *     output = "final_watermark").head().getTimestamp(0)
   *   val live = MapWithState.mapWithState(stream, Seq(col("user")),
   *     spec.initialState(history, "timeout_at", "last_updated", "has_state", lit(wm)))
   * }}}
   */
  def initialState(df: DataFrame, timeoutAt: String, lastUpdated: String, hasState: String,
      watermark: Column): StateSpec = {
    require(df != null, "initialState: the DataFrame is null")
    require(lastUpdated != null, "initialState: the lastUpdated column name is null")
    copy(initialStateData = Some(df), initialStateTimeoutAt = Option(timeoutAt),
      initialStateLastUpdated = Some(lastUpdated), initialStateHasState = Option(hasState),
      initialStateWatermark = Option(watermark))
  }

  /**
   * What `timeoutAt` timers are compared with: `"processing_time"` (the default: the batch
   * time, as `GroupStateTimeout.ProcessingTimeTimeout`) or `"event_time"` (the input's
   * watermark from `withWatermark`, as `EventTimeTimeout`).
   */
  def timeoutDomain(domain: String): StateSpec = {
    require(domain != null, "timeoutDomain: the domain is null")
    copy(timeoutDomainSetting = Some(domain))
  }

  /**
   * How a streaming query restarted from its checkpoint with a changed state schema turns each
   * key's old state into the new: `update`, a struct Column with the new state's fields over
   * the key columns and the OLD state (`functions.state("f")` names a field of the schema the
   * checkpoint holds); null removes the key. It replaces the automatic conversion of a
   * compatible change, so renames, splits, recomputed fields and any type change work. Applied
   * once per key, in the first micro-batch after the restart, timers and idle clocks kept; a
   * restart whose schema is unchanged ignores it (the state is already in that schema).
   * {{{
   *   StateSpec.function("total BIGINT", update = ...)
   *     .migrate(struct(state("count").as("total")))   // the state was "count BIGINT"
   * }}}
   */
  def migrate(update: Column): StateSpec = {
    require(update != null, "migrate: the Column is null")
    copy(migration = Some(update))
  }

  /** Spreads the state over `n` partitions (default: `spark.sql.shuffle.partitions`). */
  def numPartitions(n: Int): StateSpec = copy(numPartitionsSetting = Some(n))

  /**
   * Removes a key's state when no record has come for it for `duration` (`"30 seconds"`).
   * Timed-out keys are found on checkpoint batches (see [[checkpointInterval]]) and get one
   * last call with `isTimingOut` true.
   */
  def timeout(duration: String): StateSpec = {
    require(duration != null, "timeout: the duration is null")
    copy(timeoutSetting = Some(duration))
  }

  /** [[timeout]] as a `java.time.Duration`. */
  def timeout(duration: JDuration): StateSpec = {
    require(duration != null, "timeout: the duration is null")
    // Microseconds: the finest unit Spark's interval strings take, so nothing is rounded away.
    timeout(s"${duration.toNanos / 1000} microseconds")
  }

  /** Scans the state for timed-out keys on every `n`-th batch (default 10, as in Spark). */
  def checkpointInterval(n: Int): StateSpec = copy(checkpointIntervalSetting = Some(n))

  /**
   * Where each partition's state is kept: `"memory"` (the default: on the heap, fastest, held
   * to `spark.mapwithstate.stateStore.maxPartitionBytes`) or `"rocksdb"` (Spark's RocksDB
   * state store on the executors' local disk, for state larger than memory). A streaming query
   * keeps the backend its checkpoint was started with.
   */
  def backend(name: String): StateSpec = {
    require(name != null, "backend: the name is null")
    copy(backendSetting = Some(name))
  }

  override def toString: String =
    s"StateSpec(${stateSchema.fold(identity, _.toDDL)}, update=${update.isDefined}, " +
      s"remove=${remove.isDefined}, emit=${emit.isDefined})"
}

/** Builds a [[StateSpec]]; the Java-callable forms take `null` for an absent Column. */
object StateSpec {

  /**
   * A state function over a state given as a DDL string such as `"n BIGINT, last STRING"`.
   * `timeoutAt`, a TIMESTAMP Column evaluated on every call after `update`, sets the key's timer
   * (null clears it), as `GroupState.setTimeoutTimestamp` does; see [[StateSpec.timeoutDomain]].
   * A timer already due when set (not after the batch time; in event time, not after the epoch
   * or before the watermark) fails the query, as GroupState refuses it.
   */
  def function(
      stateSchema: String,
      update: Column = null,
      remove: Column = null,
      emit: Column = null,
      timeoutAt: Column = null): StateSpec = {
    require(stateSchema != null, "stateSchema: a DDL string is needed, got null")
    of(Left(stateSchema), update, remove, emit, timeoutAt)
  }

  /** A state function over a state of this struct type. */
  def function(stateSchema: StructType, update: Column, remove: Column, emit: Column)
      : StateSpec = function(stateSchema, update, remove, emit, null)

  /** A state function over a state of this struct type, with a timer. */
  def function(stateSchema: StructType, update: Column, remove: Column, emit: Column,
      timeoutAt: Column): StateSpec = {
    require(stateSchema != null, "stateSchema: a StructType is needed, got null")
    of(Right(stateSchema), update, remove, emit, timeoutAt)
  }

  private def of(schema: Either[String, StructType], update: Column, remove: Column,
      emit: Column, timeoutAt: Column): StateSpec =
    new StateSpec(schema, Option(update), Option(remove), Option(emit), None, None, None, None,
      Option(timeoutAt), None, None)
}
