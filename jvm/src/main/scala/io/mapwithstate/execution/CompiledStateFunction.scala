package io.mapwithstate.execution

import io.mapwithstate.plan.{StateFunction, StateFunctionInput}
import io.mapwithstate.state.StateMap
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Attribute,
  BasePredicate,
  BoundReference,
  CreateNamedStruct,
  Expression,
  JoinedRow,
  Predicate,
  SpecificInternalRow,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * A [[StateFunction]] compiled with Spark's code generation for one row layout: the operator's
 * input rows (which hold the key and value columns at `dataOrdinals`) joined with a context row
 * ([[StateFunctionInput]]). One task at a time: it owns mutable buffers. Tasks take theirs
 * from [[CompiledStateFunctionPool]], which keeps compiled instances between tasks.
 *
 * Call order per record: [[setContext]], then [[shouldRemove]] and [[update]] (state before the
 * record), then [[emit]] and [[timeoutAt]] with the state after it. `emit` may be one record
 * (a struct) or many (an array of structs: flatMapGroupsWithState's iterator of rows).
 */
class CompiledStateFunction(function: StateFunction, code: CompiledStateFunction.Code) {
  import StateFunctionInput._

  def this(
      function: StateFunction,
      dataOrdinals: Seq[Int],
      inputWidth: Int,
      keyOrdinals: Seq[Int],
      keyTypes: Seq[DataType]) =
    this(function,
      CompiledStateFunction.Code(function, dataOrdinals, inputWidth, keyOrdinals, keyTypes))

  // Typed slots: the batch time and the flags are set on every call, and a generic row would
  // box each of them.
  private val context = new SpecificInternalRow(code.contextTypes)
  private val joined = new JoinedRow()

  private val keyProjection = UnsafeProjection.create(code.keys)

  /** Where the key columns are in the input rows, and their types. */
  val keyOrdinals: Seq[Int] = code.keys.map(_.ordinal)
  val keyTypes: Seq[DataType] = code.keys.map(_.dataType)
  private val removePredicate: BasePredicate = code.remove.map(Predicate.create(_)).orNull
  private val updateProjection = code.update.map(new StructProjection(_)).orNull
  private val emitProjection =
    code.emit.filterNot(_ => code.emitsMany).map(new StructProjection(_)).orNull
  private val emitManyProjection =
    code.emit.filter(_ => code.emitsMany).map(e => UnsafeProjection.create(Seq(e))).orNull
  private val emitWidth = function.emitType.length
  private var emittedRow: UnsafeRow = null
  private var emittedArray: ArrayData = null
  private val timeoutAtProjection =
    code.timeoutAt.map(e => UnsafeProjection.create(Seq(e))).orNull

  val hasUpdate: Boolean = updateProjection != null
  val hasRemove: Boolean = removePredicate != null
  val hasEmit: Boolean = function.emit.isDefined

  /** The key columns of an input row, as a row valid until the next call. */
  def key(input: InternalRow): UnsafeRow = keyProjection(input)

  def initialize(partitionIndex: Int): Unit = {
    Option(removePredicate).foreach(_.initialize(partitionIndex))
    Option(updateProjection).foreach(_.initialize(partitionIndex))
    Option(emitProjection).foreach(_.initialize(partitionIndex))
    Option(timeoutAtProjection).foreach(_.initialize(partitionIndex))
    Option(emitManyProjection).foreach(_.initialize(partitionIndex))
  }

  /**
   * Points the function at `input`, for a key whose state before it is `state` (or null), whose
   * timer before it is `timer`, in a batch whose watermark is `watermark` (both micros;
   * [[StateMap.NoTime]] and [[TimeoutPolicy.NoWatermark]] for none, seen as null).
   */
  def setContext(
      input: InternalRow,
      state: InternalRow,
      timingOut: Boolean,
      batchTime: Long,
      timer: Long = StateMap.NoTime,
      watermark: Long = TimeoutPolicy.NoWatermark): Unit = {
    context.update(StateOrdinal, state)
    context.setBoolean(StateExistsOrdinal, state != null)
    context.setBoolean(IsTimingOutOrdinal, timingOut)
    context.setLong(BatchTimeOrdinal, batchTime)
    context.update(NewStateOrdinal, null)
    if (timer == StateMap.NoTime) context.setNullAt(TimeoutAtOrdinal)
    else context.setLong(TimeoutAtOrdinal, timer)
    if (watermark == TimeoutPolicy.NoWatermark) context.setNullAt(WatermarkOrdinal)
    else context.setLong(WatermarkOrdinal, watermark)
    joined.withLeft(input).withRight(context)
  }

  val hasTimeoutAt: Boolean = timeoutAtProjection != null

  /**
   * The timer `timeout_at` gives the current call, whose state after it is `newState`
   * (micros), or [[StateMap.NoTime]] when it is null or there is no `timeout_at`.
   */
  def timeoutAt(newState: InternalRow): Long = {
    if (timeoutAtProjection == null) return StateMap.NoTime
    context.update(NewStateOrdinal, newState)
    val row = timeoutAtProjection(joined)
    if (row.isNullAt(0)) StateMap.NoTime else row.getLong(0)
  }

  /** Whether `remove` is true for the current record (null counts as false). */
  def shouldRemove(): Boolean = removePredicate != null && removePredicate.eval(joined)

  /** The new state `update` produces for the current record; null leaves the state as it was. */
  def update(): UnsafeRow = if (updateProjection == null) null else updateProjection(joined)

  /**
   * The first record `emit` produces for the current record, whose state after it is
   * `newState` (null when removed), or null when it emits nothing; an array `emit` may produce
   * more ([[emittedCount]], [[emitted]]).
   */
  def emit(newState: InternalRow): UnsafeRow = {
    emittedRow = null
    emittedArray = null
    if (emitProjection != null) {
      context.update(NewStateOrdinal, newState)
      emittedRow = emitProjection(joined)
    } else if (emitManyProjection != null) {
      context.update(NewStateOrdinal, newState)
      val result = emitManyProjection(joined)
      if (!result.isNullAt(0)) emittedArray = result.getArray(0)
    }
    if (emittedCount > 0) emitted(0) else null
  }

  /**
   * Drops the references this function holds to the rows of its last call (the input, the
   * states, what it emitted), so that an idle instance keeps no task's memory alive (see
   * [[CompiledStateFunctionPool]]).
   */
  def forgetRows(): Unit = {
    context.update(StateOrdinal, null)
    context.update(NewStateOrdinal, null)
    joined.withLeft(null).withRight(null)
    emittedRow = null
    emittedArray = null
  }

  /** How many records the last [[emit]] produced, null elements of an array included. */
  def emittedCount: Int =
    if (emittedArray != null) emittedArray.numElements() else if (emittedRow != null) 1 else 0

  /** The i-th record the last [[emit]] produced; null for a null array element. */
  def emitted(i: Int): UnsafeRow =
    if (emittedArray == null) emittedRow
    else if (emittedArray.isNullAt(i)) null
    else emittedArray.getStruct(i, emitWidth).asInstanceOf[UnsafeRow]
}

object CompiledStateFunction {

  /**
   * A state function's expressions bound to one input layout (its columns and the context row
   * after them), the context row's types and the input's key columns: everything its compiled
   * code is made of, so two functions with equal Code compile to the same thing whatever their
   * attributes' ids (see [[CompiledStateFunctionPool]]).
   */
  case class Code(
      keys: Seq[BoundReference],
      remove: Option[Expression],
      update: Option[Expression],
      emit: Option[Expression],
      timeoutAt: Option[Expression],
      emitsMany: Boolean,
      contextTypes: Seq[DataType])

  object Code {
    def apply(
        function: StateFunction,
        dataOrdinals: Seq[Int],
        inputWidth: Int,
        keyOrdinals: Seq[Int],
        keyTypes: Seq[DataType]): Code = {
      val bound: Map[Attribute, Int] =
        (function.dataAttributes.zip(dataOrdinals) ++
          function.contextAttributes.zipWithIndex.map { case (a, i) => a -> (inputWidth + i) })
          .toMap
      def bind(e: Expression): Expression = e.transform {
        case a: Attribute if bound.contains(a) => BoundReference(bound(a), a.dataType, a.nullable)
      }
      Code(keyOrdinals.zip(keyTypes).map { case (o, t) => BoundReference(o, t, nullable = true) },
        function.remove.map(bind), function.update.map(bind), function.emit.map(bind),
        function.timeoutAt.map(bind), function.emitsMany,
        function.contextAttributes.map(_.dataType))
    }
  }
}

/**
 * Evaluates a struct-typed expression into an UnsafeRow of its fields, or null where the struct
 * is null; the row is valid until the next call.
 *
 * The usual `F.struct(...)` is a CreateNamedStruct, which is never null: its fields are then
 * projected as the row itself, rather than into a struct nested in a one-column row that would
 * be written, and null-checked, once more per record.
 */
private class StructProjection(struct: Expression) {
  private val numFields = struct.dataType.asInstanceOf[StructType].length

  private val flat: UnsafeProjection = struct match {
    case s: CreateNamedStruct => UnsafeProjection.create(s.valExprs)
    case _ => null
  }
  private val nested: UnsafeProjection =
    if (flat == null) UnsafeProjection.create(Seq(struct)) else null
  private val nestedView = new UnsafeRow(numFields)

  def apply(input: InternalRow): UnsafeRow = {
    if (flat != null) return flat(input)
    val result = nested(input)
    if (result.isNullAt(0)) return null
    // UnsafeRow.getStruct without a new row per call.
    val offsetAndSize = result.getLong(0)
    nestedView.pointTo(result.getBaseObject,
      result.getBaseOffset + (offsetAndSize >>> 32), offsetAndSize.toInt)
    nestedView
  }

  def initialize(partitionIndex: Int): Unit =
    (if (flat != null) flat else nested).initialize(partitionIndex)
}
