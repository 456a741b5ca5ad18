package org.apache.spark.sql.mapwithstate

import java.util.UUID

import org.apache.hadoop.conf.Configuration
import org.apache.spark.{SparkConf, SparkEnv}
import org.apache.spark.io.CompressionCodec
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperatorStateInfo
import org.apache.spark.sql.execution.streaming.runtime.{MicroBatchExecution, StreamExecution}
import org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink
import org.apache.spark.sql.execution.streaming.state.{
  StateSchemaCompatibilityChecker,
  StateSchemaValidationResult,
  StateStore,
  StateStoreColFamilySchema,
  StateStoreCoordinatorRef,
  StateStoreId,
  StateStoreProviderId
}
import org.apache.spark.sql.types.StructType

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
 *  - checking the state schema against the one recorded in the checkpoint;
 *  - Spark's compression codecs by name, for the state files;
 *  - the queries running in the application, for `repartition_state` to refuse their
 *    checkpoints.
 */
object StreamingQueryGlue {

  /** The micro-batch being planned on this thread: its state info and times. */
  case class PlannedMicroBatch(
      stateInfo: StatefulOperatorStateInfo,
      batchTimestampMs: Long,
      terminatingTrigger: Boolean,
      batchWatermarkMs: Long)

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
        execution.isTerminatingTrigger, execution.offsetSeqMetadata.batchWatermarkMs))
  }

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
   * Spark's compression codec of that name (short or class name), as Spark's HDFS-backed state
   * store makes the one its files are compressed with; Spark keeps the factory to itself.
   */
  def compressionCodec(conf: SparkConf, name: String): CompressionCodec =
    CompressionCodec.createCodec(conf, name)

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
}
