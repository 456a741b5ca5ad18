package io.mapwithstate.pyfunc

import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.expressions.{Expression, TernaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{DataType, LongType}

/**
 * Python's `a + b`, `a - b` or `a * b` of ints that a BIGINT must hold, which the Python state
 * function compiler emits as the reserved functions `__mws_python_add`, `__mws_python_subtract`
 * and `__mws_python_multiply(a, b, message)` (registered by [[PythonFunctions]]).
 *
 * Python's int never overflows: a result beyond 64 bits does not fit the column, so the query
 * fails, with Python's `OverflowError` and where the function computed it (`message`, made by
 * the compiler: the exception, the function, its file and line). One `Math.addExact` (or
 * `subtractExact`, `multiplyExact`) does the arithmetic and the check, as Spark's ANSI `+` does,
 * and the failure is Spark's `raise_error`'s, with the compiler's message: the same error the
 * compiler's other checks raise. The compiled running count is then the Column spec's plan
 * with this call where the Column spec has `+`, rather than `try_add` and a `CASE` raising
 * where it is null.
 *
 * Not foldable: a constant overflow on a path that never runs must not fail the query when
 * Spark folds constants. Null where an operand is null (the compiler checks `None` first).
 */
case class PythonExactArithmetic(
    operator: PythonExactArithmetic.Operator,
    left: Expression,
    right: Expression,
    message: Expression)
  extends TernaryExpression {

  override def first: Expression = left
  override def second: Expression = right
  override def third: Expression = message
  override def dataType: DataType = LongType
  override def foldable: Boolean = false
  override def nullable: Boolean = left.nullable || right.nullable
  override def prettyName: String = operator.name

  override def checkInputDataTypes(): TypeCheckResult =
    PythonErrors.checkMessage(message).getOrElse(PythonFunctions.checkBigints(left, right))

  private lazy val messageText: String = PythonErrors.messageOf(message)

  // Never called with a null operand: TernaryExpression.eval returns null first.
  override protected def nullSafeEval(a: Any, b: Any, m: Any): Any =
    operator(a.asInstanceOf[Long], b.asInstanceOf[Long], messageText)

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val arithmetic = PythonExactArithmetic.getClass.getName.stripSuffix("$")
    val text = ctx.addReferenceObj("message", messageText, "java.lang.String")
    // The message child is a literal; its generated code is left unused.
    nullSafeCodeGen(ctx, ev,
      (a, b, _) =>
        s"${ev.value} = $arithmetic.${operator.method}($a, $b, $text);")
  }

  override protected def withNewChildrenInternal(
      newFirst: Expression,
      newSecond: Expression,
      newThird: Expression): PythonExactArithmetic =
    copy(left = newFirst, right = newSecond, message = newThird)
}

object PythonExactArithmetic {

  /** The three operators, each a reserved function's name and its exact JVM method. */
  sealed abstract class Operator(val name: String, val method: String, val symbol: String) {
    def apply(a: Long, b: Long, message: String): Long
  }

  case object Add extends Operator("__mws_python_add", "add", "+") {
    def apply(a: Long, b: Long, message: String): Long = add(a, b, message)
  }

  case object Subtract extends Operator("__mws_python_subtract", "subtract", "-") {
    def apply(a: Long, b: Long, message: String): Long = subtract(a, b, message)
  }

  case object Multiply extends Operator("__mws_python_multiply", "multiply", "*") {
    def apply(a: Long, b: Long, message: String): Long = multiply(a, b, message)
  }

  val Operators: Seq[Operator] = Seq(Add, Subtract, Multiply)

  // The generated code calls these: one exact operation, the failure off the hot path.
  def add(a: Long, b: Long, message: String): Long =
    try Math.addExact(a, b)
    catch { case _: ArithmeticException => throw PythonErrors.raised(message) }

  def subtract(a: Long, b: Long, message: String): Long =
    try Math.subtractExact(a, b)
    catch { case _: ArithmeticException => throw PythonErrors.raised(message) }

  def multiply(a: Long, b: Long, message: String): Long =
    try Math.multiplyExact(a, b)
    catch { case _: ArithmeticException => throw PythonErrors.raised(message) }
}
