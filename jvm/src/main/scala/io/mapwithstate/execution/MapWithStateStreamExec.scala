package io.mapwithstate.execution

import java.io.File
import java.util.concurrent.TimeUnit

import scala.util.control.NonFatal

import io.mapwithstate.MapWithStateException
import io.mapwithstate.plan.{MapWithStateOptions, OutputKind, StateFunction}
import io.mapwithstate.state.{DeltaChainStateStore, DeltaChainStateStoreProvider}
import org.apache.hadoop.conf.Configuration
import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BoundReference, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.{Distribution, Partitioning, UnknownPartitioning}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.streaming.operators.stateful.{StatefulOperatorCustomMetric, StatefulOperatorCustomSumMetric, StatefulOperatorPartitioning, StatefulOperatorStateInfo, StateStoreWriter}
import org.apache.spark.sql.execution.streaming.state.{StateSchemaValidationResult, StateStore}
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue
import org.apache.spark.sql.types.StructType

/**
 * mapWithState in a streaming query: each micro-batch is one batch of DStream's mapWithState,
 * with the micro-batch's timestamp as its batch time.
 *
 * Records are clustered by key into the query's state partitions (Spark's stateful
 * distribution, so the partitioning never changes across restarts); each task opens its
 * partition's state store — a [[DeltaChainStateStoreProvider]] version layered over the
 * previous micro-batch's — and runs the micro-batch as a one-batch replay
 * ([[BatchReplayIterator]] over [[StateUpdater]], the semantics of the batch operator): the
 * records, then on every `checkpoint_interval`-th micro-batch (counting the query's batches
 * from the first) the timeout scan, then with snapshot output the whole state. The store is
 * committed when the partition's output is exhausted; Spark aborts it if the task fails.
 *
 * `stateInfo` comes from the running query at planning time (see
 * [[MapWithStateStreamExec.OperatorId]] and `StreamingQueryGlue`); `initialState` is planned
 * only for a query's first batch.
 */
case class MapWithStateStreamExec(
    keys: Seq[Attribute],
    values: Seq[Attribute],
    function: StateFunction,
    options: MapWithStateOptions,
    output: Seq[Attribute],
    stateInfo: Option[StatefulOperatorStateInfo],
    batchTimestampMs: Long,
    terminatingTrigger: Boolean,
    child: SparkPlan,
    initialState: Option[SparkPlan]) extends SparkPlan with StateStoreWriter {
  import MapWithStateStreamExec._

  override def children: Seq[SparkPlan] = child +: initialState.toSeq

  override def shortName: String = "mapWithState"

  private def keySchema: StructType = DataTypeUtils.fromAttributes(keys)

  override def requiredChildDistribution: Seq[Distribution] = {
    def clustered(columns: Seq[Attribute]): Distribution = stateInfo match {
      case Some(info) => StatefulOperatorPartitioning.getCompatibleDistribution(columns, info, conf)
      case None =>
        StatefulOperatorPartitioning.getCompatibleDistribution(columns, conf.numShufflePartitions, conf)
    }
    clustered(keys) +: initialState.toSeq.map(s => clustered(s.output.take(keys.size)))
  }

  override def outputPartitioning: Partitioning =
    UnknownPartitioning(stateInfo.map(_.numPartitions).getOrElse(0))

  override protected def customStatefulOperatorMetrics: Seq[StatefulOperatorCustomMetric] =
    Seq(StatefulOperatorCustomSumMetric(TimedOutKeysMetric, "number of timed-out keys"))

  override def validateAndMaybeEvolveStateSchema(
      hadoopConf: Configuration,
      batchId: Long,
      stateSchemaVersion: Int): List[StateSchemaValidationResult] =
    try {
      StreamingQueryGlue.validateStateSchema(session, getStateInfo, hadoopConf, keySchema,
        function.stateType, stateSchemaVersion)
    } catch {
      case NonFatal(e) =>
        throw new MapWithStateException(
          "map_with_state: the key columns or the state schema differ from those this query's " +
            s"checkpoint (${getStateInfo.checkpointLocation}) was written with: now keys " +
            s"${keySchema.simpleString} and state ${function.stateType.simpleString}; keep them, " +
            s"or start the query on a new checkpoint (${StreamingQueryGlue.describe(e)})", e)
    }

  /**
   * Timeouts fire only in batches, so while keys wait to time out every trigger must run a
   * batch, data or not (as a DStream runs every batch interval); a terminating trigger
   * (AvailableNow, Once) runs the batches its data needs and no more.
   */
  override def shouldRunAnotherBatch(newInputWatermark: Long): Boolean =
    options.timeoutMs.isDefined && !terminatingTrigger &&
      longMetric("numTotalStateRows").value > 0

  override protected def doExecute(): RDD[InternalRow] = {
    val info = getStateInfo
    val batchTime = TimeUnit.MILLISECONDS.toMicros(batchTimestampMs)
    // The replay iterator scans on every n-th batch of its timeline; a micro-batch is a
    // one-batch timeline whose place in the query is its batch id.
    val scansTimeouts = options.timeoutMs.isDefined &&
      (info.storeVersion + 1) % options.checkpointInterval == 0
    val replayOptions =
      options.copy(checkpointInterval = if (scansTimeouts) 1 else Int.MaxValue)

    val input = child.output
    val keyOrdinals = keys.map(k => input.indexWhere(_.exprId == k.exprId))
    val dataOrdinals = (keys ++ values).map(a => input.indexWhere(_.exprId == a.exprId))
    val keyTypes = keys.map(_.dataType)
    // Snapshot output is the state alone: what `emit` would produce is not part of it.
    val fn = options.output match {
      case OutputKind.Snapshots => function.copy(emit = None)
      case OutputKind.Emitted => function
    }
    val stateType = fn.stateType
    val snapshotLayout = output
    val hasTimeout = options.timeoutMs.isDefined
    val failOnceMarker = conf.getConfString(FailTaskOnceConf, "")

    val numOutputRows = longMetric("numOutputRows")
    val numUpdated = longMetric("numUpdatedStateRows")
    val numRemoved = longMetric("numRemovedStateRows")
    val numTimedOut = longMetric(TimedOutKeysMetric)
    val allUpdatesTimeMs = longMetric("allUpdatesTimeMs")
    val commitTimeMs = longMetric("commitTimeMs")

    val data: RDD[(Iterator[InternalRow], Iterator[InternalRow])] = initialState match {
      case Some(init) =>
        child.execute().zipPartitions(init.execute()) { (records, initial) =>
          Iterator.single((records, initial))
        }
      case None =>
        child.execute().mapPartitions(records => Iterator.single((records, Iterator.empty)))
    }

    val storeOptions = Map(
      DeltaChainStateStoreProvider.CheckpointIntervalOption -> options.checkpointInterval.toString)
    StreamingQueryGlue.mapPartitionsWithStateStore(data, session, info, keySchema, stateType,
      classOf[DeltaChainStateStoreProvider].getName, storeOptions) { (store, parts) =>
      val started = System.nanoTime()
      val (records, initial) = parts.next()
      val stateMap = store match {
        case s: DeltaChainStateStore => s.stateMap
        case other => throw new IllegalStateException(
          s"map_with_state needs its own state store, but got ${other.getClass.getName}")
      }
      val compiled = new CompiledStateFunction(fn, dataOrdinals, input.size)
      compiled.initialize(TaskContext.getPartitionId())
      val updater = new StateUpdater(stateMap, compiled, keyOrdinals, keyTypes, input.size,
        hasTimeout)

      PartitionSetup.loadInitialState(updater, initial, keyTypes, stateType, batchTime)
      val snapshot = PartitionSetup.snapshotProjection(replayOptions.output, snapshotLayout)
      val replay = new BatchReplayIterator(failingOnceAfterFirst(records, failOnceMarker),
        _ => batchTime, BatchTimeline.single(batchTime), updater, replayOptions, snapshot,
        () => numOutputRows += 1)

      PartitionSetup.onCompletion(replay) {
        allUpdatesTimeMs += TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started)
        commitTimeMs += timeTakenMs { store.commit() }
        numUpdated += updater.updatedKeys
        numRemoved += updater.removedKeys + updater.timedOutKeys
        numTimedOut += updater.timedOutKeys
        setStoreMetrics(store)
        setOperatorMetrics()
      }
    }
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[SparkPlan]): SparkPlan =
    copy(child = newChildren.head,
      initialState = if (newChildren.size > 1) Some(newChildren(1)) else None)
}

object MapWithStateStreamExec {
  /**
   * The state operator id of map_with_state in a query's checkpoint (`state/1000/...`). Spark
   * numbers its own stateful operators from 0 in plan order, so a fixed id far above them
   * cannot collide and stays the same across restarts; a query holds at most one
   * map_with_state.
   */
  val OperatorId: Long = 1000L

  val TimedOutKeysMetric = "numTimedOutKeys"

  /**
   * Tests only: when set to a file path, the first task (of any query) that reaches its second
   * record creates that file and fails, after its first record changed its state; retried
   * tasks, and every task once the file exists, run normally.
   */
  val FailTaskOnceConf = "spark.mapwithstate.test.failTaskOnceMarker"

  private def failingOnceAfterFirst(records: Iterator[InternalRow], marker: String)
    : Iterator[InternalRow] =
    if (marker.isEmpty) records
    else new Iterator[InternalRow] {
      private var seen = 0
      override def hasNext: Boolean = records.hasNext
      override def next(): InternalRow = {
        if (seen == 1 && new File(marker).createNewFile()) {
          throw new RuntimeException(s"injected failure ($FailTaskOnceConf) in partition " +
            s"${TaskContext.getPartitionId()} after its first record")
        }
        seen += 1
        records.next()
      }
    }
}
