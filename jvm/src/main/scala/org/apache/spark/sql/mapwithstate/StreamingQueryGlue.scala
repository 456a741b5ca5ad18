package org.apache.spark.sql.mapwithstate

import java.util.UUID
import java.util.concurrent.ConcurrentHashMap

import org.apache.hadoop.conf.Configuration
import org.apache.spark.{SparkConf, SparkEnv, TaskContext}
import org.apache.spark.io.CompressionCodec
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
import org.apache.spark.sql.execution.streaming.RealTimeTrigger
import org.apache.spark.sql.execution.streaming.checkpointing.{CommitLog, CommitMetadataBase}
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperatorStateInfo
import org.apache.spark.sql.execution.streaming.runtime.{
  MicroBatchExecution,
  RealTimeModeAllowlist,
  StreamExecution
}
import org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  RocksDBKeyStateEncoder,
  RocksDBStateEncoder,
  RocksDBStateStoreChangeDataReader,
  RocksDBStateStoreProvider,
  RocksDBValueStateEncoder,
  StateSchemaCompatibilityChecker,
  StateSchemaValidationResult,
  StateStore,
  StateStoreChangeDataReader,
  StateStoreColFamilySchema,
  StateStoreConf,
  StateStoreCoordinatorRef,
  StateStoreId,
  StateStoreProvider,
  StateStoreProviderId,
  UnsafeRowDataEncoder
}
import org.apache.spark.sql.types.StructType
import org.apache.spark.util.TaskCompletionListener

/**
 * Everything mapWithState needs from Spark's streaming internals, which have no public hook for
 * a stateful operator from outside Spark. It lives in one place (and in Spark's package, for
 * the `private[sql]` members it uses), so that a Spark upgrade has one file to revisit. It only
 * reaches into Spark: the task engine that runs a stateful stage is
 * [[io.mapwithstate.execution.StateTaskRDD]], and each backend opens its own stores
 * ([[io.mapwithstate.state.StateBackend]]). What it reaches:
 *
 *  - which micro-batch of which query is being planned, and the state info Spark's
 *    `IncrementalExecution` would have assigned a built-in operator;
 *  - the state store coordinator: where the driver has each state partition loaded, and, as
 *    an executor reaches it, the reports of partitions loaded and of commits (which Spark
 *    counts for a `foreachBatch` sink);
 *  - checking the state schema against the one recorded in the checkpoint, and reading that
 *    one back; the state checkpoint ids a commit-log entry records (checkpoint format v2),
 *    and an entry recording others (a repartition's);
 *  - Spark's compression codecs by name, for the state files;
 *  - Real-Time Mode: whether the query runs under it, and admitting the streaming operator to
 *    its operator allowlist (see [[admitToRealTimeMode]]);
 *  - the queries running in the application, for `repartition_state` to refuse their
 *    checkpoints;
 *  - the change reader of a RocksDB state partition, for `read_state_changes` (see
 *    [[rocksDBChanges]]);
 *  - a task's life, for the thread that reads a real-time task's records
 *    ([[io.mapwithstate.execution.RecordHandOff]]): its `TaskContext` set on that thread, a
 *    listener run before the task's completion listeners, and the task's kill.
 */
object StreamingQueryGlue {

  /**
   * The micro-batch being planned on this thread: its state info and times, and whether it is a
   * long-running batch of Real-Time Mode (`trigger(realTime=...)`).
   */
  case class PlannedMicroBatch(
      stateInfo: StatefulOperatorStateInfo,
      batchTimestampMs: Long,
      terminatingTrigger: Boolean,
      batchWatermarkMs: Long,
      realTimeMode: Boolean)

  /**
   * The micro-batch of the streaming query that is planning on this thread, or None when no
   * query is (a streaming plan being explained outside a query). A streaming query plans each
   * micro-batch on its own thread, with its id and the batch id in local properties; the
   * query's `lastExecution` is then the `IncrementalExecution` being planned.
   */
  def plannedMicroBatch(session: SparkSession, operatorId: Long): Option[PlannedMicroBatch] = {
    val sc = session.sparkContext
    val (queryId, query) = runningQuery(session).getOrElse(return None)
    val execution = query.lastExecution
    val batchId = Option(sc.getLocalProperty(MicroBatchExecution.BATCH_ID_KEY)).map(_.toLong)
    if (execution == null || !batchId.contains(execution.currentBatchId)) {
      throw new IllegalStateException(
        s"streaming query $queryId is planning batch ${batchId.getOrElse("?")}, but its last " +
          s"execution is for batch ${Option(execution).map(_.currentBatchId).getOrElse("none")}" +
          "; mapWithState can only run in micro-batch streaming queries")
    }
    val info = StatefulOperatorStateInfo(
      execution.checkpointLocation,
      execution.runId,
      operatorId,
      execution.currentBatchId,
      execution.numStateStores,
      execution.stateSchemaMetadatas.get(operatorId),
      execution.currentStateStoreCkptId.get(operatorId))
    Some(PlannedMicroBatch(info, execution.offsetSeqMetadata.batchTimestampMs,
        execution.isTerminatingTrigger, execution.offsetSeqMetadata.batchWatermarkMs,
        query.trigger.isInstanceOf[RealTimeTrigger]))
  }

  /**
   * Adds `operatorClass` to the physical operators Spark's Real-Time Mode accepts.
   *
   * Spark checks each real-time batch's physical plan against a fixed list of operator class
   * names (`RealTimeModeAllowlist.allowedOperators`, transformWithState and streaming
   * aggregation among them) and has no hook to extend it: the only other way past the check is
   * `spark.sql.streaming.realTimeMode.allowlistCheck=false`, which lets every operator of the
   * user's session through, in every query. So the plugin adds its one streaming operator's
   * name to the list when its extensions are installed (before any query of the JVM is
   * checked), and keeps the decision of *when* it is safe in its own planner, which refuses
   * the shapes that cannot run record by record ([[io.mapwithstate.execution.RealTimeMode]]).
   *
   * Scala compiles the object's `val` to a static final field of its module class; a static
   * final field cannot be set through reflection, so it is set the way Spark's own `Platform`
   * writes memory, through `sun.misc.Unsafe`, with a volatile write. Idempotent and
   * thread-safe. Returns false, changing nothing, if the field is not there (another Spark
   * version): real-time queries with the operator then fail with Spark's allowlist error.
   */
  def admitToRealTimeMode(operatorClass: String): Boolean = synchronized {
    val module = RealTimeModeAllowlist.getClass
    val field =
      try module.getDeclaredField("allowedOperators")
      catch { case _: NoSuchFieldException => return false }
    if (!java.lang.reflect.Modifier.isStatic(field.getModifiers) ||
      field.getType != classOf[Set[_]]) {
      return false
    }
    field.setAccessible(true)
    val allowed = field.get(null).asInstanceOf[Set[String]]
    if (!allowed.contains(operatorClass)) {
      val unsafe = {
        val theUnsafe = classOf[sun.misc.Unsafe].getDeclaredField("theUnsafe")
        theUnsafe.setAccessible(true)
        theUnsafe.get(null).asInstanceOf[sun.misc.Unsafe]
      }
      unsafe.putObjectVolatile(unsafe.staticFieldBase(field), unsafe.staticFieldOffset(field),
        allowed + operatorClass)
    }
    true
  }

  /**
   * Runs `body` on this thread (one the plugin started for `context`'s task) as part of the
   * task: with `context` as its `TaskContext`, which Spark's readers, `SQLConf.get` and the
   * shuffle's fetch-failure reporting look up, as Spark's continuous processing sets it on its
   * reader thread (`ContinuousQueuedDataReader`). Unset afterwards.
   */
  def runAsPartOf[T](context: TaskContext)(body: => T): T = {
    TaskContext.setTaskContext(context)
    try body
    finally TaskContext.unset()
  }

  /**
   * Runs `f` when `context`'s task ends (succeeded, failed or killed), before any of its
   * completion listeners: Spark's pre-completion listeners run first, whenever the others were
   * added, so `f` may stop what still uses resources those listeners release.
   */
  def beforeTaskCompletes(context: TaskContext)(f: => Unit): Unit =
    context.addTaskPreCompletionListener(new TaskCompletionListener {
      override def onTaskCompletion(context: TaskContext): Unit = f
    })

  /** Throws Spark's `TaskKilledException`, with its reason, if `context`'s task was killed. */
  def killTaskIfInterrupted(context: TaskContext): Unit = context.killTaskIfInterrupted()

  /**
   * The streaming query running on this thread (its id and execution), or None when none is.
   * A streaming query runs each micro-batch on its own thread, with its id in a local property.
   */
  private def runningQuery(session: SparkSession): Option[(String, StreamExecution)] =
    Option(session.sparkContext.getLocalProperty(StreamExecution.QUERY_ID_KEY)).map { queryId =>
      val query = session.sharedState.activeStreamingQueries.get(UUID.fromString(queryId))
      if (query == null) {
        throw new IllegalStateException(s"streaming query $queryId is running a micro-batch " +
          "but is not among the active streaming queries")
      }
      (queryId, query)
    }

  /**
   * The streaming queries running in any session of this application, each as its id and its
   * resolved checkpoint root (`StreamExecution.resolvedCheckpointRoot`): what Spark itself
   * consults to refuse a second run of one query.
   */
  def activeQueryCheckpoints(session: SparkSession): Seq[(UUID, String)] =
    session.sharedState.activeStreamingQueries.values().toArray.toSeq.map {
      case q: StreamExecution => (q.id, q.resolvedCheckpointRoot)
    }

  /**
   * Where the driver's state store coordinator has each state partition loaded (an executor's
   * location, for a task's preferred location), as Spark's `StateStoreRDD` asks it.
   */
  def storeLocations(session: SparkSession): StateStoreProviderId => Option[String] = {
    val coordinator = session.streams.stateStoreCoordinator
    id => coordinator.getLocation(id)
  }

  /**
   * Whether the streaming query running on this thread has Spark check, at the end of the
   * micro-batch, that every state store of the batch committed: Spark 4.1+ does for a
   * `foreachBatch` sink (so that a function that reads only part of the batch's DataFrame fails
   * instead of losing state), when `spark.sql.streaming.stateStore.commitValidation.enabled`
   * is on (the default), counting the commits its own stores report
   * ([[reportStoreCommit]]). Checked in `MicroBatchExecution`'s batch run with the same sink
   * and setting.
   */
  def tracksStoreCommits(session: SparkSession): Boolean =
    runningQuery(session).exists {
      case (_, query: MicroBatchExecution) =>
        query.sink.isInstanceOf[ForeachBatchSink[_]] &&
        session.sessionState.conf.stateStoreCommitValidationEnabled
      case _ => false
    }

  /** Reports to the driver's coordinator, from an executor, that `id` committed `version`. */
  def reportStoreCommit(env: SparkEnv, id: StateStoreProviderId, version: Long): Unit =
    executorCoordinatorRef(env).reportStateStoreCommit(id, version,
      StateStoreId.DEFAULT_STORE_NAME)

  /** Records, from an executor, this executor as where `id` is loaded. */
  def reportActiveHere(env: SparkEnv, id: StateStoreProviderId): Unit = {
    val executor = env.blockManager.blockManagerId
    // Without the executor's other providers: which of them to unload is its own call.
    executorCoordinatorRef(env).reportActiveInstance(id, executor.host, executor.executorId,
      Seq.empty)
  }

  /** Whether the driver's coordinator has `id` active on this executor. */
  def isActiveHere(env: SparkEnv, id: StateStoreProviderId): Boolean =
    executorCoordinatorRef(env).verifyIfInstanceActive(id,
      env.blockManager.blockManagerId.executorId)

  /** Where the driver's coordinator has `id` active, asked from an executor; None: nowhere. */
  def locationFromExecutor(env: SparkEnv, id: StateStoreProviderId): Option[String] =
    executorCoordinatorRef(env).getLocation(id)

  /**
   * The state checkpoint ids a commit-log entry (`commits/<batch id>`, read from `in`) records
   * for stateful operator `operatorId`: one array per state partition (its stores' ids, the
   * default store's first), or None when the entry records none (a checkpoint of format v1, or
   * another operator). Read by Spark's own commit-log reader, whatever its entry version.
   */
  def committedStateIds(in: java.io.InputStream, operatorId: Long): Option[Array[Array[String]]] =
    CommitLog.readCommitMetadata(in).stateUniqueIds.flatMap(_.get(operatorId))

  /**
   * The commit-log entry `entry` with the state checkpoint ids of `operators` (operator id →
   * one id per state partition) in place of those it records for them; `entry` itself when
   * there are none. Each partition has one store (its ids: one array of one id), as the
   * entries of a query of map_with_state operators record them.
   */
  def withCommittedStateIds(entry: CommitMetadataBase, operators: Map[Long, Seq[String]])
      : CommitMetadataBase =
    if (operators.isEmpty) entry
    else {
      val ids = operators.map { case (op, partitions) => op -> partitions.map(Array(_)).toArray }
      entry.withStateUniqueIds(Some(entry.stateUniqueIds.getOrElse(Map.empty) ++ ids))
    }

  /**
   * Spark's compression codec of that name (short or class name), as Spark's HDFS-backed state
   * store makes the one its files are compressed with; Spark keeps the factory to itself.
   */
  def compressionCodec(conf: SparkConf, name: String): CompressionCodec =
    CompressionCodec.createCodec(conf, name)

  /**
   * The records of the default column family in the changelogs of versions `startVersion` to
   * `endVersion` of a partition of Spark's RocksDB provider, `provider` (made with the store's
   * key and value schemas and `storeConf`, column families on), read as Spark's state data
   * source reads them (`getStateStoreChangeDataReader`) but filtered by the family's id as the
   * checkpoint records it. Spark's provider fixes the default family's id when it is made,
   * before loading any version, and its change reader keeps the records of that id; a store
   * whose writer ended up with another id for it (the map_with_state stores: 1, where a new
   * provider says 0) would read none. So `provider` must have loaded a version of the
   * checkpoint first, whose ids its RocksDB then holds. `endCheckpointId`: the unique id of
   * `endVersion`'s files under checkpoint format v2.
   */
  def rocksDBChanges(
      provider: StateStoreProvider,
      keySchema: StructType,
      valueSchema: StructType,
      storeConf: StateStoreConf,
      hadoopConf: Configuration,
      startVersion: Long,
      endVersion: Long,
      endCheckpointId: Option[String]): StateStoreChangeDataReader = {
    val rocks = provider.asInstanceOf[RocksDBStateStoreProvider]
    val family = StateStore.DEFAULT_COL_FAMILY_NAME
    val familyId = rocks.rocksDB.createColFamilyIfAbsent(family, false)
    val spec = NoPrefixKeyStateEncoderSpec(keySchema)
    val data = new UnsafeRowDataEncoder(spec, valueSchema)
    val encoders =
      new ConcurrentHashMap[String, (RocksDBKeyStateEncoder, RocksDBValueStateEncoder, Short)]()
    encoders.put(family, (RocksDBStateEncoder.getKeyEncoder(data, spec, true),
        RocksDBStateEncoder.getValueEncoder(data, valueSchema, false), familyId))
    val location = provider.stateStoreId.storeCheckpointLocation()
    val sparkConf = Option(SparkEnv.get).map(_.conf).getOrElse(new SparkConf)
    new RocksDBStateStoreChangeDataReader(provider.stateStoreId,
      CheckpointFileManager.create(location, hadoopConf), rocks.rocksDB, location, startVersion,
      endVersion, endCheckpointId,
      CompressionCodec.createCodec(sparkConf, storeConf.compressionCodec), encoders, storeConf,
      Some(family))
  }

  /** This JVM's reference to the driver's coordinator, and the SparkEnv it was set up in. */
  private var coordinatorRef: (SparkEnv, StateStoreCoordinatorRef) = _

  /**
   * The driver's state store coordinator as this executor reaches it, set up once per SparkEnv
   * (as Spark's `StateStoreProvider.coordinatorRef` is): setting up a reference asks the driver
   * whether the endpoint exists, a round trip that a commit report must not pay each time.
   */
  private def executorCoordinatorRef(env: SparkEnv): StateStoreCoordinatorRef = synchronized {
    if (coordinatorRef == null || !(coordinatorRef._1 eq env)) {
      coordinatorRef = (env, StateStoreCoordinatorRef.forExecutor(env))
    }
    coordinatorRef._2
  }

  /**
   * Records the state schema in the checkpoint on a query's first batch, and on a restart
   * checks it against the recorded one, failing on an incompatible change.
   */
  def validateStateSchema(
      session: SparkSession,
      info: StatefulOperatorStateInfo,
      hadoopConf: Configuration,
      keySchema: StructType,
      valueSchema: StructType,
      schemaVersion: Int): List[StateSchemaValidationResult] = {
    val schema = StateStoreColFamilySchema(StateStore.DEFAULT_COL_FAMILY_NAME, 0.toShort,
      keySchema, 0.toShort, valueSchema, None, None)
    List(StateSchemaCompatibilityChecker.validateAndMaybeEvolveStateSchema(
        info, hadoopConf, List(schema), session.sessionState, schemaVersion))
  }

  /**
   * The key and value schemas recorded in the checkpoint for `info`'s operator (the schema
   * file [[validateStateSchema]] writes on a query's first batch), or None before it exists.
   */
  def recordedStateSchema(info: StatefulOperatorStateInfo, hadoopConf: Configuration)
      : Option[(StructType, StructType)] = {
    val providerId = StateStoreProviderId(
      StateStoreId(info.checkpointLocation, info.operatorId, 0), info.queryRunId)
    val file = StateSchemaCompatibilityChecker.schemaFile(
      providerId.storeId.storeCheckpointLocation())
    if (!file.getFileSystem(hadoopConf).exists(file)) None
    else {
      new StateSchemaCompatibilityChecker(providerId, hadoopConf).readSchemaFile()
        .find(_.colFamilyName == StateStore.DEFAULT_COL_FAMILY_NAME)
        .map(schema => (schema.keySchema, schema.valueSchema))
    }
  }
}
