package io.mapwithstate.plan

import scala.util.control.NonFatal

import io.mapwithstate.{ErrorCondition, MapWithStateConf, MapWithStateException}
import io.mapwithstate.state.{KeyStateColumns, StateBackend}
import org.apache.spark.sql.catalyst.analysis.UnresolvedAlias
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  Attribute,
  AttributeReference,
  AttributeSet,
  Cast,
  Ceil,
  Coalesce,
  Divide,
  Expression,
  Literal,
  MicrosToTimestamp,
  Multiply,
  NamedExpression,
  SortOrder,
  UnixMicros
}
import org.apache.spark.sql.catalyst.plans.logical.{EventTimeWatermark, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.catalyst.util.IntervalUtils
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.{
  BooleanType,
  DataType,
  DateType,
  DoubleType,
  StringType,
  StructField,
  StructType,
  TimestampNTZType,
  TimestampType
}

/**
 * Turns a [[MapWithStateRequest]] into a resolved [[MapWithState]] plan, checking everything a
 * caller can get wrong — columns, types, option values — before any data is read, and saying
 * in each error which argument is wrong and what was expected.
 *
 * [[build]] runs the steps in order: the request's limits ([[RequestLimits]]), the input, its
 * key and value columns, the batch-time and ordering columns (all projected into one child
 * plan), the state function and its kind, the options, the output attributes and the initial
 * state.
 */
class MapWithStateBuilder(session: SparkSession) {
  import MapWithStateBuilder._

  private val conf = session.sessionState.conf

  def build(request: MapWithStateRequest): MapWithState = {
    RequestLimits.check(request, conf)
    val input = checkedInput(request.input)
    val (keys, values) = keysAndValues(request, input)
    checkBatchArguments(request, input)
    val until = request.until.map(timestampMicros(_, input, "until"))
    val batchTime = request.batchTime.map(batchTimeColumn(_, input, request.batchIntervalMs))
    val (orderColumns, orderBy) = orderColumnsOf(request.orderBy, input)
    val spec = request.spec
    val watermark = watermarkOf(request.watermark, input)
    val domain = timerDomain(spec, watermark.isDefined, input.isStreaming)
    checkResumedArguments(request, watermark.isDefined)
    val resumedWatermark = spec.initialStateWatermark.map(
      timestampMicros(_, input, "initial_state's watermark"))
    val eventTimeColumn = watermark.map(_._1)

    // One child projects what the operator reads: the key and value columns, then the batch
    // time, then the ordering columns, then the event time (when the input has a watermark).
    val dataColumns = keys ++ values
    val child = analyze(
      Project(dataColumns ++ batchTime.toSeq ++ orderColumns ++ eventTimeColumn.toSeq, input),
      "input")
    val childAttrs = child.output
    val keyAttrs = childAttrs.take(keys.size)
    val valueAttrs = childAttrs.slice(keys.size, dataColumns.size)
    val batchTimeAttr = batchTime.map(_ => childAttrs(dataColumns.size))
    val orderByAttrs = orderBy.zip(childAttrs.drop(dataColumns.size + batchTime.size)).map {
      case (o, a) => o.copy(child = a)
    }

    val eventTimeAttr = eventTimeColumn.map(_ => childAttrs.last)
    val stateType = stateSchema(spec.stateSchema)
    val options = optionsOf(request, input).copy(
      timerDomain = domain,
      watermarkDelayMs = watermark.map(_._2),
      untilMicros = until,
      resumedWatermarkMicros = resumedWatermark,
      initialState =
        if (spec.initialStateLastUpdated.isDefined) InitialStateKind.Resumed
        else InitialStateKind.Seeded)
    val initialState = spec.initialState.map(initialStatePlan(_, keyAttrs, stateType,
        spec.initialStateTimeoutAt, spec.initialStateLastUpdated, spec.initialStateHasState))
    if (request.groups) {
      val (function, aggregates) = new GroupFunctionResolver(session).resolve(keyAttrs,
        valueAttrs, stateType, spec.update, spec.remove, spec.emit, spec.timeoutAt)
      val output = outputAttributes(request.outputKind, function, keyAttrs, stateType)
      // Only the columns the aggregates read go on to the aggregation, with the event time
      // (late rows are dropped by it before the aggregation, and it gives replays watermarks).
      val read = AttributeSet(aggregates.flatMap(_.references))
      val narrowed = withoutValuesExcept(read, child, valueAttrs, eventTimeAttr)
      val inputs = read.toSeq
      val kind = FunctionKind.PerGroup(GroupAggregates(aggregates.map(_.child), inputs),
        aggregates.map(_.toAttribute)).copy(orderBy = orderByAttrs)
      MapWithState(keyAttrs, kind, batchTimeAttr, function, options, output, narrowed,
        initialState, eventTimeAttr)
    } else {
      val resolved = new StateFunctionResolver(session).resolve(
        keyAttrs ++ valueAttrs, stateType, spec.update, spec.remove, spec.emit, spec.timeoutAt)
      val (function, readValues) = withoutUnreadValues(resolved, keyAttrs.size, valueAttrs)
      val output = outputAttributes(request.outputKind, function, keyAttrs, stateType)
      val narrowed = withoutValuesExcept(AttributeSet(readValues), child, valueAttrs, eventTimeAttr)
      MapWithState(keyAttrs, FunctionKind.PerRecord(readValues, orderByAttrs), batchTimeAttr,
        function, options, output, narrowed, initialState, eventTimeAttr)
    }
  }

  /**
   * `child` without the value columns that are not `kept`: they are then neither shuffled nor,
   * through Spark's column pruning, read from the source (in a running count, the whole record
   * but its key). The event-time column stays even when it is an unread value column too (the
   * default values are every non-key column): the operator reads it for late rows.
   */
  private def withoutValuesExcept(kept: AttributeSet, child: LogicalPlan,
      valueAttrs: Seq[Attribute], eventTime: Option[Attribute]): LogicalPlan = {
    val dropped = AttributeSet(valueAttrs.filterNot(a => kept.contains(a) || eventTime.contains(a)))
    if (dropped.isEmpty) child else Project(child.output.filterNot(dropped.contains), child)
  }

  /**
   * The function without the value columns none of its expressions reads, and the value
   * attributes it still reads (in order). Its data attributes are bound by position to the
   * operator's key and value columns, so both lose the same columns.
   */
  private def withoutUnreadValues(function: StateFunction, keyCount: Int,
      valueAttrs: Seq[Attribute]): (StateFunction, Seq[Attribute]) = {
    val read = AttributeSet(
      (function.update ++ function.remove ++ function.emit ++ function.timeoutAt)
        .flatMap(_.references))
    val (keyData, valueData) = function.dataAttributes.splitAt(keyCount)
    val kept = valueData.zip(valueAttrs).filter { case (data, _) => read.contains(data) }
    (function.copy(dataAttributes = keyData ++ kept.map(_._1)), kept.map(_._2))
  }

  /**
   * Timers: `timeout_at` with its domain, refused beside the idle `timeout` (two models of
   * expiry for one key would disagree on when its state goes). Over a stream the event-time
   * domain needs a watermark, which only `withWatermark` on the input gives; over a batch, as
   * with flatMapGroupsWithState on a Dataset, timers may be set without one (and then never
   * fire: no watermark passes them).
   */
  private def timerDomain(spec: StateSpecRequest, hasWatermark: Boolean, streaming: Boolean)
      : Option[TimerDomain] = {
    if (spec.timeout.isDefined && spec.timeoutAt.isDefined) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "timeout and timeout_at cannot be used together: timeout removes keys idle for a " +
          "fixed duration, timeout_at sets each key's timer; choose one")
    }
    val domain = spec.timeoutDomain.map { name =>
      TimerDomain.all.find(_.name == name).getOrElse {
        throw MapWithStateException(ErrorCondition.InvalidArgument,
          s"timeout_domain: '$name' is not a timeout domain; expected 'processing_time' or " +
            "'event_time'")
      }
    }.getOrElse(TimerDomain.ProcessingTime)
    if (domain == TimerDomain.EventTime && !hasWatermark && streaming) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "timeout_domain('event_time') needs an event-time watermark, but the input stream has " +
          "none: call withWatermark(column, delay) on the input first")
    }
    if (spec.initialStateTimeoutAt.isDefined && spec.timeoutAt.isEmpty) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "initial_state's timeout_at needs the StateSpec's timeout_at: without it keys have " +
          "no timers")
    }
    spec.timeoutAt.map(_ => domain)
  }

  /**
   * The input's event-time column and watermark delay (ms), from `withWatermark`. A stream's
   * analyzed plan marks the column with its delay; a batch plan's analysis drops the watermark
   * (Spark ignores it on batch data), so there it comes from the request (the relation as
   * sent), and the column is found by name among the input's columns.
   */
  private def watermarkOf(sent: Option[(String, String)], input: LogicalPlan)
      : Option[(Attribute, Long)] =
    input.output.find(_.metadata.contains(EventTimeWatermark.delayKey))
      .map(a => (a, a.metadata.getLong(EventTimeWatermark.delayKey)))
      .orElse {
        sent.flatMap { case (name, delay) =>
          val delayMs = EventTimeWatermark.getDelayMs(IntervalUtils.fromIntervalString(delay))
          input.output.find(a => conf.resolver(a.name, name) && a.dataType == TimestampType)
            .map(a => (a, delayMs))
        }
      }

  /** The analyzed input; none of its columns may take a name the state function reserves. */
  private def checkedInput(plan: LogicalPlan): LogicalPlan = {
    val input = analyze(plan, "input")
    input.output.find(_.name.startsWith(StateFunctionInput.ReservedPrefix)).foreach { a =>
      throw MapWithStateException(ErrorCondition.ReservedColumnName,
        s"input column '${a.name}' starts with '${StateFunctionInput.ReservedPrefix}', which is " +
          "reserved for the state function's own columns; rename it")
    }
    input
  }

  /** The key columns, and the value columns (every non-key column when none are named). */
  private def keysAndValues(request: MapWithStateRequest, input: LogicalPlan)
      : (Seq[NamedExpression], Seq[NamedExpression]) = {
    if (request.keys.isEmpty) throw MapWithStateException(ErrorCondition.InvalidArgument,
      "key: at least one key column is needed")
    if (request.groups && request.values.nonEmpty) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "map_groups_with_state takes no value columns: its state function sees all of a " +
          "key's records of the batch at once, through aggregates over any column")
    }
    val keys = project(request.keys.map(named), input, "key")
    val valueColumns =
      if (request.values.nonEmpty) request.values.map(named)
      else input.output.filterNot(a => keys.exists(k => conf.resolver(k.name, a.name)))
    val values = project(valueColumns, input, "value")
    (keys ++ values).groupBy(_.name.toLowerCase).collectFirst {
      case (_, dups) if dups.size > 1 =>
        throw MapWithStateException(ErrorCondition.DuplicateColumn,
          s"column '${dups.head.name}' is both a key and a value column (or named twice); the " +
            "state function refers to columns by name, so each must be named once")
    }
    (keys, values)
  }

  /** Arguments that only make sense for batch input, or only together. */
  private def checkBatchArguments(request: MapWithStateRequest, input: LogicalPlan): Unit = {
    if (input.isStreaming && (request.batchTime.isDefined || request.batchInterval.isDefined)) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "batch_time and batch_interval are for batch DataFrames: a streaming query's batches " +
          "are its micro-batches")
    }
    if (input.isStreaming && request.until.isDefined) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "until is for batch replays: a stream's timeline goes on as long as the query runs, and " +
          "its timeouts and timers fire in the micro-batches that come; stop the query instead")
    }
    val afterLastBatch = request.outputKind match {
      case _: OutputKind.FinalState => Some("final_state")
      case OutputKind.FinalWatermark => Some("final_watermark")
      case OutputKind.Emitted | OutputKind.Snapshots => None
    }
    for (output <- afterLastBatch if input.isStreaming) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        s"output='$output' is for batch DataFrames: a stream has no last batch; read a " +
          "running or stopped query's state with read_state(spark, checkpoint) instead")
    }
    request.spec.numPartitions.filter(n => input.isStreaming && n != conf.numShufflePartitions)
      .foreach { n =>
        throw MapWithStateException(ErrorCondition.ConflictingArguments,
          s"num_partitions($n) differs from spark.sql.shuffle.partitions " +
            s"(${conf.numShufflePartitions}): a streaming query keeps its state in " +
            "spark.sql.shuffle.partitions partitions, fixed in its checkpoint when it first " +
            "starts; set that instead")
      }
    if (request.batchInterval.isDefined && request.batchTime.isEmpty) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "batch_interval needs batch_time: the column that gives each " +
          "record's time")
    }
    if (request.until.isDefined && request.batchTime.isEmpty) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "until needs batch_time: without it the input is one batch, and there is no timeline " +
          "to continue")
    }
  }

  /**
   * The arguments of a resumed run and of what a replay hands it: the initial state's columns
   * and watermark need an initial state, `has_state` and the watermark belong to state read
   * back (`last_updated` named), and a watermark, resumed or a replay's final one, needs the
   * input's event-time watermark (`withWatermark`).
   */
  private def checkResumedArguments(request: MapWithStateRequest, hasWatermark: Boolean): Unit = {
    val spec = request.spec
    for ((column, what) <- spec.initialStateTimeoutAt.map((_, "timeout_at names a timer")) ++
        spec.initialStateLastUpdated.map((_, "last_updated names an update time")) ++
        spec.initialStateHasState.map((_, "has_state says which keys have a state"))
      if spec.initialState.isEmpty) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        s"initial_state's $what column ('$column'), but there is no initial_state")
    }
    if (spec.initialStateWatermark.isDefined && spec.initialState.isEmpty) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "initial_state's watermark is given, but there is no initial_state")
    }
    val resumedOnly = spec.initialStateHasState.map(c => s"has_state ('$c')") ++
      spec.initialStateWatermark.map(_ => "watermark")
    if (resumedOnly.nonEmpty && spec.initialStateLastUpdated.isEmpty) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        s"initial_state's ${resumedOnly.mkString(" and ")} resume state read back " +
          "(read_state's or output='final_state''s rows): name its last_updated column too " +
          "(last_updated='last_updated')")
    }
    if (spec.initialStateWatermark.isDefined && !hasWatermark) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "initial_state's watermark resumes an event-time watermark, but the input has none: " +
          "call withWatermark(column, delay) on the input first, with the replay's delay")
    }
    if (request.outputKind == OutputKind.FinalWatermark && !hasWatermark) {
      throw MapWithStateException(ErrorCondition.ConflictingArguments,
        "output='final_watermark' is the replay's event-time watermark after its last batch, " +
          "but the input has none: call withWatermark(column, delay) on the input first")
    }
  }

  /**
   * A constant timestamp argument (`what`: a replay's `until`, a resumed watermark) in micros:
   * a TIMESTAMP, or a string or DATE Spark casts to one (in the session's time zone),
   * evaluated once here.
   */
  private def timestampMicros(e: Expression, input: LogicalPlan, what: String): Long = {
    val Seq(raw) = project(Seq(Alias(e, "until")()), input, what)
    val value = raw match {
      case Alias(child, _) => child
      case other => other
    }
    if (!Seq(TimestampType, StringType, DateType).contains(value.dataType)) {
      throw MapWithStateException(ErrorCondition.TypeMismatch,
        s"$what must be a timestamp (a datetime, or a string such as '2026-01-01 10:00:00'), " +
          s"but ${e.sql} is ${value.dataType.sql}")
    }
    if (!value.foldable) {
      throw MapWithStateException(ErrorCondition.InvalidArgument,
        s"$what must be a constant timestamp, but ${e.sql} depends on the input's records; " +
          "give the time itself")
    }
    val Seq(cast) =
      project(Seq(Alias(Cast(value, TimestampType), "until")()), input, what)
    val micros =
      try cast.eval()
      catch {
        case NonFatal(error) =>
          throw new MapWithStateException(ErrorCondition.InvalidArgument,
            s"$what: ${e.sql} is not a timestamp (${error.getMessage})", error)
      }
    if (micros == null) throw MapWithStateException(ErrorCondition.InvalidArgument,
      s"$what: ${e.sql} is not a timestamp (it casts to null); expected e.g. " +
        "'2026-01-01 10:00:00'")
    micros.asInstanceOf[Long]
  }

  /**
   * The batch_time column, which must be a TIMESTAMP; with a batch interval, aligned to it as
   * a DStream's batch times are multiples of its batch interval: a record at t belongs to the
   * batch at the first multiple not before t (records arrive in (T - interval, T]).
   */
  private def batchTimeColumn(e: Expression, input: LogicalPlan, intervalMs: Option[Long])
      : NamedExpression = {
    val Seq(raw) = project(Seq(Alias(e, BatchTimeColumn)()), input, "batch_time")
    if (raw.dataType != TimestampType) {
      throw MapWithStateException(ErrorCondition.TypeMismatch,
        s"batch_time must be a TIMESTAMP column, but ${e.sql} is ${raw.dataType.sql}" +
          (if (raw.dataType == TimestampNTZType) " (cast it to TIMESTAMP)" else ""))
    }
    intervalMs match {
      case None => raw
      case Some(ms) =>
        val step = ms * 1000L
        val micros = Cast(UnixMicros(e), DoubleType)
        val batch = Multiply(Ceil(Divide(micros, Literal(step.toDouble))), Literal(step))
        val Seq(aligned) =
          project(Seq(Alias(MicrosToTimestamp(batch), BatchTimeColumn)()), input, "batch_time")
        aligned
    }
  }

  /** The order_by expressions as columns of the child, and the sort orders over them. */
  private def orderColumnsOf(orderBy: Seq[SortOrder], input: LogicalPlan)
      : (Seq[NamedExpression], Seq[SortOrder]) = {
    val columns = project(
      orderBy.zipWithIndex.map { case (o, i) => Alias(o.child, s"$OrderColumnPrefix$i")() },
      input, "order_by")
    (columns,
      orderBy.zip(columns).map { case (o, a) =>
        SortOrder(a.toAttribute, o.direction, o.nullOrdering, Seq.empty)
      })
  }

  private def optionsOf(request: MapWithStateRequest, input: LogicalPlan): MapWithStateOptions = {
    val spec = request.spec
    MapWithStateOptions(
      numPartitions = positive(spec.numPartitions.getOrElse(conf.numShufflePartitions),
        "num_partitions"),
      timeoutMs = spec.timeout.map(Durations.positiveMillis(_, "timeout")),
      checkpointInterval = positive(
        spec.checkpointInterval.getOrElse(MapWithStateOptions.DefaultCheckpointInterval),
        "checkpoint_interval"),
      batchIntervalMs = request.batchIntervalMs,
      outputKind = request.outputKind,
      backend = StateBackend.checkName(spec.backend.getOrElse(MapWithStateConf.backend(conf))),
      migrate = spec.migrate)
  }

  /**
   * The emitted columns; or batch_time, the keys and the state's fields; or the columns of the
   * state as read_state reads it back; or the final watermark's one column.
   */
  private def outputAttributes(
      kind: OutputKind,
      function: StateFunction,
      keys: Seq[Attribute],
      stateType: StructType): Seq[Attribute] = kind match {
    case OutputKind.Emitted =>
      if (function.emit.isEmpty) {
        throw MapWithStateException(ErrorCondition.ConflictingArguments,
          "output='emitted' needs an emit expression in the StateSpec (or use " +
            "output='snapshots')")
      }
      DataTypeUtils.toAttributes(function.emitType)
    case OutputKind.Snapshots =>
      AttributeReference("batch_time", TimestampType, nullable = false)() +:
        (keys.map(k => AttributeReference(k.name, k.dataType, k.nullable)()) ++
          DataTypeUtils.toAttributes(stateType))
    case OutputKind.FinalState(timerOnlyKeys) =>
      DataTypeUtils.toAttributes(StructType(KeyStateColumns.fields(
            keys.map(k => StructField(k.name, k.dataType, k.nullable)), stateType.fields.toSeq,
            timerOnlyKeys)))
    case OutputKind.FinalWatermark =>
      Seq(AttributeReference(OutputKind.WatermarkColumn, TimestampType, nullable = true)())
  }

  private def named(e: Expression): NamedExpression = e match {
    case n: NamedExpression => n
    case other => UnresolvedAlias(other)
  }

  /** Resolves `columns` over `input`; errors name the argument they came from. */
  private def project(columns: Seq[NamedExpression], input: LogicalPlan, what: String)
      : Seq[NamedExpression] = {
    if (columns.isEmpty) Nil
    else analyze(Project(columns, input), what) match {
      case Project(resolved, _) => resolved
      case other => throw new IllegalStateException(s"unexpected analyzed projection:\n$other")
    }
  }

  private def analyze(plan: LogicalPlan, what: String): LogicalPlan =
    Analysis.analyze(session, plan, what)

  private def positive(n: Int, what: String): Int = {
    if (n <= 0) throw MapWithStateException(ErrorCondition.InvalidArgument,
      s"$what must be a positive number, got $n")
    n
  }

  private def stateSchema(schema: Either[String, DataType]): StructType = {
    val parsed = schema match {
      case Left(ddl) =>
        try StructType.fromDDL(ddl)
        catch {
          case NonFatal(e) =>
            throw new MapWithStateException(ErrorCondition.InvalidStateSchema,
              s"state_schema: '$ddl' is not a valid schema; expected a DDL string such as " +
                s"'count BIGINT, last STRING' (${e.getMessage})", e)
        }
      case Right(s: StructType) => s
      case Right(other) =>
        throw MapWithStateException(ErrorCondition.InvalidStateSchema,
          s"state_schema must be a struct type, got ${other.sql}")
    }
    if (parsed.isEmpty) throw MapWithStateException(ErrorCondition.InvalidStateSchema,
      "state_schema has no fields")
    parsed.fieldNames.groupBy(_.toLowerCase).collectFirst {
      case (_, d) if d.length > 1 =>
        throw MapWithStateException(ErrorCondition.InvalidStateSchema,
          s"state_schema names field '${d.head}' twice")
    }
    // A state field may always be null (an update can produce a null field), so the rows the
    // state map holds must not promise otherwise.
    StructType(parsed.fields.map(_.copy(nullable = true)))
  }

  /**
   * The initial state as (key columns, state fields, timer, last update time), by name, cast to
   * the key's and state's types where that is safe (keys must then hash exactly like the
   * input's keys); the timer and the update time are null where no column is named for them.
   * State read back (a `last_updated` column named) may also have the other columns read_state
   * gives: its `partition` (where the state was kept; the new query places keys itself) and,
   * unless named as the timer, its `timeout_at`, both ignored; and a BOOLEAN column named by
   * `hasStateColumn` (read_state's and final_state's `has_state`) says which keys hold only a
   * timer (false; null reads as true). Any other column is refused, an unnamed `has_state` too:
   * ignoring it would resume a timer-only key as a key with an all-null state.
   */
  private def initialStatePlan(
      plan: LogicalPlan,
      keys: Seq[Attribute],
      stateType: StructType,
      timerColumn: Option[String],
      lastUpdatedColumn: Option[String],
      hasStateColumn: Option[String]): LogicalPlan = {
    val analyzed = analyze(plan, "initial_state")
    if (analyzed.isStreaming) {
      throw MapWithStateException(ErrorCondition.InitialStateMismatch,
        "initial_state must be a batch DataFrame, not a streaming one")
    }
    val expected = keys.map(k => (k.name, k.dataType)) ++
      stateType.fields.map(f => (f.name, f.dataType)) ++
      (timerColumn ++ lastUpdatedColumn).map(c => (c, TimestampType)) ++
      hasStateColumn.map(c => (c, BooleanType))
    val resolved = expected.map { case (name, dataType) =>
      val column = analyzed.output.find(a => conf.resolver(a.name, name)).getOrElse {
        throw MapWithStateException(ErrorCondition.InitialStateMismatch,
          s"initial_state has no column '$name'; it must have the key columns and the state's " +
            s"fields: ${expected.map { case (n, t) => s"$n ${t.sql}" }.mkString(", ")} " +
            s"(it has ${analyzed.output.map(a => s"${a.name} ${a.dataType.sql}").mkString(", ")})")
      }
      if (DataTypeUtils.sameType(column.dataType, dataType)) {
        name -> Alias(column, name)()
      } else if (Cast.canUpCast(column.dataType, dataType)) {
        name -> Alias(Cast(column, dataType), name)()
      } else {
        throw MapWithStateException(ErrorCondition.InitialStateMismatch,
          s"initial_state column '${column.name}' is ${column.dataType.sql}, which cannot be " +
            s"safely cast to ${dataType.sql}")
      }
    }
    val (keyAndState, rest) = resolved.splitAt(keys.size + stateType.length)
    def time(column: Option[String], as: String): NamedExpression = column match {
      case Some(name) => rest.find(_._1 == name).get._2
      case None => Alias(Literal(null, TimestampType), as)()
    }
    val hasState = hasStateColumn match {
      case Some(name) =>
        val column = rest.find(_._1 == name).get._2 match {
          case Alias(c, _) => c
          case other => other
        }
        Alias(Coalesce(Seq(column, Literal(true))), InitialHasStateColumn)()
      case None => Alias(Literal(true), InitialHasStateColumn)()
    }
    val ignored =
      if (lastUpdatedColumn.isEmpty) Nil else Seq(KeyStateColumns.TimeoutAt, "partition")
    val extra = analyzed.output.filterNot(a => expected.exists(e => conf.resolver(e._1, a.name)))
      .filterNot(a => ignored.exists(conf.resolver(_, a.name)))
    if (extra.nonEmpty) {
      throw MapWithStateException(ErrorCondition.InitialStateMismatch,
        s"initial_state has columns that are neither key columns nor state fields: " +
          extra.map(_.name).mkString(", ") +
          (if (lastUpdatedColumn.isEmpty) ""
           else " (besides read_state's timeout_at and " +
             "partition, which are ignored)") +
          (if (!extra.exists(a => conf.resolver(a.name, KeyStateColumns.HasState))) ""
           else s"; name ${KeyStateColumns.HasState} to resume its keys holding only a timer " +
             s"(has_state='${KeyStateColumns.HasState}', with last_updated), or drop it to " +
             "leave them out"))
    }
    val columns = keyAndState.map(_._2) ++ Seq(
      time(timerColumn, InitialTimerColumn), time(lastUpdatedColumn, InitialLastUpdatedColumn),
      hasState)
    analyze(Project(columns, analyzed), "initial_state")
  }
}

object MapWithStateBuilder {

  /**
   * Names of the child's own columns for the batch time and the ordering expressions. They
   * share the reserved prefix (no input column can clash) but are not state function inputs:
   * the function cannot see them.
   */
  val BatchTimeColumn: String = StateFunctionInput.ReservedPrefix + "replay_batch_time"
  val OrderColumnPrefix: String = StateFunctionInput.ReservedPrefix + "order_"

  /** The initial state's timer and last update time when no column of it is named for them. */
  val InitialTimerColumn: String = StateFunctionInput.ReservedPrefix + "initial_timer"
  val InitialLastUpdatedColumn: String = StateFunctionInput.ReservedPrefix + "initial_updated"

  /** Whether an initial-state row has a state (false: its key holds only a timer). */
  val InitialHasStateColumn: String = StateFunctionInput.ReservedPrefix + "initial_has_state"
}

/** Spark's analyzer over a plan, with an error that names the argument the plan came from. */
private[plan] object Analysis {
  def analyze(session: SparkSession, plan: LogicalPlan, what: String): LogicalPlan =
    try {
      val qe = session.sessionState.executePlan(plan)
      qe.assertAnalyzed()
      qe.analyzed
    } catch {
      case e: MapWithStateException => throw e
      case NonFatal(e) => throw failed(what, e, plan)
    }

  /** `what`, whose `plan` Spark's analyzer refused with `error`, as the caller wrote it. */
  def failed(what: String, error: Throwable, plan: LogicalPlan): MapWithStateException = {
    plan match {
      case Project(Seq(Alias(e, _)), _) => UnsupportedExpressions.refusedByAnalysis(e, what, error)
      case _ =>
    }
    MapWithStateException.analysisFailed(what, error,
      ColumnSuggestions.inCallersWords(MapWithStateException.describe(error), error, plan))
  }
}
