package io.mapwithstate.execution

import scala.jdk.CollectionConverters._

import io.mapwithstate.MapWithStateException
import io.mapwithstate.state.{HeapBudget, StateMap}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeRow}

/**
 * Applies a compiled state function to a [[StateMap]], record by record, with exactly the
 * semantics of Spark's `MapWithStateRDDRecord.updateRecordWithData`:
 *
 *  - a record sees its key's state as it was before the record; `remove` wins over `update`,
 *    a null `update` leaves the state as it was;
 *  - with an idle timeout (`refreshesIdleKeys`), a record refreshes its key's update time even
 *    when it does not update the state (an existing state is put again with the batch time);
 *  - a timing-out key is called once with null values and `is_timing_out` set; `update` and
 *    `remove` are not applied, `emit` is, and then the state is removed.
 *
 * With `timeout_at` timers (`timers`), Spark's GroupState rules instead: the map's time of a
 * key is its timer, re-evaluated on every call (null clears it); a timed-out key's call applies
 * `remove`, `update` and `emit` like a record's, and its state is kept unless removed; a key
 * called for data in a batch is not also timed out in it. As in Spark's
 * `FlatMapGroupsWithStateExec`, a key may keep a timer without a state: a call that removes
 * the state (or never made one) but sets a timer leaves the key holding only the timer, and
 * its timing-out call sees `is_timing_out()` true and `state_exists()` false. A key left with
 * neither is removed (where Spark would keep an empty row with no timer, which no call can
 * ever see again).
 *
 * Times are microseconds (Catalyst's TIMESTAMP). Emitted rows are valid until the next call.
 * A call returns its first emitted row; an `emit` that is an array may emit more, read with
 * [[emittedCount]] and [[emitted]].
 *
 * @param function        the compiled function; also gives a record's key (`function.key`)
 * @param inputWidth      how many columns the input rows have
 * @param timingOutValues the value columns of a timing-out call that are not null: a group
 *                        function's aggregates over no records (ordinal, value)
 * @param heapBudget      checked as writes grow the map (a heap map), or None (a map off the heap)
 * @param callsInitialKeys whether every key of the initial state is called in the first batch,
 *                        with no records if it has none there (a group function: Spark's
 *                        flatMapGroupsWithState calls each key of its initial state in the
 *                        first batch; a DStream's mapWithState only seeds the state with it)
 */
class StateUpdater(
    val map: StateMap,
    function: CompiledStateFunction,
    inputWidth: Int,
    refreshesIdleKeys: Boolean,
    timers: Boolean = false,
    timingOutValues: Seq[(Int, Any)] = Nil,
    heapBudget: Option[HeapBudget] = None,
    callsInitialKeys: Boolean = false) {

  // Null when there is no budget: checked on every write, so no Option on the hot path.
  private val budget: HeapBudget = heapBudget.orNull

  /** The input of a call with no records (see [[noRecordsInput]]). */
  private val noRecordsRow = new GenericInternalRow(inputWidth)

  private val keyOrdinals = function.keyOrdinals
  private val keyTypes = function.keyTypes

  var updatedKeys = 0L
  var removedKeys = 0L
  var timedOutKeys = 0L
  var lateRowsDropped = 0L

  /** The watermark of the batch under way (micros), seen by `watermark()`. */
  private var watermark = TimeoutPolicy.NoWatermark

  /** With timers: the keys called for data in the batch under way, which do not time out in it. */
  private val calledForData = new java.util.HashSet[UnsafeRow]()

  /**
   * With `callsInitialKeys`: the initial state's keys that no record has called yet, until
   * [[initialKeysWithoutRecords]] takes them (null: none to look for).
   */
  private var initialKeysNotCalled: java.util.HashSet[UnsafeRow] = null

  /** Starts a batch whose watermark is `batchWatermark`. */
  def startBatch(batchWatermark: Long): Unit = {
    watermark = batchWatermark
    calledForData.clear()
  }

  /** How many rows the last call emitted (null array elements included). */
  def emittedCount: Int = function.emittedCount

  /** The i-th row the last call emitted, or null (a null array element). */
  def emitted(i: Int): UnsafeRow = function.emitted(i)

  /** Whether the map reads ahead for groups of records (see [[prefetch]]). */
  def prefetches: Boolean = map.prefetches

  private var prefetchHashes = new Array[Int](0)

  /** Has the map read ahead what the lookups of these records' keys will touch. */
  def prefetch(records: Array[InternalRow], count: Int): Unit = {
    if (prefetchHashes.length < count) prefetchHashes = new Array[Int](count)
    var i = 0
    while (i < count) {
      prefetchHashes(i) = function.key(records(i)).hashCode
      i += 1
    }
    map.prefetch(prefetchHashes, count)
  }

  /** Runs one record; returns the first row it emits, or null. */
  def processRecord(record: InternalRow, batchTime: Long): UnsafeRow = {
    val key = function.key(record)
    if (initialKeysNotCalled != null) initialKeysNotCalled.remove(key)
    val before = map.get(key)
    if (timers) return callWithTimers(key, record, before, timingOut = false, batchTime)
    function.setContext(record, before, timingOut = false, batchTime, watermark = watermark)
    val removed = function.shouldRemove()
    val updated = if (removed) null else function.update()
    val after = if (removed) null else if (updated != null) updated else before

    val emitted = function.emit(after)
    writeBack(key, before, removed, updated, batchTime, rewriteKept = refreshesIdleKeys)
    emitted
  }

  /**
   * Applies one call's outcome to the map: a removal, a new state at `time`, or — when
   * `rewriteKept` — the kept state again at `time` (an idle key's refreshed update time, or a
   * changed timer).
   */
  private def writeBack(
      key: UnsafeRow,
      before: UnsafeRow,
      removed: Boolean,
      updated: UnsafeRow,
      time: Long,
      rewriteKept: Boolean): Unit = {
    if (removed) {
      if (before != null) {
        map.remove(key)
        removedKeys += 1
      }
    } else if (updated != null) {
      // In place: `before` has served its last use (emit, before this), and neither it nor
      // anything derived from it outlives the call.
      map.putInPlace(key, updated, time)
      updatedKeys += 1
      if (budget != null) budget.afterWrite(map)
    } else if (before != null && rewriteKept) {
      map.putInPlace(key, before, time)
      if (budget != null) budget.afterWrite(map)
    }
  }

  /**
   * The keys whose time is strictly before `threshold`, with their states (null for a key that
   * holds only a timer); with timers, not those called for data in the batch under way.
   */
  def timingOutKeys(threshold: Long): Iterator[(UnsafeRow, UnsafeRow)] = {
    val expiring = map.expiring(threshold)
    (if (timers) expiring.filterNot(e => calledForData.contains(e.key)) else expiring)
      .map(e => (e.key, e.state))
  }

  /**
   * Runs the timing-out call of one key and returns its first emitted row. An idle key's state
   * is then removed; with timers, the call's `remove`, `update` and `timeout_at` decide.
   */
  def timeOut(key: UnsafeRow, state: UnsafeRow, batchTime: Long): UnsafeRow = {
    val input = noRecordsInput(key)
    timedOutKeys += 1
    if (timers) return callWithTimers(key, input, state, timingOut = true, batchTime)
    function.setContext(input, state, timingOut = true, batchTime, watermark = watermark)
    val emitted = function.emit(null)
    map.remove(key)
    removedKeys += 1
    emitted
  }

  /**
   * The input of a call with no records for `key`: its key columns, the aggregates over no
   * records of a group function, null for every other column. Valid until the next call.
   */
  private def noRecordsInput(key: UnsafeRow): InternalRow = {
    var i = 0
    while (i < inputWidth) { noRecordsRow.setNullAt(i); i += 1 }
    timingOutValues.foreach { case (o, v) => noRecordsRow.update(o, v) }
    keyOrdinals.zipWithIndex.foreach { case (o, k) =>
      noRecordsRow.update(o, key.get(k, keyTypes(k)))
    }
    noRecordsRow
  }

  /**
   * The initial state's keys that no record called in the first batch (with
   * `callsInitialKeys`; else none), each to be called once by [[callWithoutRecords]]. Taken
   * once, at the end of the first batch's records: records after that no longer look for them.
   */
  def initialKeysWithoutRecords(): Iterator[UnsafeRow] = {
    val keys = initialKeysNotCalled
    initialKeysNotCalled = null
    if (keys == null) Iterator.empty else keys.iterator().asScala
  }

  /**
   * Calls the function for `key` as for a group with no records (not timing out): update,
   * remove, emit and timer as for a record; returns the first row it emits, or null.
   */
  def callWithoutRecords(key: UnsafeRow, batchTime: Long): UnsafeRow =
    processRecord(noRecordsInput(key), batchTime)

  /**
   * One call of a function with timers, for a record or a timing-out key: remove, update and
   * emit as for a record, then `timeout_at` (with the state after the call in scope) gives the
   * key's new timer, stored as the key's time; the state is put again whenever either changed.
   */
  private def callWithTimers(
      key: UnsafeRow, input: InternalRow, before: UnsafeRow, timingOut: Boolean, batchTime: Long)
    : UnsafeRow = {
    // A key without a state may still hold a timer.
    val timerBefore = map.getTime(key)
    function.setContext(input, before, timingOut, batchTime, timerBefore, watermark)
    val removed = function.shouldRemove()
    val updated = if (removed) null else function.update()
    val after = if (removed) null else if (updated != null) updated else before
    val emitted = function.emit(after)
    val timer = StateMap.clampTimer(function.timeoutAt(after))
    if (!timingOut) calledForData.add(key.copy())
    if (after == null) writeBackStateless(key, before != null, timerBefore, timer)
    else writeBack(key, before, removed, updated, timer, rewriteKept = timer != timerBefore)
    emitted
  }

  /**
   * The outcome of a call that leaves the key without a state (removed, or never made): the
   * key holds only `timer`, or, without one, leaves the map. Counted as Spark counts it: a
   * key kept for its timer is an updated row, a key dropped a removed one.
   */
  private def writeBackStateless(
      key: UnsafeRow, hadState: Boolean, timerBefore: Long, timer: Long): Unit = {
    if (timer == StateMap.NoTime) {
      if (hadState || timerBefore != StateMap.NoTime) {
        map.remove(key)
        removedKeys += 1
      }
    } else if (hadState || timer != timerBefore) {
      map.putInPlace(key, null, timer)
      updatedKeys += 1
      if (budget != null) budget.afterWrite(map)
    }
  }

  /** Loads one row of initial state: key columns then state fields, in `layout` order. */
  def loadInitialState(key: UnsafeRow, state: UnsafeRow, time: Long): Unit = {
    if (map.get(key) != null) {
      throw MapWithStateException(
        s"initial_state has more than one row for the key ${describe(key)}; each key may have " +
          "one initial state (as Spark says: the initial state provided contained multiple " +
          "rows(state) with the same key. Make sure to de-duplicate the initial state before " +
          "passing it)")
    }
    map.put(key, state, if (timers) StateMap.clampTimer(time) else time)
    if (budget != null) budget.afterWrite(map)
    if (callsInitialKeys) {
      if (initialKeysNotCalled == null) initialKeysNotCalled = new java.util.HashSet[UnsafeRow]()
      initialKeysNotCalled.add(key.copy())
    }
  }

  /** Drops a record that came after the watermark had passed it (event-time timers). */
  def dropLateRow(): Unit = lateRowsDropped += 1

  private def describe(key: UnsafeRow): String =
    keyTypes.indices.map(i => String.valueOf(key.get(i, keyTypes(i)))).mkString("(", ", ", ")")
}
