package io.mapwithstate.pyfunc

import java.math.BigInteger

import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.expressions.{Expression, TernaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{DataType, LongType}

/**
 * Python's three-argument `pow(a, b, m)` of ints, which the Python state function compiler
 * emits as the reserved function `__mws_python_mod_pow(a, b, m)` (registered by
 * [[PythonFunctions]]).
 *
 * The result is exact (`BigInteger.modPow`, whose products never overflow) and takes the
 * modulus's sign, as Python's does: in `[0, m)` for `m > 0` and in `(m, 0]` for `m < 0`, so it
 * always fits a BIGINT. A negative `b` raises the inverse of `a` modulo `|m|` to `-b` (Python
 * 3.8's rule). Where Python raises ValueError, for `m == 0` and for an `a` with no inverse modulo
 * `m`, the result is null, and the compiler fails the query there with Python's message (its
 * check precedes every use of the value). `|m| == 1` gives 0 before any inverse is sought, as
 * in CPython's `long_pow`.
 */
case class PythonModPow(base: Expression, exponent: Expression, modulus: Expression)
  extends TernaryExpression {

  override def first: Expression = base
  override def second: Expression = exponent
  override def third: Expression = modulus
  override def dataType: DataType = LongType
  override def nullable: Boolean = true
  override def prettyName: String = PythonModPow.Name

  override def checkInputDataTypes(): TypeCheckResult =
    PythonFunctions.checkBigints(base, exponent) match {
      case TypeCheckResult.TypeCheckSuccess => PythonFunctions.checkBigints(exponent, modulus)
      case failure => failure
    }

  override protected def nullSafeEval(a: Any, b: Any, m: Any): Any =
    PythonModPow.modPow(a.asInstanceOf[Long], b.asInstanceOf[Long], m.asInstanceOf[Long])

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val modPow = PythonModPow.getClass.getName.stripSuffix("$")
    nullSafeCodeGen(ctx, ev,
      (a, b, m) => {
        val result = ctx.freshName("result")
        s"""java.lang.Long $result = $modPow.modPow($a, $b, $m);
         |if ($result == null) {
         |  ${ev.isNull} = true;
         |} else {
         |  ${ev.value} = $result;
         |}""".stripMargin
      })
  }

  override protected def withNewChildrenInternal(
      newFirst: Expression,
      newSecond: Expression,
      newThird: Expression): PythonModPow =
    copy(base = newFirst, exponent = newSecond, modulus = newThird)
}

object PythonModPow {
  val Name = "__mws_python_mod_pow"

  /** `pow(a, b, m)` as Python computes it; null where Python raises ValueError. */
  def modPow(a: Long, b: Long, m: Long): java.lang.Long =
    if (m == 0) {
      null
    } else {
      val size = BigInteger.valueOf(m).abs
      if (size == BigInteger.ONE) {
        0L
      } else {
        try {
          val r = BigInteger.valueOf(a).modPow(BigInteger.valueOf(b), size)
          (if (m < 0 && r.signum != 0) r.subtract(size) else r).longValueExact
        } catch {
          // modPow's refusal of a negative exponent whose base has no inverse modulo m.
          case _: ArithmeticException => null
        }
      }
    }
}
