package io.mapwithstate.execution

import scala.jdk.CollectionConverters._

import io.mapwithstate.MapWithStateException
import io.mapwithstate.state.{HeapBudget, StateMap}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeRow}
import org.apache.spark.sql.catalyst.util.DateTimeUtils

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
 * ever see again). A call's timer must be one Spark's `GroupStateImpl` would let it set, or the
 * call fails the query (see [[timerAllowed]]): a timer that is already due is refused rather
 * than fired a batch late.
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
 * @param eventTimeTimers with `timers`: whether they are event-time timers (compared with the
 *                        watermark) rather than processing-time ones (the batch time); decides
 *                        which timers a call may set
 */
class StateUpdater(
    val map: StateMap,
    function: CompiledStateFunction,
    inputWidth: Int,
    refreshesIdleKeys: Boolean,
    timers: Boolean = false,
    timingOutValues: Seq[(Int, Any)] = Nil,
    heapBudget: Option[HeapBudget] = None,
    callsInitialKeys: Boolean = false,
    eventTimeTimers: Boolean = false) {

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

  // The group [[prefetch]] last read ahead for, its keys' hashes, and the position after the
  // last of its records that [[lookUp]] has since been given.
  private var prefetchRecords: Array[InternalRow] = null
  private var prefetchHashes = new Array[Int](0)
  private var prefetchCount = 0
  private var prefetchCursor = 0

  /** Has the map read ahead what the lookups of these records' keys will touch. */
  def prefetch(records: Array[InternalRow], count: Int): Unit = {
    if (prefetchHashes.length < count) prefetchHashes = new Array[Int](count)
    var i = 0
    while (i < count) {
      prefetchHashes(i) = function.key(records(i)).hashCode
      i += 1
    }
    map.prefetch(prefetchHashes, count)
    prefetchRecords = records
    prefetchCount = count
    prefetchCursor = 0
  }

  /**
   * The state of `record`'s key: with the hash [[prefetch]] computed for it when the record is
   * (the very row object) one of the group read ahead, which saves hashing the key twice. The
   * group's records come in order, some possibly skipped (late rows), so the search starts
   * after the last one found; a row that is not in the group (a call without records) leaves
   * the position alone.
   */
  private def lookUp(record: InternalRow, key: UnsafeRow): UnsafeRow = {
    var i = prefetchCursor
    while (i < prefetchCount && !(prefetchRecords(i) eq record)) i += 1
    if (i < prefetchCount) {
      prefetchCursor = i + 1
      map.get(key, prefetchHashes(i))
    } else {
      map.get(key)
    }
  }

  /** Runs one record; returns the first row it emits, or null. */
  def processRecord(record: InternalRow, batchTime: Long): UnsafeRow = {
    val key = function.key(record)
    if (initialKeysNotCalled != null) initialKeysNotCalled.remove(key)
    val before = lookUp(record, key)
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
    val timeoutAt = function.timeoutAt(after)
    if (timeoutAt != StateMap.NoTime && !timerAllowed(timeoutAt, batchTime)) {
      refuseTimer(key, timeoutAt, timingOut, batchTime)
    }
    val timer = StateMap.clampTimer(timeoutAt)
    if (!timingOut) calledForData.add(key.copy())
    if (after == null) writeBackStateless(key, before != null, timerBefore, timer)
    else writeBack(key, before, removed, updated, timer, rewriteKept = timer != timerBefore)
    emitted
  }

  /**
   * Whether a call at `batchTime` may set `timer` (not [[StateMap.NoTime]]: clearing a timer is
   * always allowed), by the rules of Spark's `GroupStateImpl`, which throws for the others:
   *
   *  - event time (`setTimeoutTimestamp`): the timer must be positive (after the epoch) and
   *    not earlier than the batch's watermark; equal is allowed, as it is not due until the
   *    watermark passes it. Without a watermark (a replay's first batch, as Spark's batch
   *    queries without one) only positivity is checked: [[TimeoutPolicy.NoWatermark]] is
   *    Long.MinValue, below every timer, so one compare serves both cases.
   *  - processing time (`setTimeoutDuration(d)`, d > 0, timer = batch time + d): the timer must
   *    be strictly after the batch time of the call (each batch's own time in a replay).
   *
   * Either way a timer the batch's threshold has already passed is refused (and, in processing
   * time, one at the batch time itself: a zero duration), so no key holds a timer that fires a
   * batch late. Initial-state timers are not set by calls (Spark's initial state has none), and
   * are taken as they are.
   */
  private def timerAllowed(timer: Long, batchTime: Long): Boolean =
    if (eventTimeTimers) timer > 0 && timer >= watermark else timer > batchTime

  /**
   * Fails the query for a timer [[timerAllowed]] refuses, with Spark's words for it (its values
   * in milliseconds, as Spark prints them) beside ours naming the key, the timer and what it was
   * compared with, as timestamps.
   */
  private def refuseTimer(key: UnsafeRow, timer: Long, timingOut: Boolean, batchTime: Long)
    : Nothing = {
    val set = s"timeout_at of the key ${describe(key)} is ${instant(timer)} (set by its " +
      (if (timingOut) "timing-out call" else "call") + s" in the batch at ${instant(batchTime)})"
    val clear = "or to null to clear the timer."
    throw MapWithStateException(io.mapwithstate.ErrorCondition.TimerAlreadyDue,
      if (!eventTimeTimers) {
        s"$set, not after that batch time: a processing-time timer must be later than " +
          "batch_time() (as Spark says: Timeout duration must be positive). Set timeout_at " +
          s"to batch_time() plus a positive interval, $clear"
      } else if (timer <= 0) {
        s"$set, not after 1970-01-01T00:00:00Z: an event-time timer must be after the epoch " +
          s"(as Spark says: Timeout timestamp must be positive). Set a later timeout_at, $clear"
      } else {
        s"$set, earlier than the batch's watermark ${instant(watermark)}: it would already be " +
          s"due (as Spark says: Timeout timestamp (${Math.floorDiv(timer, 1000L)}) cannot be " +
          s"earlier than the current watermark (${Math.floorDiv(watermark, 1000L)})). Set " +
          s"timeout_at to watermark() or later, $clear"
      })
  }

  /** A time in microseconds as an ISO-8601 instant (UTC), as a message shows it. */
  private def instant(micros: Long): String = DateTimeUtils.microsToInstant(micros).toString

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
      throw MapWithStateException(io.mapwithstate.ErrorCondition.InitialStateDuplicateKey,
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
