package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression}
import org.apache.spark.sql.types.{ArrayType, StructType}

/**
 * A resolved, type-checked state function: Spark's `(Time, K, Option[V], State[S]) =>
 * Option[T]` expressed as three Catalyst expressions over [[inputAttributes]].
 *
 * `dataAttributes` are the function's own copies of the key and value columns (in that order)
 * and `contextAttributes` those of [[StateFunctionInput]]; keeping them separate from the
 * plan's attributes lets the physical operator bind them by position to whatever row layout
 * its child produces.
 *
 * @param update a struct of exactly `stateType`, or None (the state is never updated)
 * @param remove a boolean, or None (the state is never removed by a record)
 * @param emit   a struct whose fields are the output columns (0 or 1 record per call), an array
 *               of such structs (0..n records per call), or None (nothing is emitted)
 * @param timeoutAt a TIMESTAMP, evaluated after `update`: the key's new timer (null: none), or
 *               None (the function sets no timers)
 */
case class StateFunction(
    stateType: StructType,
    dataAttributes: Seq[Attribute],
    contextAttributes: Seq[Attribute],
    update: Option[Expression],
    remove: Option[Expression],
    emit: Option[Expression],
    timeoutAt: Option[Expression] = None) {

  def inputAttributes: Seq[Attribute] = dataAttributes ++ contextAttributes

  /** The type of the records `emit` produces; empty when nothing is emitted. */
  def emitType: StructType = emit.map(_.dataType match {
    case ArrayType(s: StructType, _) => s
    case other => other.asInstanceOf[StructType]
  }).getOrElse(new StructType())

  /** Whether `emit` is an array of records rather than one record. */
  def emitsMany: Boolean = emit.exists(_.dataType.isInstanceOf[ArrayType])
}
