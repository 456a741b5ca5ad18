package io.mapwithstate.pyfunc

import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.DataTypeMismatch
import org.apache.spark.sql.catalyst.expressions.{Expression, Literal, RaiseError}
import org.apache.spark.sql.types.StringType

/**
 * The failure a reserved function raises where Python raises: Spark's `raise_error(message)`'s
 * own exception (`USER_RAISED_EXCEPTION`), so a check made inside a reserved function reaches
 * the caller exactly as the compiler's `raise_error` checks do. The message, made by the
 * compiler, names Python's exception, the function, its file and line; it is a constant
 * argument of the reserved function.
 */
object PythonErrors {

  /** The exception `raise_error(message)` throws: its own, made by evaluating it. */
  def raised(message: String): RuntimeException =
    try {
      new RaiseError(Literal(message)).eval()
      new IllegalStateException(s"raise_error did not raise: $message")
    } catch { case e: RuntimeException => e }

  /** A mismatch unless `message` is a constant, non-null string. */
  def checkMessage(message: Expression): Option[TypeCheckResult] =
    if (message.dataType != StringType || !message.foldable || message.eval() == null) {
      Some(DataTypeMismatch("NON_FOLDABLE_INPUT",
          Map("inputName" -> "message", "inputType" -> "STRING", "inputExpr" -> message.sql)))
    } else {
      None
    }

  /** The text of a constant `message` (checked by [[checkMessage]]). */
  def messageOf(message: Expression): String = message.eval().toString
}
