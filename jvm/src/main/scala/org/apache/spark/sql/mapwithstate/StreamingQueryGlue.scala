package org.apache.spark.sql.mapwithstate

import java.util.UUID

import scala.jdk.CollectionConverters._
import scala.reflect.ClassTag

import io.mapwithstate.state.{DeferredCloses, DeltaChainStateStoreProvider, ExecutorStateProviders, StoreCoordinator}
import org.apache.hadoop.conf.Configuration
import org.apache.spark.{NarrowDependency, Partition, SparkConf, SparkContext, SparkEnv, TaskContext}
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.io.CompressionCodec
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperatorStateInfo
import org.apache.spark.sql.execution.streaming.runtime.{MicroBatchExecution, StreamExecution}
import org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink
import org.apache.spark.sql.execution.streaming.state.{NoPrefixKeyStateEncoderSpec, StateSchemaCompatibilityChecker, StateSchemaValidationResult, StateStore, StateStoreColFamilySchema, StateStoreConf, StateStoreCoordinatorRef, StateStoreId, StateStoreProvider, StateStoreProviderId}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.StructType
import org.apache.spark.util.{CompletionIterator, SerializableConfiguration}

/**
 * Everything mapWithState needs from Spark's streaming internals, which have no public hook for
 * a stateful operator from outside Spark. It lives in one place (and in Spark's package, for
 * the `private[sql]` members it uses), so that a Spark upgrade has one file to revisit:
 *
 *  - which micro-batch of which query is being planned, and the state info Spark's
 *    `IncrementalExecution` would have assigned a built-in operator;
 *  - running a function over each partition with a state store of our own provider, without
 *    changing the provider the rest of the session uses (Spark's `StateStoreRDD`, with the
 *    Hadoop configuration broadcast once per query run), and the state store coordinator as
 *    an executor reaches it (including the commits Spark counts for a `foreachBatch` sink);
 *  - checking the state schema against the one recorded in the checkpoint;
 *  - Spark's compression codecs by name, for the state files.
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
   * Whether the streaming query running on this thread has Spark check, at the end of the
   * micro-batch, that every state store of the batch committed: Spark 4.1+ does for a
   * `foreachBatch` sink (so that a function that reads only part of the batch's DataFrame fails
   * instead of losing state), when `spark.sql.streaming.stateStore.commitValidation.enabled`
   * is on (the default), counting the commits its own stores report. Checked in
   * `MicroBatchExecution`'s batch run with the same sink and setting.
   */
  private def tracksStoreCommits(session: SparkSession): Boolean =
    runningQuery(session).exists {
      case (_, query: MicroBatchExecution) =>
        query.sink.isInstanceOf[ForeachBatchSink[_]] &&
          session.sessionState.conf.stateStoreCommitValidationEnabled
      case _ => false
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
   * Runs `f` over each partition of `data` with the partition's state store, made by
   * `providerClass` whatever the session's provider is: the store conf comes from a copy of
   * the session's SQL conf with just that setting (and the provider's `sqlConfs`) changed. As
   * Spark's `StateStoreRDD` does, a task loads its store (with `StateStore.get`, or for the heap
   * state from [[ExecutorStateProviders]]), prefers the executor the coordinator says has it
   * loaded, aborts it if the task ends uncommitted, and unloads it after the task when the
   * store conf says so; see [[StoreTaskRDD]] for the differences. A task serves the partitions
   * of one of `groups` ([[io.mapwithstate.execution.StateTaskGroups]]) one after another, each
   * with its own store; `f` learns a partition from its store's id.
   */
  def mapPartitionsWithStateStore[T: ClassTag, U: ClassTag](
      data: RDD[T],
      session: SparkSession,
      info: StatefulOperatorStateInfo,
      keySchema: StructType,
      valueSchema: StructType,
      providerClass: String,
      storeOptions: Map[String, String],
      sqlConfs: Map[String, String],
      useColumnFamilies: Boolean,
      groups: Array[Array[Int]])(
      f: (StateStore, Iterator[T]) => Iterator[U]): RDD[U] = {
    // A copy of the session's conf: a cloned SessionState shares its session's SQLConf (Spark
    // 4.3's BaseSessionStateBuilder), so setting the provider there would hand it to every
    // stateful operator planned after this one in the micro-batch (a streaming aggregation
    // over our rows would keep its state in our store).
    val storeSqlConf = session.sessionState.conf.clone()
    storeSqlConf.setConfString(SQLConf.STATE_STORE_PROVIDER_CLASS.key, providerClass)
    sqlConfs.foreach { case (k, v) => storeSqlConf.setConfString(k, v) }
    val sc = data.sparkContext
    require(groups.flatten.sameElements(data.partitions.indices), s"state task groups " +
      s"${groups.map(_.mkString("[", ",", "]")).mkString} do not cover ${data.partitions.length} " +
      "partitions in order")
    // `f` is not run through `sc.clean`, as Spark's `StateStoreRDD` does with its function: our
    // one caller's function is a compiled lambda with nothing for the cleaner to null out, and
    // the cleaner's check (reading class files with ASM, then serializing the function and the
    // operator it captures) took ~3-4 ms of every micro-batch on the stream execution thread
    // (async-profiler, S1), before the batch's job could start. Serializing the stage's tasks
    // still fails clearly on anything unserializable.
    new StoreTaskRDD(data, groups, f, info, keySchema, valueSchema, useColumnFamilies,
      tracksStoreCommits(session),
      new StateStoreConf(storeSqlConf, storeOptions),
      HadoopConfBroadcasts.of(sc, info.queryRunId, session.sessionState.newHadoopConf()),
      Some(session.streams.stateStoreCoordinator))
  }

  /**
   * Spark's `StateStoreRDD` (its `compute` and locality) for a store of our operator, except
   * that the Hadoop configuration the stores are opened with comes as a broadcast made once
   * per query run ([[HadoopConfBroadcasts]]) rather than once per micro-batch. Serializing and
   * broadcasting that configuration (~40 KiB) was ~10 ms of every S1 micro-batch on the
   * driver, before the batch's job could start (async-profiler, wall clock, on the stream
   * execution thread), and each batch's tasks then read a new broadcast.
   *
   * Unlike Spark's, a task may serve several state partitions (its [[StoreTaskPartition]]'s
   * members, read through a narrow dependency as Spark's `CoalescedRDD` reads its parents'):
   * each member's store is opened once the previous member's output is exhausted, which is when
   * `f`'s output commits it; the commit's delta file is made durable in the background
   * ([[io.mapwithstate.state.DeferredCloses]]) while the next member runs (the last member's in
   * place), and the task's output ends once every member's delta is durable. It never looks for
   * a read store opened earlier in the task (Spark's `StateStoreThreadLocalTracker`): each
   * member opens exactly one store. And a store of the heap state's provider comes from
   * [[ExecutorStateProviders]], which keeps its providers loaded as `StateStore` does but reports
   * them to the coordinator once per load (and again from maintenance when needed), without the
   * task waiting.
   */
  private class StoreTaskRDD[T: ClassTag, U: ClassTag](
      data: RDD[T],
      groups: Array[Array[Int]],
      f: (StateStore, Iterator[T]) => Iterator[U],
      info: StatefulOperatorStateInfo,
      keySchema: StructType,
      valueSchema: StructType,
      useColumnFamilies: Boolean,
      reportCommits: Boolean,
      storeConf: StateStoreConf,
      hadoopConf: Broadcast[SerializableConfiguration],
      @transient coordinator: Option[StateStoreCoordinatorRef])
    extends RDD[U](data.context, Seq(new NarrowDependency[T](data) {
      override def getParents(partitionId: Int): Seq[Int] = groups(partitionId).toSeq
    })) {

    private def providerId(partition: Partition): StateStoreProviderId = StateStoreProviderId(
      StateStoreId(info.checkpointLocation, info.operatorId, partition.index), info.queryRunId)

    override protected def getPartitions: Array[Partition] = {
      val parents = firstParent[T].partitions
      groups.zipWithIndex.map { case (members, i) =>
        StoreTaskPartition(i, members.map(parents(_))): Partition
      }
    }

    override def getPreferredLocations(partition: Partition): Seq[String] =
      partition.asInstanceOf[StoreTaskPartition].members.iterator
        .flatMap(m => coordinator.flatMap(_.getLocation(providerId(m))))
        .take(1).toSeq

    override def compute(partition: Partition, context: TaskContext): Iterator[U] =
      partition.asInstanceOf[StoreTaskPartition].members match {
        case Array(member) => computeMember(member, context)
        case members =>
          // Each member's delta is made durable (fsync, rename) while the next member's records
          // run; the output ends, and so can count, only once every one of them is durable. A
          // task that fails or stops early still waits for them, and fails if one failed.
          // The last member has nothing to go on to: its commit closes its delta in place, on
          // the task's thread, rather than handing the close to another thread and waiting for
          // it (in S1 that handoff was a wake-up and a second wait for a CPU per task).
          val closes = DeferredCloses.begin()
          context.addTaskCompletionListener[Unit] { _ =>
            DeferredCloses.end(closes)
            closes.awaitAll()
          }
          val last = members.last
          CompletionIterator[U, Iterator[U]](
            members.iterator.flatMap { member =>
              if (member eq last) DeferredCloses.end(closes)
              computeMember(member, context)
            }, closes.awaitAll())
      }

    /** `f` over one state partition's input, with its store. */
    private def computeMember(partition: Partition, context: TaskContext): Iterator[U] = {
      val id = providerId(partition)
      val input = firstParent[T].iterator(partition, context)
      val ckptId = info.stateStoreCkptIds.map(_(partition.index).head)
      val ours = storeConf.providerClass == classOf[DeltaChainStateStoreProvider].getName
      val store = if (ours) {
        ExecutorStateProviders.get(id, SparkEnv.get, storeCoordinator,
            storeConf.maintenanceInterval) {
          StateStoreProvider.createAndInit(id, keySchema, valueSchema,
            NoPrefixKeyStateEncoderSpec(keySchema), useColumnFamilies, storeConf,
            hadoopConf.value.value, useMultipleValuesPerKey = false, None)
        }.getStore(info.storeVersion, ckptId)
      } else {
        StateStore.get(id, keySchema, valueSchema, NoPrefixKeyStateEncoderSpec(keySchema),
          info.storeVersion, ckptId, info.stateSchemaMetadata, useColumnFamilies, storeConf,
          hadoopConf.value.value, useMultipleValuesPerKey = false)
      }
      // Completion listeners run last-registered first: the abort, then the unload.
      if (storeConf.unloadOnCommit) {
        context.addTaskCompletionListener[Unit] { _ =>
          if (ours) ExecutorStateProviders.doMaintenanceAndUnload(id)
          else StateStore.doMaintenanceAndUnload(id)
        }
      }
      context.addTaskCompletionListener[Unit](_ => if (!store.hasCommitted) store.abort())
      val output = f(store, input)
      // Our heap stores do not report their commits to the coordinator as Spark's do; when
      // Spark counts them, each partition's commit is reported once its output is done (a
      // RocksDB store may report too: the coordinator counts a partition once).
      if (!reportCommits) output else CompletionIterator[U, Iterator[U]](output,
        if (store.hasCommitted) {
          executorCoordinatorRef(SparkEnv.get).reportStateStoreCommit(id, info.storeVersion + 1, StateStoreId.DEFAULT_STORE_NAME)
        })
    }
  }

  /** A task of [[StoreTaskRDD]]: the input partitions (state partitions) it serves, in order. */
  private case class StoreTaskPartition(index: Int, members: Array[Partition]) extends Partition

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
   * The driver's state store coordinator, as Spark's `StateStore` reaches it from an executor,
   * for the heap state's own registry of loaded providers ([[ExecutorStateProviders]]).
   */
  private def storeCoordinator(env: SparkEnv): StoreCoordinator = {
    val ref = executorCoordinatorRef(env)
    val executor = env.blockManager.blockManagerId
    new StoreCoordinator {
      // Without the executor's other providers: which of them to unload is maintenance's call.
      override def reportActive(id: StateStoreProviderId): Unit =
        ref.reportActiveInstance(id, executor.host, executor.executorId, Seq.empty)

      override def whereActive(id: StateStoreProviderId): StoreCoordinator.Where =
        if (ref.verifyIfInstanceActive(id, executor.executorId)) StoreCoordinator.Here
        else if (ref.getLocation(id).isDefined) StoreCoordinator.Elsewhere
        else StoreCoordinator.Nowhere
    }
  }

  /**
   * The Hadoop configuration of each recent query run's stores, broadcast once: a query run's
   * session, and so its configuration, is fixed when the run starts, but a micro-batch that
   * finds it changed (compared entry by entry, which costs far less than a broadcast) gets a
   * new broadcast. A broadcast dropped from here is cleaned by Spark once no RDD holds it.
   */
  object HadoopConfBroadcasts {
    private val MaxRuns = 16

    private case class Entry(
        context: SparkContext,
        entries: Map[String, String],
        broadcast: Broadcast[SerializableConfiguration])

    private val byRun = new java.util.LinkedHashMap[UUID, Entry](16, 0.75f, true) {
      override def removeEldestEntry(eldest: java.util.Map.Entry[UUID, Entry]): Boolean =
        size > MaxRuns
    }

    @volatile private var made = 0L

    /** How many broadcasts this JVM has made (for tests). */
    def broadcasts: Long = made

    def of(
        sc: SparkContext,
        run: UUID,
        conf: Configuration): Broadcast[SerializableConfiguration] = {
      val entries = conf.iterator().asScala.map(e => e.getKey -> e.getValue).toMap
      byRun.synchronized {
        val known = byRun.get(run)
        if (known != null && (known.context eq sc) && known.entries == entries) {
          known.broadcast
        } else {
          val broadcast = SerializableConfiguration.broadcast(sc, conf)
          made += 1
          byRun.put(run, Entry(sc, entries, broadcast))
          broadcast
        }
      }
    }
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
