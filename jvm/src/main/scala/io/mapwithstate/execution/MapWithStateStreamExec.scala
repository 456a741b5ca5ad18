package io.mapwithstate.execution

import java.util.concurrent.TimeUnit

import scala.util.control.NonFatal

import io.mapwithstate.{MapWithStateConf, MapWithStateException}
import io.mapwithstate.plan.{
  FunctionKind,
  MapWithStateOptions,
  StateFunction,
  StateMigrationResolver
}
import io.mapwithstate.state.{
  OperatorMetadata,
  StateBackend,
  StateMap,
  StateSchemaEvolution,
  StateSchemaHistory,
  StoreBackedStateMap,
  StoredStateConversion
}
import io.mapwithstate.testing.TaskFailureInjection
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, SortOrder}
import org.apache.spark.sql.catalyst.plans.physical.{
  Distribution,
  Partitioning,
  UnknownPartitioning
}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.sql.execution.streaming.operators.stateful.{
  StatefulOperatorCustomMetric,
  StatefulOperatorCustomSumMetric,
  StatefulOperatorPartitioning,
  StatefulOperatorStateInfo,
  StateStoreWriter
}
import org.apache.spark.sql.execution.streaming.state.{
  StateSchemaValidationResult,
  StateStore,
  StateStoreCustomMetric
}
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * mapWithState in a streaming query: each micro-batch is one batch of DStream's mapWithState,
 * with the micro-batch's timestamp as its batch time.
 *
 * Records are clustered by key into the query's state partitions (Spark's stateful
 * distribution, so the partitioning never changes across restarts); for each partition it
 * serves (one, or in local mode a run of them: [[StateTaskGroups]]), a task opens the
 * partition's state store (a [[StateMapStore]] of the [[StateBackend]]: the version the
 * previous micro-batch committed, taking this one's writes) and runs the micro-batch as a
 * one-batch timeline through the [[PartitionRunner]] the batch operator uses too: the records,
 * then the keys the timeout policy times out in this micro-batch (the n-th of the query is
 * batch n of the policy), then with snapshot output the whole state. The store is committed
 * when the partition's output is exhausted; Spark aborts it if the task fails.
 *
 * With `order_by`, each partition's records arrive sorted by it ([[WithinBatchOrder]]); the
 * reordering by key for a sorted store keeps each key's order.
 *
 * In a long-running batch of Real-Time Mode ([[RealTimeMode]]) each record's output is handed
 * on as the record is run: a task serves one partition, its records run in arrival order, none
 * read ahead; calls see the wall clock and keys time out between records as it passes their
 * deadline ([[BatchClock.WallClock]]), and while none arrives, the records being read by a
 * thread of their own ([[RecordHandOff]]); the store still commits when the batch's input ends.
 *
 * `stateInfo` comes from the running query at planning time (see
 * [[MapWithStateStreamExec.operatorId]] and `StreamingQueryGlue`); `initialState` is planned
 * only for a query's first batch.
 *
 * The tasks' closure holds the operator (Spark's `setStoreMetrics` and `setOperatorMetrics`
 * count into its metrics), but not the plan below it: `child` and `initialState` are not
 * shipped (`@transient`, as Spark's `InMemoryTableScanExec` does with its relation), since
 * tasks read their input from the RDD and never from the plan: shipping them would make every
 * stateful task deserialize the whole child plan and report its metrics back.
 */
case class MapWithStateStreamExec(
    keys: Seq[Attribute],
    kind: FunctionKind,
    function: StateFunction,
    options: MapWithStateOptions,
    output: Seq[Attribute],
    stateInfo: Option[StatefulOperatorStateInfo],
    batchTimestampMs: Long,
    terminatingTrigger: Boolean,
    @transient child: SparkPlan,
    @transient initialState: Option[SparkPlan],
    eventTime: Option[Attribute] = None,
    batchWatermarkMs: Long = 0L,
    lateRowsMetric: Option[SQLMetric] = None,
    withinBatchOrder: Seq[SortOrder] = Nil,
    realTimeMode: Boolean = false)
  extends MapWithStateExecBase with StateStoreWriter {

  /**
   * As Spark names its operators in a query's progress: a group function is its
   * flatMapGroupsWithState's counterpart (mapGroupsWithState runs as that operator too).
   */
  override def shortName: String = kind match {
    case _: FunctionKind.PerRecord => "mapWithState"
    case _: FunctionKind.PerGroup => "flatMapGroupsWithState"
  }

  /**
   * A group function's late rows are dropped, and counted, by the filter before its
   * aggregation ([[LateRowFilterExec]]), in a metric shared with it: Spark's progress reads
   * `numRowsDroppedByWatermark` through here.
   */
  override def longMetric(name: String): SQLMetric = lateRowsMetric match {
    case Some(shared) if name == MapWithStateExecBase.LateRowsMetric => shared
    case _ => super.longMetric(name)
  }

  private def keySchema: StructType = DataTypeUtils.fromAttributes(keys)

  /** Where the state is kept; picked from the options, with the session's settings. */
  private def backend: StateBackend = StateBackend.of(options.backend, conf)

  override def requiredChildDistribution: Seq[Distribution] = {
    def clustered(columns: Seq[Attribute]): Distribution = stateInfo match {
      case Some(info) => StatefulOperatorPartitioning.getCompatibleDistribution(columns, info, conf)
      case None => StatefulOperatorPartitioning.getCompatibleDistribution(columns,
          conf.numShufflePartitions, conf)
    }
    clustered(keys) +: initialState.toSeq.map(s => clustered(s.output.take(keys.size)))
  }

  /**
   * A per-record function's `order_by` with its arrival tiebreaker ([[WithinBatchOrder]]),
   * which Spark sorts each state partition's records by (after the shuffle, if one is needed);
   * none without `order_by`, so there is no sort.
   */
  override def requiredChildOrdering: Seq[Seq[SortOrder]] =
    withinBatchOrder +: initialState.toSeq.map(_ => Nil)

  /**
   * The state partitions each task serves ([[StateTaskGroups]]), decided once on the driver:
   * the RDD's partitions and `outputPartitioning` must agree.
   */
  @transient private lazy val taskGroups: Array[Array[Int]] = stateInfo match {
    case Some(info) if realTimeMode => StateTaskGroups.single(info.numPartitions)
    case Some(info) => StateTaskGroups.of(info.numPartitions, sparkContext, conf)
    case None => Array.empty
  }

  override def outputPartitioning: Partitioning = UnknownPartitioning(taskGroups.length)

  override protected def customStatefulOperatorMetrics: Seq[StatefulOperatorCustomMetric] =
    Seq(StatefulOperatorCustomSumMetric(MapWithStateExecBase.TimedOutKeysMetric,
        "number of timed-out keys"))

  /**
   * On the driver, the SQL conf naming the store provider the operator's stores really come
   * from (the backend's, which opens them in [[StateTaskRDD]]) instead of the session's (HDFS
   * by default, whose metrics those stores never report).
   * Spark's `StateStoreWriter` declares a stateful operator's store metrics, and reads them
   * back into the query's progress, from `conf.stateStoreProviderClass` (its private
   * `stateStoreCustomMetrics` and `snapshotCustomMetricNames`), so the conf the operator
   * hands it is the one hook there is; the alternatives are setting the provider for the
   * whole query (every other stateful operator in it too) or copying Spark's metric and
   * progress code. Only the provider differs from the session's conf. Tasks keep Spark's
   * read-only conf: they only fill metrics declared here.
   */
  @transient private lazy val driverConf: SQLConf = {
    val base = super.conf
    val provider = StateBackend.of(options.backend, base).providerClassName
    if (base.stateStoreProviderClass == provider) base
    else {
      val withProvider = base.clone()
      withProvider.setConfString(SQLConf.STATE_STORE_PROVIDER_CLASS.key, provider)
      withProvider
    }
  }

  override def conf: SQLConf = if (TaskContext.get() != null) super.conf else driverConf

  /**
   * The store's custom metrics that this operator has: Spark declares them for the session's
   * provider, and a backend's store (RocksDB's) may report others, which have no SQL metric.
   */
  override def setStoreCustomMetrics(customMetrics: Map[StateStoreCustomMetric, Long]): Unit =
    customMetrics.foreach { case (metric, value) => metrics.get(metric.name).foreach(_ += value) }

  override def validateAndMaybeEvolveStateSchema(
      hadoopConf: Configuration,
      batchId: Long,
      stateSchemaVersion: Int): List[StateSchemaValidationResult] = {
    // First: a switched backend has another value schema too, and this error says why.
    val info = getStateInfo
    val operatorDir = new Path(info.checkpointLocation, info.operatorId.toString)
    OperatorMetadata.recordOrCheck(operatorDir, options.backend,
      timeoutPolicy match {
        case _: TimeoutPolicy.Timers => OperatorMetadata.Timers
        case _ => OperatorMetadata.UpdateTimes
      }, hadoopConf, checkpointIds = conf.stateStoreCheckpointFormatVersion >= 2)
    def sparkCheck(valueSchema: StructType, stored: Option[StructType]) =
      try {
        StreamingQueryGlue.validateStateSchema(session, info, hadoopConf, keySchema,
          valueSchema, stateSchemaVersion)
      } catch {
        case NonFatal(e) => throw stateSchemaChanged(info, hadoopConf, stored, Some(e))
      }
    // Spark's check matches fields by position, not by name: a state whose fields were renamed
    // or reordered (same types in the same places) passes it, and would be read by position.
    // The state goes on in the current schema only as the evolution rules carry it over, by
    // name (unless the session turned Spark's check off, which this one follows).
    val recorded =
      if (!conf.isStateSchemaCheckEnabled) None
      else StreamingQueryGlue.recordedStateSchema(info, hadoopConf)
    recorded match {
      case None => sparkCheck(backend.storeValueSchema(function.stateType), None)
      case Some((_, recordedValue)) =>
        val stored = storedStateType(info, operatorDir, backend.stateTypeOf(recordedValue),
          hadoopConf)
        // The spec's migration, when the schema changed, replaces the rules' conversion; an
        // unchanged schema is already migrated (or never needed it).
        val conversion = options.migrate.filter(_ => stored != function.stateType) match {
          case Some(migrate) =>
            Some(StateMigrationResolver.resolve(session, keys, stored, function.stateType,
                migrate))
          case None =>
            StateSchemaEvolution.plan(stored, function.stateType) match {
              case Left(_) => throw stateSchemaChanged(info, hadoopConf, Some(stored), None)
              case Right(c) => Option.when(!c.identity)(StoredStateConversion.of(c, keySchema))
            }
        }
        // Spark's file keeps the first schema: its check compares the key columns.
        val results = sparkCheck(recordedValue, Some(stored))
        if (stored != function.stateType) {
          StateSchemaHistory.write(operatorDir,
            StateSchemaHistory.read(operatorDir, hadoopConf) :+
              StateSchemaHistory.Entry(info.storeVersion + 1, function.stateType),
            hadoopConf)
        }
        conversion.foreach { c =>
          MapWithStateStreamExec.conversions.put(conversionKey(info), (info.storeVersion, c))
        }
        results
    }
  }

  /**
   * The state type of the version this run's first batch loads: from the checkpoint's schema
   * history ([[StateSchemaHistory]], less a conversion that never committed), where `first`
   * is the one Spark recorded.
   */
  private def storedStateType(
      info: StatefulOperatorStateInfo,
      operatorDir: Path,
      first: StructType,
      hadoopConf: Configuration): StructType = {
    StateSchemaHistory.stateTypeAt(
      StateSchemaHistory.committed(operatorDir, info.storeVersion, hadoopConf),
      info.storeVersion, first)
  }

  private def conversionKey(info: StatefulOperatorStateInfo): (String, Long, String) =
    (info.checkpointLocation, info.operatorId, info.queryRunId.toString)

  /**
   * The conversion of the state this micro-batch loads, when it is the first after a restart
   * with a changed state schema (decided by [[validateAndMaybeEvolveStateSchema]]).
   */
  private def conversionOf(info: StatefulOperatorStateInfo): Option[StoredStateConversion] =
    Option(MapWithStateStreamExec.conversions.get(conversionKey(info)))
      .filter(_._1 == info.storeVersion).map(_._2)

  /**
   * The refusal of a restart whose key columns or state schema differ from those recorded in
   * the checkpoint: naming each field the evolution rules ([[StateSchemaEvolution]]) refuse,
   * with its old and new type, and how to migrate; `sparkError` is Spark's own check's.
   */
  private def stateSchemaChanged(
      info: StatefulOperatorStateInfo,
      hadoopConf: Configuration,
      stored: Option[StructType],
      sparkError: Option[Throwable]): MapWithStateException = {
    val recorded = StreamingQueryGlue.recordedStateSchema(info, hadoopConf)
    new MapWithStateException(io.mapwithstate.ErrorCondition.StateSchemaChanged,
      "map_with_state: the key columns or the state schema differ from those this query's " +
        s"checkpoint (${info.checkpointLocation}) was written with: now keys " +
        s"${keySchema.simpleString} and state ${function.stateType.simpleString}" +
        recorded.map { case (keys, value) =>
          changes(keys, stored.getOrElse(backend.stateTypeOf(value)))
        }.getOrElse("") +
        "; keep them, or give the StateSpec a migrate(...) that makes the new state from the " +
        "old (StateSpec.migrate: renames, recomputed fields, any type change), or start the " +
        "query on a new checkpoint, migrating the old state into it with read_state and " +
        "StateSpec.initial_state (the recipe 'Migrating state between checkpoints')" +
        sparkError.map(e => s" (${MapWithStateException.withoutSchemaCheckAdvice(e)})")
          .getOrElse(""),
      sparkError.orNull)
  }

  /**
   * What the checkpoint's key columns `oldKeys` and state `oldState` differ in from the
   * current ones, for the refusal's message: each field the rules refuse.
   */
  private def changes(oldKeys: StructType, oldState: StructType): String = {
    val keys =
      if (DataType.equalsIgnoreNullability(oldKeys, keySchema)) Nil
      else Seq(s"the key columns were ${oldKeys.simpleString} (keys cannot change)")
    val fields = StateSchemaEvolution.plan(oldState, function.stateType).left
      .getOrElse(Nil).map(_.describe)
    s"; the checkpoint's state is ${oldState.simpleString}" + (
      if (keys.isEmpty && fields.isEmpty) ""
      else s", and a restart cannot carry over: ${(keys ++ fields).mkString("; ")}")
  }

  /**
   * Timeouts fire only in batches, so while keys wait to time out every trigger must run a
   * batch, data or not (as a DStream runs every batch interval); a terminating trigger
   * (AvailableNow, Once) runs the batches its data needs and no more. Event-time timers can
   * only fire when the watermark moves, so they ask for a batch exactly then, as Spark's
   * FlatMapGroupsWithStateExec does (whatever the trigger).
   */
  override def shouldRunAnotherBatch(newInputWatermark: Long): Boolean = {
    val hasState = longMetric("numTotalStateRows").value > 0
    timeoutPolicy match {
      case TimeoutPolicy.Never => false
      case TimeoutPolicy.Timers(true) => hasState && newInputWatermark > batchWatermarkMs
      case _ => !terminatingTrigger && hasState
    }
  }

  /**
   * The query's number of this micro-batch: the one that makes store version v + 1 is batch
   * number v + 1, less the batches before it that `repartition_state` made (which ran no input;
   * only an idle timeout's scan cadence counts batches, so only it reads them).
   */
  private def batchNumber(info: StatefulOperatorStateInfo): Long = timeoutPolicy match {
    case _: TimeoutPolicy.Idle =>
      val operatorDir = new Path(info.checkpointLocation, info.operatorId.toString)
      val made = OperatorMetadata.repartitionBatches(operatorDir,
        session.sessionState.newHadoopConf())
      info.storeVersion + 1 - made.count(_ < info.storeVersion)
    case _ => info.storeVersion + 1
  }

  override protected def doExecute(): RDD[InternalRow] = {
    val info = getStateInfo
    val batchTime = TimeUnit.MILLISECONDS.toMicros(batchTimestampMs)
    // Spark's watermark for this micro-batch, when the input has one (0 before it first
    // moves), or a resumed run's starting watermark when that is later.
    val timeline = BatchTimeline.single(batchTime).copy(watermarks = eventTime.map(_ =>
      Array(options.watermarkOf(TimeUnit.MILLISECONDS.toMicros(batchWatermarkMs)))))
    val batchNumber = this.batchNumber(info)
    val runner = partitionRunner()
    val backend = this.backend
    val (keySchema, stateType) = (this.keySchema, function.stateType)
    val clock =
      if (realTimeMode) BatchClock.WallClock(MapWithStateConf.realTimeTimerIntervalMs(conf))
      else BatchClock.OfTimeline
    val failureMarker = TaskFailureInjection.marker(conf)
    // In a real-time batch whose keys can time out, the records are read by a thread of their
    // own, so that due keys fire while the partition waits for records ([[RecordHandOff]]).
    val handOff = realTimeMode && timeoutPolicy != TimeoutPolicy.Never
    val allUpdatesTimeMs = longMetric("allUpdatesTimeMs")
    val commitTimeMs = longMetric("commitTimeMs")

    StateTaskRDD(recordsAndInitialState(), session, info, backend, keySchema, stateType,
      taskGroups, conversionOf(info)) {
      (store, parts) =>
        val started = System.nanoTime()
        val (records, initial) = parts.next()
        val stateMap = backend.stateMapOf(store, keySchema, stateType)
        // A one-batch timeline: the records' order across keys is free, and a sorted store's
        // reads are cheaper in key order (the blocks one key's read loads hold the next keys);
        // but not in a real-time batch, whose records cannot wait for the batch's last.
        val ordered =
          if (backend.readsFasterInKeyOrder && !realTimeMode) {
            new KeyOrderedRecords(records, runner.keyOrdinals, runner.keyTypes)
          } else records
        val input = TaskFailureInjection.around(ordered, failureMarker)
        runner.run(store.id.partitionId, stateMap,
          if (handOff) RecordHandOff.start(input, TaskContext.get()) else input, initial,
          timeline, _ => batchTime, batchNumber, backend.heapLimitBytes,
          readAhead = !realTimeMode, clock) {
          allUpdatesTimeMs += TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)
          commitTimeMs += timeTakenMs {
            stateMap.flush()
            store.commit()
          }
          setStoreMetrics(store)
          correctStateRows(store, stateMap)
          setOperatorMetrics()
        }
    }
  }

  /**
   * The state's rows as the map counts them, where it counts them ([[StoreBackedStateMap]]):
   * Spark's RocksDB store with its own counting off reports -1, which `setStoreMetrics` left
   * out (a metric takes no negative amount); with it on (a session's choice), the same count.
   */
  private def correctStateRows(store: StateStore, stateMap: StateMap): Unit = stateMap match {
    case counted: StoreBackedStateMap =>
      longMetric("numTotalStateRows") += counted.keyCount - math.max(store.metrics.numKeys, 0L)
    case _ =>
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[SparkPlan]): SparkPlan =
    copy(child = newChildren.head,
      initialState = if (newChildren.size > 1) Some(newChildren(1)) else None)
}

object MapWithStateStreamExec {

  /**
   * The state operator id of a query's first (or only) map_with_state in its checkpoint
   * (`state/1000/...`). Spark numbers its own stateful operators from 0 in plan order, so ids
   * from far above them cannot collide, and stay the same across restarts.
   */
  val FirstOperatorId: Long = 1000L

  /**
   * On the driver, the conversion of each query run's first micro-batch after a restart with a
   * changed state schema, by checkpoint, operator and run: decided when Spark validates the
   * schema, before the batch is planned, and read when it runs (its state version says which).
   */
  private val conversions =
    new java.util.concurrent.ConcurrentHashMap[(String, Long, String),
      (Long, StoredStateConversion)]()

  /**
   * The state operator id of a query's map_with_state number `index` (its
   * `MapWithState.stateOperatorIndex`): `FirstOperatorId + index`, so a query with one keeps
   * the id every earlier checkpoint has.
   */
  def operatorId(index: Int): Long = FirstOperatorId + index
}
