package io.mapwithstate.pyfunc

import java.math.{BigDecimal => JBigDecimal, RoundingMode}

import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.DataTypeMismatch
import org.apache.spark.sql.catalyst.expressions.{BinaryExpression, Expression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{DataType, DoubleType, IntegerType}

/**
 * Python's `round(x, ndigits)` of a float, which the Python state function compiler emits as
 * the reserved function `__mws_python_round(x, ndigits)` (registered by [[PythonFunctions]]).
 *
 * Python rounds the double's exact binary value to `ndigits` decimal places, half to even
 * (`round(2.675, 2)` is 2.67: the double is 2.67499999...), and returns the double nearest
 * that decimal. Spark's `round` and `bround`, and the cast to DECIMAL, start from the double's
 * shortest decimal text instead (`bround(2.675, 2)` is 2.68), so none of them can stand for
 * it. `ndigits` may be a constant (an int literal in the Python source) or a column (an int
 * known only at run time), which the compiler clamps into an INT first.
 *
 * A result too large for a double (only with a negative `ndigits`, `round(1.7e308, -308)`) is
 * infinite here; Python raises OverflowError there, which the compiler checks for.
 */
case class PythonRound(child: Expression, digits: Expression) extends BinaryExpression {

  override def left: Expression = child
  override def right: Expression = digits
  override def dataType: DataType = DoubleType
  override def prettyName: String = PythonRound.Name

  override def checkInputDataTypes(): TypeCheckResult =
    if (child.dataType != DoubleType || digits.dataType != IntegerType) {
      DataTypeMismatch("UNEXPECTED_INPUT_TYPE",
        Map("paramIndex" -> "first or second",
          "requiredType" -> "DOUBLE, INT", "inputSql" -> s"${child.sql}, ${digits.sql}",
          "inputType" -> s"${child.dataType.sql}, ${digits.dataType.sql}"))
    } else {
      TypeCheckResult.TypeCheckSuccess
    }

  override protected def nullSafeEval(x: Any, n: Any): Any =
    PythonRounding.round(x.asInstanceOf[Double], n.asInstanceOf[Int])

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val rounding = PythonRounding.getClass.getName.stripSuffix("$")
    defineCodeGen(ctx, ev, (x, n) => s"$rounding.round($x, $n)")
  }

  override protected def withNewChildrenInternal(newLeft: Expression, newRight: Expression)
      : PythonRound = copy(child = newLeft, digits = newRight)
}

object PythonRound {
  val Name = "__mws_python_round"
}

/**
 * CPython's `float.__round__(ndigits)` (Objects/floatobject.c), exactly: nan, infinities and
 * zeros are returned as they are; `ndigits` above 323 (past the last digit any double has)
 * returns `x`, below -308 a zero of `x`'s sign; otherwise the exact value of `x` rounded half
 * to even at `ndigits` places, to the nearest double, keeping `x`'s sign on a zero result.
 *
 * `BigDecimal(double)` is the double's exact value and `setScale` rounds it exactly;
 * `doubleValue` is correctly rounded on Java 17 (an exact division by a power of ten for small
 * values, else `Double.parseDouble` of the exact decimal text).
 */
object PythonRounding {

  /** CPython's NDIGITS_MAX and NDIGITS_MIN for doubles. */
  val MaxDigits = 323
  val MinDigits = -308

  /** Below this magnitude a double may have a fraction; at or above it, it is an integer. */
  private val IntegralFrom = 4503599627370496.0 // 2^52

  def round(x: Double, ndigits: Int): Double = {
    if (java.lang.Double.isNaN(x) || java.lang.Double.isInfinite(x) || x == 0.0) {
      x
    } else if (ndigits > MaxDigits || (ndigits >= 0 && math.abs(x) >= IntegralFrom)) {
      x
    } else if (ndigits < MinDigits) {
      0.0 * x
    } else {
      val rounded = new JBigDecimal(x).setScale(ndigits, RoundingMode.HALF_EVEN).doubleValue
      if (rounded == 0.0) math.copySign(0.0, x) else rounded
    }
  }
}
