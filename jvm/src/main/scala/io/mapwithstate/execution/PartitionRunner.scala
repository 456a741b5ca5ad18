package io.mapwithstate.execution

import io.mapwithstate.plan.StateFunction
import io.mapwithstate.state.{HeapBudget, StateMap}
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
 */
case class PartitionRunner(
    function: StateFunction,
    inputWidth: Int,
    keyOrdinals: Seq[Int],
    dataOrdinals: Seq[Int],
    keyTypes: Seq[DataType],
    snapshotLayout: Option[Seq[Attribute]],
    timeouts: TimeoutPolicy,
    metrics: PartitionMetrics) {

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
    val compiled = new CompiledStateFunction(function, dataOrdinals, inputWidth)
    compiled.initialize(partition)
    val updater = new StateUpdater(stateMap, compiled, keyOrdinals, keyTypes, inputWidth,
      timeouts.refreshesIdleKeys, heapLimit.map(new HeapBudget(partition, _)))
    loadInitialState(updater, initialState, timeline.times(0))

    val snapshot = snapshotLayout.map { layout =>
      UnsafeProjection.create(layout.zipWithIndex.map { case (a, i) =>
        BoundReference(i, a.dataType, nullable = true)
      })
    }
    val numOutputRows = metrics.numOutputRows
    val replay = new BatchReplayIterator(records, batchTimeOf, timeline, firstBatch, updater,
      timeouts, snapshot, () => numOutputRows += 1)
    PartitionRunner.onCompletion(replay) {
      metrics.numUpdatedStateRows += updater.updatedKeys
      // A timed-out key's state is removed too: both operators count it as a removal.
      metrics.numRemovedStateRows += updater.removedKeys + updater.timedOutKeys
      metrics.numTimedOutKeys += updater.timedOutKeys
      done
    }
  }

  /** Loads initial-state rows — the key columns, then the state's fields — all at `time`. */
  private def loadInitialState(updater: StateUpdater, rows: Iterator[InternalRow], time: Long)
    : Unit = {
    if (!rows.hasNext) return
    val key = UnsafeProjection.create(keyTypes.zipWithIndex.map { case (t, i) =>
      BoundReference(i, t, nullable = true)
    })
    val state = UnsafeProjection.create(function.stateType.fields.toSeq.zipWithIndex.map {
      case (f, i) => BoundReference(keyTypes.size + i, f.dataType, nullable = true)
    })
    rows.foreach(row => updater.loadInitialState(key(row), state(row), time))
  }
}

/** The metrics every mapWithState operator counts, under the same names and meanings. */
case class PartitionMetrics(
    numOutputRows: SQLMetric,
    numUpdatedStateRows: SQLMetric,
    numRemovedStateRows: SQLMetric,
    numTimedOutKeys: SQLMetric)

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
