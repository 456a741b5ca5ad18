package io.mapwithstate.execution

import io.mapwithstate.plan.{FunctionKind, InitialStateKind, StateFunction}
import io.mapwithstate.state.{FieldProjections, HeapBudget, StateMap}
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.InternalRow
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
 * @param function       the state function; for state output, without `emit`
 * @param kind           per record or per group: what a call without records sees, and
 *                       whether the initial state's keys are called (see [[StateUpdater]])
 * @param inputWidth     how many columns the operator's input rows have
 * @param keyOrdinals    where the key columns are in the input rows
 * @param valueOrdinals  where the function's value columns are in the input rows
 * @param keyTypes       the key columns' types
 * @param stateRows      for state output (snapshots, the final state), which rows follow batches
 * @param initialState   how the initial state's rows start their keys
 * @param timeouts       which keys time out in which batch, and how ([[StateUpdater.apply]])
 * @param lateRows       where the event time is in the input rows, when the operator drops
 *                       late rows itself
 */
case class PartitionRunner(
    function: StateFunction,
    kind: FunctionKind,
    inputWidth: Int,
    keyOrdinals: Seq[Int],
    valueOrdinals: Seq[Int],
    keyTypes: Seq[DataType],
    stateRows: Option[StateRowsAfterBatch],
    initialState: InitialStateKind,
    timeouts: TimeoutPolicy,
    metrics: PartitionMetrics,
    lateRows: Option[Int] = None) {

  /** Where the function's key and value columns are in the input rows. */
  private val dataOrdinals = keyOrdinals ++ valueOrdinals

  /**
   * The output of one partition.
   *
   * @param initialStateRows initial-state rows (see [[loadInitialState]]), loaded first
   * @param firstBatch   the number, in the query, of the timeline's first batch (from 1)
   * @param heapLimit    the most heap `stateMap` may hold, if it is on the heap
   * @param readAhead    whether records may be read ahead of the one being run, for the map
   *                     to prefetch their keys ([[ReadAheadRecords]]); not where each record's
   *                     output must leave before the next record arrives (Real-Time Mode)
   * @param clock        the time calls see, and when due keys are looked for ([[BatchClock]])
   * @param done         run once the output is exhausted, after the metrics are counted
   */
  def run(
      partition: Int,
      stateMap: StateMap,
      records: Iterator[InternalRow],
      initialStateRows: Iterator[InternalRow],
      timeline: BatchTimeline,
      batchTimeOf: InternalRow => Long,
      firstBatch: Long,
      heapLimit: Option[Long] = None,
      readAhead: Boolean = true,
      clock: BatchClock = BatchClock.OfTimeline)(done: => Unit): Iterator[InternalRow] = {
    val lease = CompiledStateFunctionPool.acquire(function, dataOrdinals, inputWidth,
      keyOrdinals, keyTypes, TaskContext.get())
    val compiled = lease.function
    compiled.initialize(partition)
    if (timeouts != TimeoutPolicy.Never) stateMap.prepareExpiry()
    val updater = StateUpdater(stateMap, compiled, inputWidth, kind, valueOrdinals, timeouts,
      heapLimit.map(new HeapBudget(partition, _)), clock)
    loadInitialState(updater, initialStateRows, timeline.times(0))

    val numOutputRows = metrics.numOutputRows
    val replay = new BatchReplayIterator(records, batchTimeOf, timeline, firstBatch, updater,
      timeouts, stateRows.map(_.open()), () => numOutputRows += 1, lateRows, readAhead, clock)
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
   * Loads initial-state rows: the key columns, the state's fields, then each key's timer and
   * its last update time (TIMESTAMPs, null: none given), and whether it has a state. With
   * timers a key's map time is its timer; without, its last update time when resumed and
   * given, else `time` (the first batch's). A resumed key without a state holds only its
   * timer, as the run that left it kept it (with no timer either, there is nothing to load).
   */
  private def loadInitialState(
      updater: StateUpdater, rows: Iterator[InternalRow], time: Long): Unit = {
    if (!rows.hasNext) return
    val key = FieldProjections.of(keyTypes)
    val state = FieldProjections.of(function.stateType.map(_.dataType), from = keyTypes.size)
    val timerOrdinal = keyTypes.size + function.stateType.length
    val lastUpdatedOrdinal = timerOrdinal + 1
    val hasStateOrdinal = lastUpdatedOrdinal + 1
    def timeAt(ordinal: Int, default: Long)(row: InternalRow): Long =
      if (row.isNullAt(ordinal)) default else row.getLong(ordinal)
    val timeOf: InternalRow => Long = timeouts match {
      case _: TimeoutPolicy.Timers => timeAt(timerOrdinal, StateMap.NoTime)
      case TimeoutPolicy.Never | _: TimeoutPolicy.Idle => timeAt(lastUpdatedOrdinal, time)
    }
    initialState match {
      case InitialStateKind.Seeded =>
        rows.foreach(row => updater.loadInitialState(key(row), state(row), timeOf(row)))
      case InitialStateKind.Resumed =>
        val timerOnly: InternalRow => Long = timeouts match {
          case _: TimeoutPolicy.Timers => timeAt(timerOrdinal, StateMap.NoTime)
          case TimeoutPolicy.Never | _: TimeoutPolicy.Idle => _ => StateMap.NoTime
        }
        rows.foreach { row =>
          if (row.getBoolean(hasStateOrdinal)) {
            updater.resumeState(key(row), state(row), timeOf(row))
          } else {
            val timer = timerOnly(row)
            if (timer != StateMap.NoTime) updater.resumeState(key(row), null, timer)
          }
        }
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
