package io.mapwithstate.execution

import io.mapwithstate.MapWithStateException
import io.mapwithstate.plan.{MapWithStateOptions, OutputKind, StateFunction}
import io.mapwithstate.state.StateMap
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Ascending, Attribute, BoundReference, SortOrder, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.{ClusteredDistribution, Distribution, Partitioning, UnknownPartitioning}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.types.{StructType, TimestampType}
import org.apache.spark.util.collection.OpenHashSet

/**
 * mapWithState over batch input, run on the executors with no Python in the loop.
 *
 * Records are hash-partitioned by key into `numPartitions` (the initial state alike, so each
 * partition loads exactly its keys) and sorted by batch time and `order_by`; each partition
 * then keeps its own [[StateMap]] and replays the batches of the query's [[BatchTimeline]]
 * through the compiled state function ([[BatchReplayIterator]]). The timeline is the same for
 * every partition — a partition with no records in a batch still runs it, as timeouts and
 * snapshots depend on it — so it is computed from all records first.
 */
case class MapWithStateExec(
    keys: Seq[Attribute],
    values: Seq[Attribute],
    batchTime: Option[Attribute],
    orderBy: Seq[SortOrder],
    function: StateFunction,
    options: MapWithStateOptions,
    output: Seq[Attribute],
    child: SparkPlan,
    initialState: Option[SparkPlan]) extends SparkPlan {

  override def children: Seq[SparkPlan] = child +: initialState.toSeq

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "numOutputRows" -> SQLMetrics.createMetric(sparkContext, "number of output rows"),
    "numBatches" -> SQLMetrics.createMetric(sparkContext, "number of batches replayed"),
    "numUpdatedStateRows" -> SQLMetrics.createMetric(sparkContext, "number of state updates"),
    "numRemovedStateRows" -> SQLMetrics.createMetric(sparkContext, "number of state removals"),
    "numTimedOutKeys" -> SQLMetrics.createMetric(sparkContext, "number of timed-out keys"),
    "numStateRows" -> SQLMetrics.createMetric(sparkContext, "number of state rows at the end"))

  override def requiredChildDistribution: Seq[Distribution] =
    ClusteredDistribution(keys, requiredNumPartitions = Some(options.numPartitions)) +:
      initialState.toSeq.map { s =>
        ClusteredDistribution(s.output.take(keys.size),
          requiredNumPartitions = Some(options.numPartitions))
      }

  override def requiredChildOrdering: Seq[Seq[SortOrder]] =
    (batchTime.map(SortOrder(_, Ascending)).toSeq ++ orderBy) +: initialState.toSeq.map(_ => Nil)

  override def outputPartitioning: Partitioning = UnknownPartitioning(options.numPartitions)

  override protected def doExecute(): RDD[InternalRow] = {
    val timeline = batchTimeline()
    if (timeline.size == 0) return sparkContext.emptyRDD[InternalRow]
    longMetric("numBatches") += timeline.size

    val input = child.output
    val keyOrdinals = keys.map(k => input.indexWhere(_.exprId == k.exprId))
    val dataOrdinals = (keys ++ values).map(a => input.indexWhere(_.exprId == a.exprId))
    val keyTypes = keys.map(_.dataType)
    val batchTimeOrdinal = batchTime.map(bt => input.indexWhere(_.exprId == bt.exprId)).getOrElse(-1)
    // Snapshot output shows the state only: what the function would emit is not computed.
    val fn = if (options.output == OutputKind.Snapshots) function.copy(emit = None) else function
    val opts = options
    val stateFields = fn.stateType.length
    val numOutputRows = longMetric("numOutputRows")
    val numUpdated = longMetric("numUpdatedStateRows")
    val numRemoved = longMetric("numRemovedStateRows")
    val numTimedOut = longMetric("numTimedOutKeys")
    val numStateRows = longMetric("numStateRows")
    val snapshotLayout = output

    def run(partition: Int, records: Iterator[InternalRow], initial: Iterator[InternalRow])
      : Iterator[InternalRow] = {
      val stateMap = StateMap.empty(keys.size, stateFields)
      val compiled = new CompiledStateFunction(fn, dataOrdinals, input.size)
      compiled.initialize(partition)
      val updater = new StateUpdater(stateMap, compiled, keyOrdinals, keyTypes, input.size,
        opts.timeoutMs.isDefined)

      PartitionSetup.loadInitialState(updater, initial, keyTypes, fn.stateType, timeline.times(0))
      val snapshot = PartitionSetup.snapshotProjection(opts.output, snapshotLayout)
      val batchTimeOf: InternalRow => Long =
        if (batchTimeOrdinal < 0) _ => timeline.times(0)
        else row => {
          if (row.isNullAt(batchTimeOrdinal)) {
            throw MapWithStateException("batch_time is null in a record; every record needs a time")
          }
          row.getLong(batchTimeOrdinal)
        }
      val replay = new BatchReplayIterator(records, batchTimeOf, timeline, updater, opts, snapshot,
        () => numOutputRows += 1)
      PartitionSetup.onCompletion(replay) {
        numUpdated += updater.updatedKeys
        numRemoved += updater.removedKeys
        numTimedOut += updater.timedOutKeys
        numStateRows += stateMap.size
      }
    }

    initialState match {
      case Some(init) =>
        child.execute().zipPartitions(init.execute()) { (records, initial) =>
          run(org.apache.spark.TaskContext.getPartitionId(), records, initial)
        }
      case None =>
        child.execute().mapPartitionsWithIndex { (partition, records) =>
          run(partition, records, Iterator.empty)
        }
    }
  }

  /** The batches to replay: one now, or those the batch_time column gives, from every record. */
  private def batchTimeline(): BatchTimeline = batchTime match {
    case None => BatchTimeline.single(System.currentTimeMillis() * 1000L)
    case Some(bt) =>
      val ordinal = child.output.indexWhere(_.exprId == bt.exprId)
      val times = child.execute().mapPartitions { rows =>
        val seen = new OpenHashSet[Long]
        rows.foreach { row =>
          if (row.isNullAt(ordinal)) {
            throw MapWithStateException("batch_time is null in a record; every record needs a time")
          }
          seen.add(row.getLong(ordinal))
        }
        seen.iterator
      }.collect().distinct.sorted
      BatchTimeline.of(times, options.batchIntervalMs.map(_ * 1000L))
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[SparkPlan]): SparkPlan =
    copy(child = newChildren.head,
      initialState = if (newChildren.size > 1) Some(newChildren(1)) else None)
}
