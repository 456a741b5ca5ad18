package io.mapwithstate.state

import scala.util.control.NonFatal

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.catalyst.expressions.{
  BoundReference,
  CreateNamedStruct,
  Expression,
  GenericInternalRow,
  GetStructField,
  JoinedRow,
  Literal,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.types.StructType

/**
 * How the committed state a restarted query loads, written in an older state schema
 * (`storedStateType`), becomes state of the current one: `newState`, a struct of the current
 * state's fields over a row of the key columns (`keySchema`) followed by the stored state as
 * one struct column (bound by ordinal); a null struct removes the key: the rules' automatic
 * conversion ([[StoredStateConversion.of]]) or the spec's `migrate`. It travels to the tasks
 * of the first micro-batch after the restart, where each backend opens the store with every
 * key converted
 * ([[StateBackend.openStore]]): a key holding only a timer keeps it with no state, every other
 * key keeps its time (update time or timer) with its state converted. `what` names it in the
 * error of a key whose conversion fails (`migrate`, which may raise), with the key's columns.
 */
final case class StoredStateConversion(
    storedStateType: StructType,
    newState: Expression,
    keySchema: StructType,
    what: String) {

  /**
   * The conversion of one key's stored state in a task: the new state (a row of its own), or
   * null to remove the key. One per task: not thread-safe.
   */
  def converter(): (UnsafeRow, UnsafeRow) => UnsafeRow = {
    val projection = UnsafeProjection.create(Seq(newState))
    val numFields = newState.dataType.asInstanceOf[StructType].length
    val joined = new JoinedRow()
    val stateColumn = new GenericInternalRow(1)
    (key, state) => {
      stateColumn.update(0, state)
      val converted =
        try projection(joined(key, stateColumn))
        catch { case NonFatal(e) => throw failed(key, e) }
      if (converted.isNullAt(0)) null else converted.getStruct(0, numFields).copy()
    }
  }

  /** The failure of the conversion of `key`'s state, naming the key by its columns. */
  private def failed(key: UnsafeRow, cause: Throwable): MapWithStateException = {
    val columns = keySchema.fields.zipWithIndex.map { case (f, i) =>
      s"${f.name}=${Option(key.get(i, f.dataType)).map(_.toString).getOrElse("null")}"
    }
    new MapWithStateException(ErrorCondition.MigrationFailed,
      s"$what failed on the key (${columns.mkString(", ")}), converting its state from " +
        s"${storedStateType.simpleString} to ${newState.dataType.simpleString}: " +
        s"${MapWithStateException.describe(cause)}; the checkpoint is as the old query left " +
        "it (the batch did not commit)", cause)
  }
}

object StoredStateConversion {

  /**
   * The automatic conversion the evolution rules planned ([[StateSchemaEvolution.Conversion]],
   * over the stored state alone), for keys of the columns of `keySchema`.
   */
  def of(conversion: StateSchemaEvolution.Conversion, keySchema: StructType)
      : StoredStateConversion = {
    val state = BoundReference(keySchema.length, conversion.oldSchema, nullable = false)
    val fields = conversion.expressions.map(_.transformUp {
      case b: BoundReference => GetStructField(state, b.ordinal)
    })
    StoredStateConversion(conversion.oldSchema,
      CreateNamedStruct(conversion.newSchema.fields.toSeq.zip(fields).flatMap {
        case (field, value) => Seq(Literal(field.name), value)
      }), keySchema, "the conversion to the new state schema")
  }
}
