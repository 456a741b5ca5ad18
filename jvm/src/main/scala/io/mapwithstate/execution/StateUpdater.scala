package io.mapwithstate.execution

import io.mapwithstate.MapWithStateException
import io.mapwithstate.state.{HeapBudget, StateMap}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, GenericInternalRow, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.DataType

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
 * Times are microseconds (Catalyst's TIMESTAMP). Emitted rows are valid until the next call.
 *
 * @param keyOrdinals where the key columns are in the input rows
 * @param inputWidth  how many columns the input rows have
 * @param heapBudget  checked as writes grow the map (a heap map), or None (a map off the heap)
 */
class StateUpdater(
    val map: StateMap,
    function: CompiledStateFunction,
    keyOrdinals: Seq[Int],
    keyTypes: Seq[DataType],
    inputWidth: Int,
    refreshesIdleKeys: Boolean,
    heapBudget: Option[HeapBudget] = None) {

  // Null when there is no budget: checked on every write, so no Option on the hot path.
  private val budget: HeapBudget = heapBudget.orNull

  private val keyProjection = UnsafeProjection.create(
    keyOrdinals.zip(keyTypes).map { case (o, t) => BoundReference(o, t, nullable = true) })

  /** The input of a timing-out call: the key columns, and null for every value column. */
  private val timingOutInput = new GenericInternalRow(inputWidth)

  var updatedKeys = 0L
  var removedKeys = 0L
  var timedOutKeys = 0L

  /** Runs one record; returns what it emits, or null. */
  def processRecord(record: InternalRow, batchTime: Long): UnsafeRow = {
    val key = keyProjection(record)
    val before = map.get(key)
    function.setContext(record, before, timingOut = false, batchTime)
    val removed = function.shouldRemove()
    val updated = if (removed) null else function.update()
    val after = if (removed) null else if (updated != null) updated else before

    val emitted = function.emit(after)

    if (removed) {
      if (before != null) {
        map.remove(key)
        removedKeys += 1
      }
    } else if (updated != null) {
      // In place: `before` has served its last use (emit, above), and neither it nor anything
      // derived from it outlives this call.
      map.putInPlace(key, updated, batchTime)
      updatedKeys += 1
      if (budget != null) budget.afterWrite(map)
    } else if (before != null && refreshesIdleKeys) {
      map.putInPlace(key, before, batchTime)
      if (budget != null) budget.afterWrite(map)
    }
    emitted
  }

  /** The keys whose state was last updated strictly before `threshold`, with their states. */
  def timingOutKeys(threshold: Long): Iterator[(UnsafeRow, UnsafeRow)] =
    map.getByTime(threshold).map(e => (e.key, e.state))

  /** Runs the timing-out call of one key, removes its state, and returns what it emits. */
  def timeOut(key: UnsafeRow, state: UnsafeRow, batchTime: Long): UnsafeRow = {
    var i = 0
    while (i < inputWidth) { timingOutInput.setNullAt(i); i += 1 }
    keyOrdinals.zipWithIndex.foreach { case (o, k) =>
      timingOutInput.update(o, key.get(k, keyTypes(k)))
    }
    function.setContext(timingOutInput, state, timingOut = true, batchTime)
    val emitted = function.emit(null)
    map.remove(key)
    timedOutKeys += 1
    emitted
  }

  /** Loads one row of initial state: key columns then state fields, in `layout` order. */
  def loadInitialState(key: UnsafeRow, state: UnsafeRow, time: Long): Unit = {
    if (map.get(key) != null) {
      throw MapWithStateException(
        s"initial_state has more than one row for the key ${describe(key)}; each key may have " +
          "one initial state")
    }
    map.put(key, state, time)
    if (budget != null) budget.afterWrite(map)
  }

  private def describe(key: UnsafeRow): String =
    keyTypes.indices.map(i => String.valueOf(key.get(i, keyTypes(i)))).mkString("(", ", ", ")")
}
