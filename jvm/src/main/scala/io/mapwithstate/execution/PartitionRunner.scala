package io.mapwithstate.execution

import io.mapwithstate.plan.StateFunction
import io.mapwithstate.state.{HeapBudget, StateMap}
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BoundReference, UnsafeProjection}
import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.sql.types.DataType

/**
 * Runs one partition of either mapWithState operator: loads its initial state, then replays
 * its batches ([[BatchReplayIterator]] over a [[StateUpdater]]) against the partition's
 * [[StateMap]], and counts what happened into the operator's metrics when the output is
 * exhausted. The batch and the streaming operator differ only in what they hand [[run]]: where
 * the map comes from (a new one, or the state store's version), which batches run (the
 * replayed timeline, or one micro-batch) and what is done at the end (a store commit).
 *
 * Built on the driver when the operator executes and shipped to its tasks; everything in it is
 * fixed at planning time.
 *
 * @param function       the state function; for snapshot output, without `emit`
 * @param inputWidth     how many columns the operator's input rows have
 * @param keyOrdinals    where the key columns are in the input rows
 * @param dataOrdinals   where the function's key and value columns are in the input rows
 * @param keyTypes       the key columns' types
 * @param snapshotLayout for snapshot output, the output attributes (batch time, keys, state)
 * @param timeouts       which keys time out in which batch
 * @param lateRows       with event-time timers, where the event time is in the input rows
 * @param timingOutValues the value columns of a timing-out call (ordinal, value); others null
 * @param groups         a group function: the initial state's keys are called in the first
 *                       batch, with no records if they have none there
 */
case class PartitionRunner(
    function: StateFunction,
    inputWidth: Int,
    keyOrdinals: Seq[Int],
    dataOrdinals: Seq[Int],
    keyTypes: Seq[DataType],
    snapshotLayout: Option[Seq[Attribute]],
    timeouts: TimeoutPolicy,
    metrics: PartitionMetrics,
    lateRows: Option[Int] = None,
    timingOutValues: Seq[(Int, Any)] = Nil,
    groups: Boolean = false) {

  /**
   * The output of one partition.
   *
   * @param initialState initial-state rows (key columns, then state fields), loaded first with
   *                     the first batch's time as their update time
   * @param firstBatch   the number, in the query, of the timeline's first batch (from 1)
   * @param heapLimit    the most heap `stateMap` may hold, if it is on the heap
   * @param done         run once the output is exhausted, after the metrics are counted
   */
  def run(
      partition: Int,
      stateMap: StateMap,
      records: Iterator[InternalRow],
      initialState: Iterator[InternalRow],
      timeline: BatchTimeline,
      batchTimeOf: InternalRow => Long,
      firstBatch: Long,
      heapLimit: Option[Long] = None)(done: => Unit): Iterator[InternalRow] = {
    val lease = CompiledStateFunctionPool.acquire(function, dataOrdinals, inputWidth,
      keyOrdinals, keyTypes, TaskContext.get())
    val compiled = lease.function
    compiled.initialize(partition)
    if (timeouts != TimeoutPolicy.Never) stateMap.prepareExpiry()
    val updater = new StateUpdater(stateMap, compiled, inputWidth,
      timeouts.refreshesIdleKeys, timeouts.timers, timingOutValues,
      heapLimit.map(new HeapBudget(partition, _)), callsInitialKeys = groups,
      eventTimeTimers = timeouts == TimeoutPolicy.Timers(eventTime = true))
    loadInitialState(updater, initialState, timeline.times(0), timeouts.timers)

    val snapshot = snapshotLayout.map { layout =>
      UnsafeProjection.create(layout.zipWithIndex.map { case (a, i) =>
        BoundReference(i, a.dataType, nullable = true)
      })
    }
    val numOutputRows = metrics.numOutputRows
    val replay = new BatchReplayIterator(records, batchTimeOf, timeline, firstBatch, updater,
      timeouts, snapshot, () => numOutputRows += 1, lateRows)
    PartitionRunner.onCompletion(replay) {
      metrics.numUpdatedStateRows += updater.updatedKeys
      // An idle key's state is removed when it times out: counted as a removal there.
      metrics.numRemovedStateRows += updater.removedKeys
      metrics.numTimedOutKeys += updater.timedOutKeys
      metrics.numLateRowsDropped.foreach(_ += updater.lateRowsDropped)
      done
      // The next partition of the task (if it serves several) runs on the same instance.
      lease.release()
    }
  }

  /**
   * Loads initial-state rows — the key columns, then the state's fields — all at `time`; with
   * timers, each row's time is the timer in its last column (null: none).
   */
  private def loadInitialState(
      updater: StateUpdater, rows: Iterator[InternalRow], time: Long, timers: Boolean): Unit = {
    if (!rows.hasNext) return
    val key = UnsafeProjection.create(keyTypes.zipWithIndex.map { case (t, i) =>
      BoundReference(i, t, nullable = true)
    })
    val state = UnsafeProjection.create(function.stateType.fields.toSeq.zipWithIndex.map {
      case (f, i) => BoundReference(keyTypes.size + i, f.dataType, nullable = true)
    })
    val timerOrdinal = keyTypes.size + function.stateType.length
    rows.foreach { row =>
      val rowTime =
        if (!timers) time
        else if (row.numFields <= timerOrdinal || row.isNullAt(timerOrdinal)) StateMap.NoTime
        else row.getLong(timerOrdinal)
      updater.loadInitialState(key(row), state(row), rowTime)
    }
  }
}

/** The metrics every mapWithState operator counts, under the same names and meanings. */
case class PartitionMetrics(
    numOutputRows: SQLMetric,
    numUpdatedStateRows: SQLMetric,
    numRemovedStateRows: SQLMetric,
    numTimedOutKeys: SQLMetric,
    numLateRowsDropped: Option[SQLMetric] = None)

object PartitionRunner {

  /** `rows`, then `done` once they are exhausted (before hasNext first returns false). */
  def onCompletion(rows: Iterator[InternalRow])(done: => Unit): Iterator[InternalRow] =
    new Iterator[InternalRow] {
      private var completed = false
      override def hasNext: Boolean = {
        val more = rows.hasNext
        if (!more && !completed) {
          completed = true
          done
        }
        more
      }
      override def next(): InternalRow = rows.next()
    }
}
