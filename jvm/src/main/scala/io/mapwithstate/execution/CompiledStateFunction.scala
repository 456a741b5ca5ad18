package io.mapwithstate.execution

import io.mapwithstate.plan.{StateFunction, StateFunctionInput}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BasePredicate, BoundReference, Expression, GenericInternalRow, JoinedRow, Predicate, UnsafeProjection, UnsafeRow}

/**
 * A [[StateFunction]] compiled with Spark's code generation for one row layout: the operator's
 * input rows (which hold the key and value columns at `dataOrdinals`) joined with a context row
 * ([[StateFunctionInput]]). One instance per task: it owns mutable buffers.
 *
 * Call order per record: [[setContext]], then [[shouldRemove]] and [[update]] (state before the
 * record), then [[setNewState]] and [[emit]].
 */
class CompiledStateFunction(function: StateFunction, dataOrdinals: Seq[Int], inputWidth: Int) {
  import StateFunctionInput._

  private val context = new GenericInternalRow(function.contextAttributes.size)
  private val joined = new JoinedRow()
  private val stateFields = function.stateType.length
  private val emitFields = function.emitType.length

  private val bound: Map[Attribute, Int] =
    (function.dataAttributes.zip(dataOrdinals) ++
      function.contextAttributes.zipWithIndex.map { case (a, i) => a -> (inputWidth + i) }).toMap

  private def bind(e: Expression): Expression = e.transform {
    case a: Attribute if bound.contains(a) => BoundReference(bound(a), a.dataType, a.nullable)
  }

  private val removePredicate: BasePredicate =
    function.remove.map(r => Predicate.create(bind(r))).orNull
  private val updateProjection: UnsafeProjection =
    function.update.map(u => UnsafeProjection.create(Seq(bind(u)))).orNull
  private val emitProjection: UnsafeProjection =
    function.emit.map(e => UnsafeProjection.create(Seq(bind(e)))).orNull

  val hasUpdate: Boolean = updateProjection != null
  val hasRemove: Boolean = removePredicate != null
  val hasEmit: Boolean = emitProjection != null

  def initialize(partitionIndex: Int): Unit = {
    Option(removePredicate).foreach(_.initialize(partitionIndex))
    Option(updateProjection).foreach(_.initialize(partitionIndex))
    Option(emitProjection).foreach(_.initialize(partitionIndex))
  }

  /** Points the function at `input`, for a key whose state before it is `state` (or null). */
  def setContext(input: InternalRow, state: InternalRow, timingOut: Boolean, batchTime: Long)
    : Unit = {
    context.update(StateOrdinal, state)
    context.setBoolean(StateExistsOrdinal, state != null)
    context.setBoolean(IsTimingOutOrdinal, timingOut)
    context.setLong(BatchTimeOrdinal, batchTime)
    context.update(NewStateOrdinal, null)
    joined.withLeft(input).withRight(context)
  }

  def setNewState(state: InternalRow): Unit = context.update(NewStateOrdinal, state)

  /** Whether `remove` is true for the current record (null counts as false). */
  def shouldRemove(): Boolean = removePredicate != null && removePredicate.eval(joined)

  /** The new state `update` produces for the current record; null leaves the state as it was. */
  def update(): UnsafeRow = {
    if (updateProjection == null) return null
    val result = updateProjection(joined)
    if (result.isNullAt(0)) null else result.getStruct(0, stateFields)
  }

  /** The record `emit` produces for the current record, or null when it emits nothing. */
  def emit(): UnsafeRow = {
    if (emitProjection == null) return null
    val result = emitProjection(joined)
    if (result.isNullAt(0)) null else result.getStruct(0, emitFields)
  }
}
