package io.mapwithstate.execution

import io.mapwithstate.MapWithStateException
import io.mapwithstate.plan.FunctionKind
import io.mapwithstate.state.{HeapBudget, StateMap}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.catalyst.util.DateTimeUtils

/**
 * The [[StateUpdater]] of a function with `timeout_at` timers ([[TimeoutPolicy.Timers]]), with
 * the rules of Spark's GroupState: the map's time of a key is its timer, re-evaluated on every
 * call (null clears it); a timed-out key's call applies `remove`, `update` and `emit` like a
 * record's, and its state is kept unless removed; a key called for data in a batch is not also
 * timed out in it.
 *
 * As in Spark's `FlatMapGroupsWithStateExec`, a key may keep a timer without a state: a call
 * that removes the state (or never made one) but sets a timer leaves the key holding only the
 * timer, and its timing-out call sees `is_timing_out()` true and `state_exists()` false. A key
 * left with neither is removed (where Spark would keep an empty row with no timer, which no
 * call can ever see again). A call's timer must be one Spark's `GroupStateImpl` would let it
 * set, or the call fails the query (see [[timerAllowed]]): a timer that is already due is
 * refused rather than fired a batch late.
 *
 * In a real-time batch ([[BatchClock.WallClock]]) each call sees the clock read for it, so a
 * timer set by a record's call is later than that call, and falls due by the clock whatever
 * the batch: there `dataDefersTimeout` is off, and a key called for data earlier in the long
 * batch still times out in it once its timer passes.
 *
 * @param timers the timers' domain: event time (compared with the watermark) or processing
 *               time (the batch time); decides which timers a call may set
 * @param dataDefersTimeout whether a key called for data in a batch is not timed out in it
 *               (Spark's rule for a batch whose calls all see one time)
 */
final class TimerStateUpdater(
    map: StateMap,
    function: CompiledStateFunction,
    inputWidth: Int,
    kind: FunctionKind,
    valueOrdinals: Seq[Int],
    timers: TimeoutPolicy.Timers,
    heapBudget: Option[HeapBudget] = None,
    dataDefersTimeout: Boolean = true)
  extends StateUpdater(map, function, inputWidth, kind, valueOrdinals, heapBudget) {

  private val eventTime = timers.eventTime

  /** The keys called for data in the batch under way, which do not time out in it. */
  private val calledForData = new java.util.HashSet[UnsafeRow]()

  override def startBatch(batchWatermark: Long): Unit = {
    super.startBatch(batchWatermark)
    calledForData.clear()
  }

  override protected def call(
      key: UnsafeRow, input: InternalRow, before: UnsafeRow, batchTime: Long): UnsafeRow = {
    if (dataDefersTimeout) calledForData.add(key.copy())
    callWithTimer(key, input, before, timingOut = false, batchTime)
  }

  /** The keys due before `threshold` but those called for data in the batch under way. */
  override def timingOutKeys(threshold: Long): Iterator[(UnsafeRow, UnsafeRow)] =
    super.timingOutKeys(threshold).filterNot { case (key, _) => calledForData.contains(key) }

  override protected def callTimingOut(
      key: UnsafeRow, input: InternalRow, state: UnsafeRow, batchTime: Long): UnsafeRow =
    callWithTimer(key, input, state, timingOut = true, batchTime)

  override protected def initialTime(time: Long): Long = StateMap.clampTimer(time)

  /**
   * One call, for data or timing out: remove, update and emit as for a record, then
   * `timeout_at` (with the state after the call in scope) gives the key's new timer, stored
   * as the key's time; the state is put again whenever either changed.
   */
  private def callWithTimer(
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
      writeTimeOnly(key, timer)
    }
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
    if (eventTime) timer > 0 && timer >= watermark else timer > batchTime

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
      if (!eventTime) {
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
}
