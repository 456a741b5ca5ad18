package io.mapwithstate.pyfunc

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.expressions.{BinaryExpression, Expression, GenericInternalRow}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{DataType, DoubleType, LongType, StructField, StructType}

/**
 * Python's `a ** b` of two ints whose exponent is known only at run time, which the Python
 * state function compiler emits as the reserved function `__mws_python_int_pow(a, b)`
 * (registered by [[PythonFunctions]]).
 *
 * Python's result is an int for `b >= 0` and a float for `b < 0`, so the result is the
 * compiler's int-or-float value: a struct whose field `i` holds the int (null for a float) and
 * `f` the float (null for an int). The int is exact; where it is beyond 64 bits both fields
 * are null, and the compiler fails the query with Python's `OverflowError` there, as it does
 * for a literal exponent (the check then precedes every other use of the value, as Python's
 * order of evaluation has it). The float is CPython's `float(a) ** b` as
 * [[PythonIntPower.inverse]] computes it. `0 ** b` for `b < 0` raises ZeroDivisionError in
 * Python, which the compiler checks too (the float is then infinite).
 */
case class PythonIntPower(base: Expression, exponent: Expression) extends BinaryExpression {

  override def left: Expression = base
  override def right: Expression = exponent
  override def dataType: DataType = PythonIntPower.ResultType
  override def prettyName: String = PythonIntPower.Name

  override def checkInputDataTypes(): TypeCheckResult =
    PythonFunctions.checkBigints(base, exponent)

  override protected def nullSafeEval(a: Any, b: Any): Any =
    PythonIntPower.power(a.asInstanceOf[Long], b.asInstanceOf[Long])

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val power = PythonIntPower.getClass.getName.stripSuffix("$")
    defineCodeGen(ctx, ev, (a, b) => s"$power.power($a, $b)")
  }

  override protected def withNewChildrenInternal(
      newLeft: Expression,
      newRight: Expression): PythonIntPower =
    copy(base = newLeft, exponent = newRight)
}

object PythonIntPower {
  val Name = "__mws_python_int_pow"

  /** The compiler's int-or-float value. */
  val ResultType: StructType =
    StructType(Seq(StructField("i", LongType), StructField("f", DoubleType)))

  /** Integers up to this magnitude are doubles exactly. */
  private val ExactDoubleLimit = 1L << 53

  /** `a ** b`: the int for `b >= 0` (both fields null beyond 64 bits), else the float. */
  def power(a: Long, b: Long): InternalRow =
    if (b >= 0) {
      val exact =
        try exactPower(a, b)
        catch { case _: ArithmeticException => null }
      new GenericInternalRow(Array[Any](exact, null))
    } else {
      new GenericInternalRow(Array[Any](null, inverse(a, b)))
    }

  /**
   * `a ** n` for `n >= 0`, by squaring; ArithmeticException beyond 64 bits. Every square taken
   * is at most the result in magnitude (or `a` is -1, 0 or 1, whose squares do not grow), so an
   * overflow along the way means the result overflows.
   */
  def exactPower(a: Long, n: Long): Long = {
    var result = 1L
    var square = a
    var rest = n
    while (rest != 0) {
      if ((rest & 1) != 0) result = Math.multiplyExact(result, square)
      rest >>>= 1
      if (rest != 0 && square != 1 && square != 0) square = Math.multiplyExact(square, square)
    }
    result
  }

  /**
   * CPython's `a ** b` for `b < 0`, `a != 0`: `float(a) ** float(b)`, libm's `pow`. Where
   * `a ** -b` is an int a double holds exactly, one division, correctly rounded as libm's `pow`
   * is (but in rare cases); else `StrictMath.pow`, Spark's `pow`, which may differ from libm's
   * in the last bit. The compiler's literal exponents follow the same rule.
   */
  def inverse(a: Long, b: Long): Double = {
    val magnitude =
      if (b == Long.MinValue) None
      else {
        try Some(exactPower(a, -b))
        catch { case _: ArithmeticException => None }
      }
    magnitude match {
      case Some(m) if m != 0 && math.abs(m) <= ExactDoubleLimit => 1.0 / m.toDouble
      case _ => StrictMath.pow(a.toDouble, b.toDouble)
    }
  }
}
