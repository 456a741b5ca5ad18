package org.apache.spark.sql.mapwithstate

import java.util.UUID

import scala.reflect.ClassTag
import org.apache.hadoop.conf.Configuration
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperatorStateInfo
import org.apache.spark.sql.execution.streaming.runtime.{MicroBatchExecution, StreamExecution}
import org.apache.spark.sql.execution.streaming.state.{NoPrefixKeyStateEncoderSpec, StateSchemaCompatibilityChecker, StateSchemaValidationResult, StateStore, StateStoreColFamilySchema, StateStoreOps}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.StructType

/**
 * Everything mapWithState needs from Spark's streaming internals, which have no public hook for
 * a stateful operator from outside Spark. It lives in one place (and in Spark's package, for
 * the `private[sql]` members it uses), so that a Spark upgrade has one file to revisit:
 *
 *  - which micro-batch of which query is being planned, and the state info Spark's
 *    `IncrementalExecution` would have assigned a built-in operator;
 *  - running a function over each partition with a state store of our own provider, without
 *    changing the provider the rest of the session uses;
 *  - checking the state schema against the one recorded in the checkpoint.
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
    val queryId = Option(sc.getLocalProperty(StreamExecution.QUERY_ID_KEY)).getOrElse {
      return None
    }
    val query = session.sharedState.activeStreamingQueries.get(UUID.fromString(queryId))
    if (query == null) {
      throw new IllegalStateException(s"streaming query $queryId is planning a micro-batch " +
        "but is not among the active streaming queries")
    }
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
   * Runs `f` over each partition of `data` with the partition's state store, made by
   * `providerClass` whatever the session's provider is: the store conf comes from a clone of
   * the session state with just that setting (and the provider's `sqlConfs`) changed. Spark's StateStoreRDD loads the store,
   * prefers the executor that has it loaded, and aborts it if the task ends uncommitted.
   */
  def mapPartitionsWithStateStore[T: ClassTag, U: ClassTag](
      data: RDD[T],
      session: SparkSession,
      info: StatefulOperatorStateInfo,
      keySchema: StructType,
      valueSchema: StructType,
      providerClass: String,
      storeOptions: Map[String, String],
      sqlConfs: Map[String, String] = Map.empty,
      useColumnFamilies: Boolean = false)(
      f: (StateStore, Iterator[T]) => Iterator[U]): RDD[U] = {
    val sessionState = session.sessionState.clone(session)
    sessionState.conf.setConfString(SQLConf.STATE_STORE_PROVIDER_CLASS.key, providerClass)
    sqlConfs.foreach { case (k, v) => sessionState.conf.setConfString(k, v) }
    new StateStoreOps(data).mapPartitionsWithStateStore(
      info, keySchema, valueSchema, NoPrefixKeyStateEncoderSpec(keySchema), sessionState,
      Some(session.streams.stateStoreCoordinator), useColumnFamilies, storeOptions, false)(f)
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
