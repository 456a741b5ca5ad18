package io.mapwithstate

import io.mapwithstate.plan.StateFunctionInput
import org.apache.spark.sql.Column
import org.apache.spark.sql.functions.col

/**
 * The vocabulary of a state function: Columns that stand for the key's state and the batch,
 * usable in a [[StateSpec]]'s `update`, `remove` and `emit` (the key and value columns are in
 * scope by their own names). They are references to the reserved columns of
 * [[io.mapwithstate.plan.StateFunctionInput]], which the plan binds to each call's context;
 * elsewhere Spark reports them as unknown columns. The same functions as Python's
 * `mapwithstate.functions`, in Scala's camelCase.
 */
object functions {

  /** The key's state before the current record (null when it has none). */
  def state(): Column = col(StateFunctionInput.State)

  /** One field of [[state]]. */
  def state(field: String): Column = state().getField(field)

  /** The key's state after the current record (in `emit` only): what `update` produced, or
   * the state as it was when `update` gave null; null when removed or timing out. */
  def newState(): Column = col(StateFunctionInput.NewState)

  /** One field of [[newState]]. */
  def newState(field: String): Column = newState().getField(field)

  /** Whether the key had a state before the current record. */
  def stateExists(): Column = col(StateFunctionInput.StateExists)

  /** True for the last call of a key whose state times out: its value columns are null,
   * `update` and `remove` are not applied, `emit` is, then the state is removed. */
  def isTimingOut(): Column = col(StateFunctionInput.IsTimingOut)

  /** The time of the batch being processed (a TIMESTAMP). */
  def batchTime(): Column = col(StateFunctionInput.BatchTime)
}
