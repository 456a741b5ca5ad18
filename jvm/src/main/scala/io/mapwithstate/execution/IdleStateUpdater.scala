package io.mapwithstate.execution

import io.mapwithstate.plan.FunctionKind
import io.mapwithstate.state.{HeapBudget, StateMap}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeRow

/**
 * The [[StateUpdater]] of a function without timers: keys never time out
 * ([[TimeoutPolicy.Never]]), or time out once idle ([[TimeoutPolicy.Idle]]), with exactly the
 * semantics of Spark's `MapWithStateRDDRecord.updateRecordWithData`:
 *
 *  - the map's time of a key is its last update time;
 *  - with an idle timeout (`refreshesIdleKeys`), a record refreshes its key's update time even
 *    when it does not update the state (an existing state is put again with the batch time);
 *  - a timing-out key is called once with no records and `is_timing_out` set; `update` and
 *    `remove` are not applied, `emit` is, and then the state is removed.
 */
final class IdleStateUpdater(
    map: StateMap,
    function: CompiledStateFunction,
    inputWidth: Int,
    kind: FunctionKind,
    valueOrdinals: Seq[Int],
    timeouts: TimeoutPolicy,
    heapBudget: Option[HeapBudget] = None)
  extends StateUpdater(map, function, inputWidth, kind, valueOrdinals, heapBudget) {

  private val refreshesIdleKeys = timeouts.refreshesIdleKeys

  override protected def call(
      key: UnsafeRow, input: InternalRow, before: UnsafeRow, batchTime: Long): UnsafeRow = {
    function.setContext(input, before, timingOut = false, batchTime, watermark = watermark)
    val removed = function.shouldRemove()
    val updated = if (removed) null else function.update()
    val after = if (removed) null else if (updated != null) updated else before

    val emitted = function.emit(after)
    writeBack(key, before, removed, updated, batchTime, rewriteKept = refreshesIdleKeys)
    emitted
  }

  override protected def callTimingOut(
      key: UnsafeRow, input: InternalRow, state: UnsafeRow, batchTime: Long): UnsafeRow = {
    function.setContext(input, state, timingOut = true, batchTime, watermark = watermark)
    val emitted = function.emit(null)
    map.remove(key)
    removedKeys += 1
    emitted
  }

  override protected def initialTime(time: Long): Long = time
}
