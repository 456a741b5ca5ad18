package io.mapwithstate

/**
 * The condition of a [[MapWithStateException]]: a stable name a caller can match (Spark's
 * error-class convention, returned by `getCondition()` in Scala and in PySpark, Connect and
 * classic), the SQLSTATE that goes with it, and when it is raised. The message says the rest.
 *
 * Every condition is listed in [[ErrorCondition.all]] and in the table of `docs/errors.md`
 * (`ErrorConditionSuite` checks that the two agree). A name, once documented, is a contract:
 * rename none, add new ones.
 */
sealed abstract class ErrorCondition(val name: String, val sqlState: String, val when: String) {
  require(name.matches("MAPWITHSTATE_[A-Z_]+(\\.[A-Z_]+)?"), name)

  override def toString: String = name
}

object ErrorCondition {

  // The request: arguments, expressions and their types.

  case object InvalidArgument extends ErrorCondition("MAPWITHSTATE_INVALID_ARGUMENT", "22023",
      "an argument has a value it cannot take (null, a negative number, an unknown name, a " +
        "duration that does not parse)")

  case object ConflictingArguments extends ErrorCondition("MAPWITHSTATE_CONFLICTING_ARGUMENTS",
      "42613",
      "arguments exclude or need each other (timeout with timeout_at, batch_interval or until " +
        "without batch_time, batch arguments or until over a stream, ...)")

  case object InvalidStateSchema extends ErrorCondition("MAPWITHSTATE_INVALID_STATE_SCHEMA",
      "42601", "the state schema does not parse, is not a struct, is empty or names a field twice")

  case object AnalysisFailed extends ErrorCondition("MAPWITHSTATE_ANALYSIS_FAILED", "42000",
      "Spark's analyzer refuses an argument (an unknown column, a function's wrong argument); " +
        "the message is Spark's, after the argument's name, and `sparkCondition` is Spark's own")

  case object ReservedColumnName extends ErrorCondition("MAPWITHSTATE_RESERVED_COLUMN_NAME",
      "42939", "an input column's name starts with `__mws_`, the state function's own prefix")

  case object DuplicateColumn extends ErrorCondition("MAPWITHSTATE_DUPLICATE_COLUMN", "42711",
      "a column is both a key and a value column, or is named twice")

  case object TypeMismatch extends ErrorCondition("MAPWITHSTATE_TYPE_MISMATCH", "42K09",
      "an expression or column is not of the type its argument needs (update a struct of the " +
        "state's fields, remove a BOOLEAN, emit a struct, batch_time and timeout_at TIMESTAMPs)")

  case object NewStateBeforeUpdate extends ErrorCondition("MAPWITHSTATE_NEW_STATE_BEFORE_UPDATE",
      "42K0E", "update or remove uses new_state(), which exists only after them")

  case object InitialStateMismatch extends ErrorCondition("MAPWITHSTATE_INITIAL_STATE_MISMATCH",
      "42K09",
      "initial_state is streaming, lacks a key column or state field, has another " +
        "column, or one that cannot be safely cast")

  // Expressions a state function cannot run.

  case object PythonUdf extends ErrorCondition("MAPWITHSTATE_UNSUPPORTED_EXPRESSION.PYTHON_UDF",
      "0A000", "a Python UDF or pandas UDF is in a state function, where no Python runs")

  case object Generator extends ErrorCondition("MAPWITHSTATE_UNSUPPORTED_EXPRESSION.GENERATOR",
      "0A000", "a generator (explode, posexplode, inline, stack, ...) is in a state function")

  case object WindowFunction
    extends ErrorCondition("MAPWITHSTATE_UNSUPPORTED_EXPRESSION.WINDOW_FUNCTION", "0A000",
      "a window function is in a state function")

  case object Nondeterministic
    extends ErrorCondition("MAPWITHSTATE_UNSUPPORTED_EXPRESSION.NONDETERMINISTIC", "0A000",
      "a nondeterministic expression is where its value would be computed more than once " +
        "(under nullif and other functions over a common expression)")

  case object AggregateInPerRecordFunction
    extends ErrorCondition("MAPWITHSTATE_UNSUPPORTED_EXPRESSION.AGGREGATE", "0A000",
      "an aggregate is in map_with_state's state function, which is called per record")

  case object Unevaluable
    extends ErrorCondition("MAPWITHSTATE_UNSUPPORTED_EXPRESSION.UNEVALUABLE", "0A000",
      "any other expression that Spark plans into an operator of its own and that cannot be " +
        "evaluated row by row (a subquery, a table-valued function, ...)")

  // Group functions (map_groups_with_state).

  case object MissingAggregation extends ErrorCondition("MAPWITHSTATE_MISSING_AGGREGATION",
      "42803", "a group function reads a value column outside an aggregate")

  case object NestedAggregate extends ErrorCondition("MAPWITHSTATE_NESTED_AGGREGATE", "42607",
      "a group function's aggregate is inside another aggregate")

  case object AggregateReadsContext extends ErrorCondition(
      "MAPWITHSTATE_AGGREGATE_READS_CONTEXT", "42803",
      "a group function's aggregate reads the state or another context column")

  case object UnsupportedAggregate extends ErrorCondition("MAPWITHSTATE_UNSUPPORTED_AGGREGATE",
      "0A000", "a group function's aggregate is DISTINCT or has a FILTER clause")

  // Streaming queries.

  case object UnsupportedOutputMode extends ErrorCondition(
      "MAPWITHSTATE_UNSUPPORTED_OUTPUT_MODE", "42KDE",
      "a streaming write's output mode cannot hold the operator's rows (complete mode, update " +
        "with several operators or after an aggregation)")

  case object GlobalWatermarkLimit extends ErrorCondition(
      "MAPWITHSTATE_GLOBAL_WATERMARK_LIMIT", "42KDE",
      "a stateful operator follows one that may emit rows older than the watermark (Spark's " +
        "correctness check)")

  case object UnsupportedInRealTimeMode extends ErrorCondition(
      "MAPWITHSTATE_UNSUPPORTED_IN_REAL_TIME_MODE", "0A000",
      "a streaming query in Real-Time Mode (`trigger(realTime=...)`) has what cannot run " +
        "record by record (a group function, order_by, initial_state) or keeps its state in the " +
        "memory backend")

  case object StateSchemaChanged extends ErrorCondition("MAPWITHSTATE_STATE_SCHEMA_CHANGED",
      "XXKST",
      "a restarted query's key columns differ from its checkpoint's, or its state schema differs " +
        "in a way the schema-evolution rules cannot carry over (or a state read asks in the " +
        "current schema for a batch that only a migration carried over)")

  case object MigrationFailed extends ErrorCondition("MAPWITHSTATE_MIGRATION_FAILED", "22000",
      "a restart's StateSpec.migrate failed on a key's old state (the message names the key); " +
        "the batch did not commit, and the checkpoint is as the old query left it")

  case object BackendChanged extends ErrorCondition("MAPWITHSTATE_BACKEND_CHANGED", "XXKST",
      "a restarted query asks for another state backend than its checkpoint's")

  // Run time, inside tasks.

  case object TimerAlreadyDue extends ErrorCondition("MAPWITHSTATE_TIMER_ALREADY_DUE", "22023",
      "a call sets a timer that is already due (Spark's GroupState refuses it too)")

  case object InitialStateDuplicateKey extends ErrorCondition(
      "MAPWITHSTATE_INITIAL_STATE_DUPLICATE_KEY", "23505",
      "initial_state has more than one row for a key")

  case object NullBatchTime extends ErrorCondition("MAPWITHSTATE_NULL_BATCH_TIME", "22004",
      "a record of a batch replay has a null batch_time")

  case object UntilBeforeLastBatch extends ErrorCondition(
      "MAPWITHSTATE_UNTIL_BEFORE_LAST_BATCH", "22023",
      "a replay's until is before its last batch time (raised when the replay runs, as its " +
        "batch times come from the records)")

  case object PartitionStateTooLarge extends ErrorCondition(
      "MAPWITHSTATE_PARTITION_STATE_TOO_LARGE", "53200",
      "a partition's heap state grows past spark.mapwithstate.stateStore.maxPartitionBytes")

  // Limits, settings and the Connect message.

  case object LimitExceeded extends ErrorCondition("MAPWITHSTATE_LIMIT_EXCEEDED", "54000",
      "a request or a replay goes past a limit the server sets (partitions, state fields, " +
        "checkpoint interval, replayed batches); the message names the setting that raises it")

  case object InvalidConf extends ErrorCondition("MAPWITHSTATE_INVALID_CONF", "22022",
      "a spark.mapwithstate.* setting has a value it cannot take")

  case object MalformedRequest extends ErrorCondition("MAPWITHSTATE_MALFORMED_REQUEST", "56K00",
      "the Connect message is malformed: it does not parse, lacks a required field, has fields " +
        "this server does not know, or carries damaged Arrow data")

  // Reading state back (read_state, read_state_changes).

  case object NotACheckpoint extends ErrorCondition("MAPWITHSTATE_NOT_A_CHECKPOINT", "42K03",
      "the path is not a streaming query's checkpoint, or holds no map_with_state state (under " +
        "operator_id)")

  case object AmbiguousOperator extends ErrorCondition("MAPWITHSTATE_AMBIGUOUS_OPERATOR",
      "42702", "the checkpoint holds several map_with_state operators and no operator_id is given")

  case object BatchUnavailable extends ErrorCondition("MAPWITHSTATE_BATCH_UNAVAILABLE", "22003",
      "the batch asked for is not committed yet, or state maintenance has cleaned it up")

  case object CheckpointUnreadable extends ErrorCondition("MAPWITHSTATE_CHECKPOINT_UNREADABLE",
      "XXKST",
      "the checkpoint's state cannot be read: it cannot be opened, its layout or schema " +
        "file is damaged, or its files are another backend's")

  case object CheckpointTooNew extends ErrorCondition("MAPWITHSTATE_CHECKPOINT_TOO_NEW", "XXKST",
      "the checkpoint was written by a newer mapwithstate, in a format this one cannot read")

  // Rewriting a checkpoint (repartition_state).

  case object QueryActive extends ErrorCondition("MAPWITHSTATE_QUERY_ACTIVE", "55006",
      "the checkpoint's query is running, or stopped in the middle of a micro-batch: a " +
        "checkpoint is rewritten only while its query is stopped between batches")

  /** Every condition, in the order of the documentation's table. */
  val all: Seq[ErrorCondition] = Seq(InvalidArgument, ConflictingArguments, InvalidStateSchema,
    AnalysisFailed, ReservedColumnName, DuplicateColumn, TypeMismatch, NewStateBeforeUpdate,
    InitialStateMismatch, PythonUdf, Generator, WindowFunction, Nondeterministic,
    AggregateInPerRecordFunction, Unevaluable,
    MissingAggregation, NestedAggregate, AggregateReadsContext, UnsupportedAggregate,
    UnsupportedOutputMode, GlobalWatermarkLimit, UnsupportedInRealTimeMode, StateSchemaChanged,
    BackendChanged, MigrationFailed,
    TimerAlreadyDue, InitialStateDuplicateKey, NullBatchTime, UntilBeforeLastBatch,
    PartitionStateTooLarge,
    LimitExceeded, InvalidConf, MalformedRequest, NotACheckpoint, AmbiguousOperator,
    BatchUnavailable, CheckpointUnreadable, CheckpointTooNew, QueryActive)
}
