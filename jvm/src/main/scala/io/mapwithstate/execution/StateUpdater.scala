package io.mapwithstate.execution

import scala.jdk.CollectionConverters._

import io.mapwithstate.MapWithStateException
import io.mapwithstate.plan.FunctionKind
import io.mapwithstate.state.{HeapBudget, StateMap}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, UnsafeRow}

/**
 * Applies a compiled state function to a [[StateMap]], call by call: a record's call, the call
 * of a key without records, a timing-out key's call. What a call does to the state depends on
 * how keys time out, one variant per model, chosen per partition by [[StateUpdater.apply]]:
 *
 *  - [[IdleStateUpdater]]: no timeout, or DStream's idle timeout, with the semantics of
 *    Spark's `MapWithStateRDDRecord.updateRecordWithData` (a timed-out key is removed);
 *  - [[TimerStateUpdater]]: `timeout_at` timers, with the rules of Spark's `GroupState`.
 *
 * This class holds what every variant shares: finding a key's state (read ahead in groups when
 * the map can, see [[prefetch]]), the input of calls without records, the initial state, the
 * counts of what happened, and [[writeBack]], the one place a call's new state reaches the
 * map. In every variant a record sees its key's state as it was before the record; `remove`
 * wins over `update`, and a null `update` leaves the state as it was.
 *
 * Calls without records depend on the function's [[FunctionKind]]: a group function's see its
 * aggregates over no records (`count` 0, `sum` null, ...), and it calls every key of its
 * initial state in the first batch, with no records if it has none there (Spark's
 * flatMapGroupsWithState does); a per-record function's see nulls, and its initial state only
 * seeds the state (DStream's mapWithState does).
 *
 * Times are microseconds (Catalyst's TIMESTAMP). Emitted rows are valid until the next call.
 * A call returns its first emitted row; an `emit` that is an array may emit more, read with
 * [[emittedCount]] and [[emitted]].
 *
 * @param function      the compiled function; also gives a record's key (`function.key`)
 * @param inputWidth    how many columns the input rows have
 * @param kind          per record or per group
 * @param valueOrdinals where the function's value columns are in the input rows
 * @param heapBudget    checked as writes grow the map (a heap map), or None (a map off the heap)
 */
abstract class StateUpdater(
    val map: StateMap,
    protected val function: CompiledStateFunction,
    inputWidth: Int,
    kind: FunctionKind,
    valueOrdinals: Seq[Int],
    heapBudget: Option[HeapBudget]) {

  // Null when there is no budget: checked on every write, so no Option on the hot path.
  private val budget: HeapBudget = heapBudget.orNull

  /**
   * The value columns of a call without records that are not null (ordinal, value), and
   * whether the initial state's keys are called in the first batch.
   */
  private val (noRecordsValues, callsInitialKeys) = kind match {
    case _: FunctionKind.PerRecord => (Seq.empty[(Int, Any)], false)
    case group: FunctionKind.PerGroup =>
      val values = group.values.zipWithIndex.map { case (v, i) =>
        group.emptyInput.get(i, v.dataType)
      }
      (valueOrdinals.zip(values), true)
  }

  /** The input of a call with no records (see [[noRecordsInput]]). */
  private val noRecordsRow = new GenericInternalRow(inputWidth)

  private val keyOrdinals = function.keyOrdinals
  protected val keyTypes = function.keyTypes

  var updatedKeys = 0L
  var removedKeys = 0L
  var timedOutKeys = 0L
  var lateRowsDropped = 0L

  /** The watermark of the batch under way (micros), seen by `watermark()`. */
  protected var watermark: Long = TimeoutPolicy.NoWatermark

  /**
   * With `callsInitialKeys`: the initial state's keys that no record has called yet, until
   * [[initialKeysWithoutRecords]] takes them (null: none to look for).
   */
  private var initialKeysNotCalled: java.util.HashSet[UnsafeRow] = null

  /** Starts a batch whose watermark is `batchWatermark`. */
  def startBatch(batchWatermark: Long): Unit = watermark = batchWatermark

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
  final def processRecord(record: InternalRow, batchTime: Long): UnsafeRow = {
    val key = function.key(record)
    if (initialKeysNotCalled != null) initialKeysNotCalled.remove(key)
    call(key, record, lookUp(record, key), batchTime)
  }

  /**
   * One call for `key` (not timing out) on `input`, a record or the input of a call without
   * records, where `before` is the key's state (or null); returns its first emitted row.
   */
  protected def call(key: UnsafeRow, input: InternalRow, before: UnsafeRow, batchTime: Long)
      : UnsafeRow

  /**
   * Applies one call's outcome to the map: a removal, a new state at `time`, or — when
   * `rewriteKept` — the kept state again at `time` (an idle key's refreshed update time, or a
   * changed timer).
   */
  protected final def writeBack(
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
   * Keeps `key` with no state, holding only `time` (a timer): counted as an updated row, as
   * Spark counts a key kept for its timer.
   */
  protected final def writeTimeOnly(key: UnsafeRow, time: Long): Unit = {
    map.putInPlace(key, null, time)
    updatedKeys += 1
    if (budget != null) budget.afterWrite(map)
  }

  /**
   * The keys whose time is strictly before `threshold`, with their states (null for a key that
   * holds only a timer).
   */
  def timingOutKeys(threshold: Long): Iterator[(UnsafeRow, UnsafeRow)] =
    map.expiring(threshold).map(e => (e.key, e.state))

  /** Runs the timing-out call of one key and returns its first emitted row. */
  final def timeOut(key: UnsafeRow, state: UnsafeRow, batchTime: Long): UnsafeRow = {
    timedOutKeys += 1
    callTimingOut(key, noRecordsInput(key), state, batchTime)
  }

  /** The timing-out call of `key`, whose state is `state` (or null), on `input`. */
  protected def callTimingOut(key: UnsafeRow, input: InternalRow, state: UnsafeRow,
      batchTime: Long): UnsafeRow

  /**
   * The input of a call with no records for `key`: its key columns, the aggregates over no
   * records of a group function, null for every other column. Valid until the next call.
   */
  private def noRecordsInput(key: UnsafeRow): InternalRow = {
    var i = 0
    while (i < inputWidth) { noRecordsRow.setNullAt(i); i += 1 }
    noRecordsValues.foreach { case (o, v) => noRecordsRow.update(o, v) }
    keyOrdinals.zipWithIndex.foreach { case (o, k) =>
      noRecordsRow.update(o, key.get(k, keyTypes(k)))
    }
    noRecordsRow
  }

  /**
   * The initial state's keys that no record called in the first batch (a group function's;
   * else none), each to be called once by [[callWithoutRecords]]. Taken once, at the end of
   * the first batch's records: records after that no longer look for them.
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

  /** Loads one row of initial state: key columns then state fields, in `layout` order. */
  def loadInitialState(key: UnsafeRow, state: UnsafeRow, time: Long): Unit = {
    putInitialState(key, state, initialTime(time))
    if (callsInitialKeys) {
      if (initialKeysNotCalled == null) initialKeysNotCalled = new java.util.HashSet[UnsafeRow]()
      initialKeysNotCalled.add(key.copy())
    }
  }

  /**
   * Loads a key's state read back from an earlier run, `time` as in [[loadInitialState]] (its
   * last update, or with timers its timer). Unlike [[loadInitialState]] the key is not called
   * for it: the earlier run already called it. A null `state`: the key holds only its timer.
   */
  def resumeState(key: UnsafeRow, state: UnsafeRow, time: Long): Unit =
    putInitialState(key, state, initialTime(time))

  private def putInitialState(key: UnsafeRow, state: UnsafeRow, mapTime: Long): Unit = {
    if (map.contains(key)) {
      throw MapWithStateException(io.mapwithstate.ErrorCondition.InitialStateDuplicateKey,
        s"initial_state has more than one row for the key ${describe(key)}; each key may have " +
          "one initial state (as Spark says: the initial state provided contained multiple " +
          "rows(state) with the same key. Make sure to de-duplicate the initial state before " +
          "passing it)")
    }
    map.put(key, state, mapTime)
    if (budget != null) budget.afterWrite(map)
  }

  /** The map's time of an initial-state row given `time`. */
  protected def initialTime(time: Long): Long

  /** Drops a record that came after the watermark had passed it (event-time timers). */
  def dropLateRow(): Unit = lateRowsDropped += 1

  protected final def describe(key: UnsafeRow): String =
    keyTypes.indices.map(i => String.valueOf(key.get(i, keyTypes(i)))).mkString("(", ", ", ")")
}

object StateUpdater {

  /**
   * The updater for `timeouts`' model of expiry, for one partition, whose calls see the time
   * of `clock` (see [[TimerStateUpdater]]'s `dataDefersTimeout`).
   */
  def apply(
      map: StateMap,
      function: CompiledStateFunction,
      inputWidth: Int,
      kind: FunctionKind,
      valueOrdinals: Seq[Int],
      timeouts: TimeoutPolicy,
      heapBudget: Option[HeapBudget] = None,
      clock: BatchClock = BatchClock.OfTimeline): StateUpdater = timeouts match {
    case timers: TimeoutPolicy.Timers =>
      val dataDefersTimeout = clock match {
        case BatchClock.OfTimeline => true
        case _: BatchClock.WallClock => false
      }
      new TimerStateUpdater(map, function, inputWidth, kind, valueOrdinals, timers, heapBudget,
        dataDefersTimeout)
    case TimeoutPolicy.Never | _: TimeoutPolicy.Idle =>
      new IdleStateUpdater(map, function, inputWidth, kind, valueOrdinals, timeouts, heapBudget)
  }
}
