package io.mapwithstate.execution

import io.mapwithstate.{MapWithStateConf, MapWithStateException}
import io.mapwithstate.plan.{FunctionKind, MapWithStateOptions, OutputKind, StateFunction}
import io.mapwithstate.state.StateBackend
import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Ascending,
  Attribute,
  GenericInternalRow,
  SortOrder,
  UnsafeProjection
}
import org.apache.spark.sql.catalyst.plans.physical.{
  ClusteredDistribution,
  Distribution,
  Partitioning,
  UnknownPartitioning,
  UnspecifiedDistribution
}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.util.collection.OpenHashSet

/**
 * mapWithState over batch input, run on the executors with no Python in the loop.
 *
 * Records are hash-partitioned by key into `numPartitions` (the initial state alike, so each
 * partition loads exactly its keys) and sorted by batch time and `order_by`; each partition
 * then keeps its own [[io.mapwithstate.state.StateMap]] and replays the batches of the query's
 * [[BatchTimeline]] ([[PartitionRunner]]). The timeline is the same for every partition — a
 * partition with no records in a batch still runs it, as timeouts and snapshots depend on it —
 * so it is computed from all records first, and shipped to the tasks once.
 *
 * @param timelineInput where a group function's late rows are dropped before its aggregation
 *                      (event-time timers, [[LateRowFilterExec]]): its records before that
 *                      filter, whose batch times make the timeline, so that a batch whose
 *                      records are all late still runs (as a per-record function's does, and
 *                      a stream's micro-batch of late rows): its timers fire, its snapshots
 *                      are taken
 */
case class MapWithStateExec(
    keys: Seq[Attribute],
    kind: FunctionKind,
    batchTime: Option[Attribute],
    function: StateFunction,
    options: MapWithStateOptions,
    output: Seq[Attribute],
    child: SparkPlan,
    initialState: Option[SparkPlan],
    eventTime: Option[Attribute] = None,
    lateRowsMetric: Option[SQLMetric] = None,
    withinBatchOrder: Seq[SortOrder] = Nil,
    timelineInput: Option[SparkPlan] = None) extends MapWithStateExecBase {

  override def children: Seq[SparkPlan] = child +: (initialState.toSeq ++ timelineInput)

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "numOutputRows" -> SQLMetrics.createMetric(sparkContext, "number of output rows"),
    "numBatches" -> SQLMetrics.createMetric(sparkContext, "number of batches replayed"),
    "numUpdatedStateRows" -> SQLMetrics.createMetric(sparkContext, "number of updated state rows"),
    "numRemovedStateRows" -> SQLMetrics.createMetric(sparkContext, "number of removed state rows"),
    MapWithStateExecBase.TimedOutKeysMetric ->
      SQLMetrics.createMetric(sparkContext, "number of timed-out keys"),
    "numTotalStateRows" -> SQLMetrics.createMetric(sparkContext, "number of total state rows"),
    MapWithStateExecBase.LateRowsMetric -> lateRowsMetric.getOrElse(
      SQLMetrics.createMetric(sparkContext, MapWithStateExecBase.LateRowsDescription)))

  override def requiredChildDistribution: Seq[Distribution] =
    ClusteredDistribution(keys, requiredNumPartitions = Some(options.numPartitions)) +:
      (initialState.toSeq.map { s =>
        ClusteredDistribution(s.output.take(keys.size),
          requiredNumPartitions = Some(options.numPartitions))
      } ++ timelineInput.map(_ => UnspecifiedDistribution))

  /**
   * A key's records in batch order, then in a per-record function's `order_by` with its
   * arrival tiebreaker ([[WithinBatchOrder]]; a group function has one row per key and batch).
   */
  override def requiredChildOrdering: Seq[Seq[SortOrder]] =
    (batchTime.map(SortOrder(_, Ascending)).toSeq ++ withinBatchOrder) +:
      (initialState.toSeq ++ timelineInput).map(_ => Nil)

  override def outputPartitioning: Partitioning = options.outputKind match {
    case OutputKind.FinalWatermark => UnknownPartitioning(1)
    case _ => UnknownPartitioning(options.numPartitions)
  }

  override protected def doExecute(): RDD[InternalRow] = {
    if (options.outputKind == OutputKind.FinalWatermark) return finalWatermark()
    val timeline = withWatermarks(batchTimeline())
    if (timeline.size == 0) return sparkContext.emptyRDD[InternalRow]
    longMetric("numBatches") += timeline.size

    val shippedTimeline = sparkContext.broadcast(timeline)
    val batchTimeOf = batchTimeReader()
    val runner = partitionRunner()
    val backend = StateBackend.of(options.backend, conf)
    val (keySchema, stateType) = (DataTypeUtils.fromAttributes(keys), function.stateType)
    val numTotalStateRows = longMetric("numTotalStateRows")

    recordsAndInitialState().mapPartitions { parts =>
      val (records, initial) = parts.next()
      val stateMap = backend.newBatchMap(keySchema, stateType)
      runner.run(TaskContext.getPartitionId(), stateMap, records, initial, shippedTimeline.value,
        batchTimeOf, firstBatch = 1, backend.heapLimitBytes) {
        numTotalStateRows += stateMap.size
      }
    }
  }

  /**
   * Reads a record's batch time (micros) from the rows of `plan` (the child, or the
   * timeline's input); a record without one is an error.
   */
  private def batchTimeReader(plan: SparkPlan = child): InternalRow => Long = batchTime match {
    case None => _ => 0L // a one-batch timeline has the same time for every record
    case Some(bt) =>
      val ordinal = plan.output.indexWhere(_.exprId == bt.exprId)
      row => {
        if (row.isNullAt(ordinal)) {
          throw MapWithStateException(io.mapwithstate.ErrorCondition.NullBatchTime,
            "batch_time is null in a record; every record needs a time")
        }
        row.getLong(ordinal)
      }
  }

  /**
   * The batches to replay: one now, or those the batch_time column gives, from every record
   * (a group function's before its late rows are dropped: `timelineInput`). The distinct
   * times are merged across partitions with a cap, so a replay over too many batch times
   * fails before the driver ever holds them all.
   */
  private def batchTimeline(): BatchTimeline = batchTime match {
    case None => BatchTimeline.single(System.currentTimeMillis() * 1000L)
    case Some(_) =>
      val maxBatches = MapWithStateConf.maxReplayBatches(conf)
      // With an interval, a batch time per record is only needed for the first and the last.
      val interval = options.batchIntervalMs.map(_ * 1000L)
      val records = timelineInput.getOrElse(child)
      val readTime = batchTimeReader(records)
      val cap: OpenHashSet[Long] => OpenHashSet[Long] = { set =>
        if (interval.isEmpty && set.size > maxBatches) {
          throw MapWithStateException(io.mapwithstate.ErrorCondition.LimitExceeded,
            s"batch_time has more than $maxBatches distinct values; a batch replay runs at " +
              s"most $maxBatches batches: use a coarser batch_time or a batch_interval (or " +
              s"raise ${MapWithStateConf.MaxReplayBatches})")
        }
        set
      }
      val times = records.execute().mapPartitions { rows =>
        val seen = new OpenHashSet[Long]
        var (min, max) = (Long.MaxValue, Long.MinValue)
        rows.foreach { row =>
          val t = readTime(row)
          if (interval.isEmpty) cap(seen).add(t)
          else { min = math.min(min, t); max = math.max(max, t) }
        }
        if (interval.isDefined && min <= max) { seen.add(min); seen.add(max) }
        Iterator.single(cap(seen))
      }.treeAggregate(new OpenHashSet[Long])(
        (acc, set) => { set.iterator.foreach(acc.add); cap(acc) },
        (a, b) => { b.iterator.foreach(a.add); cap(a) })
      BatchTimeline.of(times.iterator.toArray.sorted, interval, maxBatches, options.untilMicros)
  }

  /**
   * With an event-time column on a replay, each batch's watermark, from the largest event time
   * of each batch over all partitions (the watermark is global to the query, as in a stream;
   * a batch at `until` after the records moves it on, see [[BatchTimeline.withWatermarks]]).
   * A group function's input has each key's largest event time of the batch (its late rows
   * already dropped, see [[GroupAggregation]]), which gives the same watermarks.
   */
  private def withWatermarks(timeline: BatchTimeline): BatchTimeline =
    (eventTime, options.watermarkDelayMs, batchTime) match {
      case (Some(et), Some(delayMs), Some(_)) if timeline.size > 0 =>
        val watermarkAt = ReplayWatermarks.of(maxEventTimes(et), delayMs)
        timeline.withWatermarks(timeline.times.map(t => options.watermarkOf(watermarkAt(t))),
          delayMs)
      // One batch without a watermark of its own: a resumed run's, if any.
      case (Some(_), Some(_), None) if options.resumedWatermarkMicros.isDefined =>
        timeline.copy(watermarks =
          Some(Array.fill(timeline.size)(options.watermarkOf(TimeoutPolicy.NoWatermark))))
      case _ => timeline
    }

  /** The largest event time (at `et`) of each batch time, over all partitions. */
  private def maxEventTimes(et: Attribute): Map[Long, Long] =
    ReplayWatermarks.maxEventTimes(child.execute(), batchTimeReader(),
      child.output.indexWhere(_.exprId == et.exprId))

  /**
   * `output="final_watermark"`: one row, the watermark after the replay's last batch — the
   * one the batch after it would have, as a stream going on from the replay would see it (all
   * its event times, a batch at `until`, a resumed run's starting watermark), null without
   * one — which a run resuming the replay's final state starts from. No state function runs.
   */
  private def finalWatermark(): RDD[InternalRow] = {
    val (et, delayMs) = (eventTime, options.watermarkDelayMs) match {
      case (Some(et), Some(delayMs)) => (et, delayMs)
      case _ => throw new IllegalStateException("a final watermark needs an event-time column")
    }
    val afterRecords = ReplayWatermarks.afterLast(maxEventTimes(et), delayMs)
    val watermark = options.watermarkOf(
      batchTimeline().watermarkAfterLast(afterRecords, delayMs))
    val row = new GenericInternalRow(1)
    if (watermark != TimeoutPolicy.NoWatermark) row.setLong(0, watermark) else row.setNullAt(0)
    val unsafe = UnsafeProjection.create(output.map(_.dataType).toArray).apply(row).copy()
    sparkContext.parallelize(Seq[InternalRow](unsafe), 1)
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[SparkPlan]): SparkPlan =
    copy(child = newChildren.head,
      initialState = initialState.map(_ => newChildren(1)),
      timelineInput = timelineInput.map(_ => newChildren.last))
}
