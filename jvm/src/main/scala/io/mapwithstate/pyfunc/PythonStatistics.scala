package io.mapwithstate.pyfunc

import java.math.{BigDecimal => JBigDecimal, BigInteger}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.DataTypeMismatch
import org.apache.spark.sql.catalyst.expressions.{Expression, GenericInternalRow, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{
  ArrayType,
  DataType,
  DoubleType,
  LongType,
  StringType,
  StructField,
  StructType
}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Python 3.11's `statistics.mean`, `fmean`, `pvariance`, `variance`, `pstdev` and `stdev` of
 * a list of ints or floats, which the Python state function compiler emits as the reserved
 * functions `__mws_python_statistics_<name>(values)` (registered by [[PythonFunctions]]).
 *
 * CPython computes them exactly, in fractions: `mean` is the exact sum over the count,
 * rounded once to a float (or an int, for ints whose mean is whole); the variances are
 * `(n * Σx² - (Σx)²) / (n * n)` (or `n * (n - 1)`), exact, rounded once; the deviations the
 * correctly rounded square root of that fraction (`_float_sqrt_of_frac`, ported here). Every
 * double is an exact `BigDecimal`, so the sums here are exact too, and the one rounding is
 * [[PythonStatistics.toDouble]]'s, correctly rounded half to even as Python's `int / int` is.
 * `fmean` is `math.fsum(data) / n`: CPython's `fsum` ported step by step, its errors too.
 * A non-finite element makes the result what CPython's does: the sum of the non-finite
 * elements over the count (mean, variances), or an AttributeError (deviations); a variance of
 * finite floats past the largest double is Python's OverflowError.
 *
 * The result is a struct: `i` the int (for ints whose result is whole), `f` the float, and
 * `error` the name of the failure where Python raises ([[PythonStatistics.Errors]]), which
 * the compiler turns into Python's exception; null for fewer elements than the function takes
 * (the compiler fails the query with `StatisticsError` there first). The elements are not null
 * (the compiler fails the query on a `None` first).
 */
case class PythonStatistics(function: String, values: Expression) extends UnaryExpression {

  override def child: Expression = values
  override def dataType: DataType = PythonStatistics.ResultType
  override def nullable: Boolean = true
  override def prettyName: String = PythonStatistics.functionName(function)

  private def ints: Boolean = values.dataType match {
    case ArrayType(LongType, _) => true
    case _ => false
  }

  override def checkInputDataTypes(): TypeCheckResult = values.dataType match {
    case ArrayType(LongType, _) | ArrayType(DoubleType, _) => TypeCheckResult.TypeCheckSuccess
    case other =>
      DataTypeMismatch("UNEXPECTED_INPUT_TYPE",
        Map("paramIndex" -> "first", "requiredType" -> "ARRAY<BIGINT> or ARRAY<DOUBLE>",
          "inputSql" -> values.sql, "inputType" -> other.sql))
  }

  override protected def nullSafeEval(input: Any): Any =
    PythonStatistics.compute(function, ints, input.asInstanceOf[ArrayData])

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val statistics = PythonStatistics.getClass.getName.stripSuffix("$")
    nullSafeCodeGen(ctx, ev,
      a => {
        val result = ctx.freshName("result")
        s"""org.apache.spark.sql.catalyst.InternalRow $result = $statistics.compute("$function", $ints, $a);
         |if ($result == null) {
         |  ${ev.isNull} = true;
         |} else {
         |  ${ev.value} = $result;
         |}""".stripMargin
      })
  }

  override protected def withNewChildInternal(newChild: Expression): PythonStatistics =
    copy(values = newChild)
}

object PythonStatistics {

  /** The functions, by their Python names. */
  val Functions: Seq[String] = Seq("mean", "fmean", "pvariance", "variance", "pstdev", "stdev")

  def functionName(function: String): String = s"__mws_python_statistics_$function"

  /** The failures, by the `error` field's value: Python's exception and message. */
  val Errors: Map[String, (String, String)] = Map(
    "overflow" -> ("OverflowError", "int result does not fit in 64 bits (BIGINT)"),
    "numerator" -> ("AttributeError", "'float' object has no attribute 'numerator'"),
    "fsum_inf" -> ("ValueError", "-inf + inf in fsum"),
    "fsum_overflow" -> ("OverflowError", "intermediate overflow in fsum"),
    "division_overflow" -> ("OverflowError", "integer division result too large for a float"))

  val ResultType: StructType = StructType(Seq(StructField("i", LongType),
      StructField("f", DoubleType), StructField("error", StringType)))

  /** The fewest elements each function takes (else Python raises StatisticsError). */
  private def least(function: String): Int =
    if (function == "variance" || function == "stdev") 2 else 1

  private def row(i: java.lang.Long, f: java.lang.Double, error: String): InternalRow =
    new GenericInternalRow(
      Array[Any](i, f, if (error == null) null else UTF8String.fromString(error)))

  /** `statistics.<function>(data)` of BIGINTs (`ints`) or DOUBLEs; null for too few. */
  def compute(function: String, ints: Boolean, data: ArrayData): InternalRow = {
    val n = data.numElements()
    if (n < least(function)) return null
    if (function == "fmean") {
      val xs = Array.tabulate(n)(k => if (ints) data.getLong(k).toDouble else data.getDouble(k))
      return fsum(xs) match {
        case Left(error) => row(null, null, error)
        case Right(total) => row(null, total / n, null)
      }
    }
    // CPython's _sum and _ss: exact sums, but the non-finite elements summed as floats.
    var special: java.lang.Double = null
    var sx = JBigDecimal.ZERO
    var sxx = JBigDecimal.ZERO
    for (k <- 0 until n) {
      val x =
        if (ints) {
          JBigDecimal.valueOf(data.getLong(k))
        } else {
          val d = data.getDouble(k)
          if (d.isNaN || d.isInfinite) {
            special = (if (special == null) 0.0 else special.doubleValue) + d
            null
          } else {
            new JBigDecimal(d)
          }
        }
      if (x != null) {
        sx = sx.add(x)
        sxx = sxx.add(x.multiply(x))
      }
    }
    val count = BigInteger.valueOf(n.toLong)
    if (special != null) {
      return function match {
        case "mean" | "pvariance" => row(null, special / n, null)
        case "variance" => row(null, special / (n - 1), null)
        case _ => row(null, null, "numerator")
      }
    }
    val (numerator, denominator) = function match {
      case "mean" => ratio(sx, count)
      case _ =>
        val ss = JBigDecimal.valueOf(n.toLong).multiply(sxx).subtract(sx.multiply(sx))
        val divisor = if (function.startsWith("p")) count else BigInteger.valueOf(n - 1L)
        ratio(ss, count.multiply(divisor))
    }
    function match {
      case "pstdev" | "stdev" => row(null, sqrtOfRatio(numerator, denominator), null)
      case _ if ints && numerator.mod(denominator).signum == 0 =>
        val whole = numerator.divide(denominator)
        if (whole.bitLength > 63) row(null, null, "overflow") else row(whole.longValue, null, null)
      case _ =>
        // A variance of floats may be past the largest double (that of -1e308 and 1e308),
        // where Python's int / int raises.
        val f = toDouble(numerator, denominator)
        if (f.isInfinite) row(null, null, "division_overflow") else row(null, f, null)
    }
  }

  /** `value / divisor` as a fraction in lowest terms, the denominator positive. */
  private def ratio(value: JBigDecimal, divisor: BigInteger): (BigInteger, BigInteger) = {
    val (n, d) =
      if (value.scale >= 0) {
        (value.unscaledValue, BigInteger.TEN.pow(value.scale).multiply(divisor))
      } else {
        (value.unscaledValue.multiply(BigInteger.TEN.pow(-value.scale)), divisor)
      }
    val g = n.gcd(d)
    if (g.signum == 0) (n, BigInteger.ONE) else (n.divide(g), d.divide(g))
  }

  /**
   * `n / d` (`d > 0`) as the nearest double, ties to even: Python's `int / int` (infinite
   * where that rounds past the largest double, where Python raises OverflowError). The quotient is taken to two bits more
   * than the double keeps, its last bit set where the division leaves a remainder (rounding
   * to odd), so that the one rounding to 53 bits is the exact value's; a subnormal result is
   * rounded at its own last bit.
   */
  def toDouble(n: BigInteger, d: BigInteger): Double = {
    if (n.signum == 0) return 0.0
    val a = n.abs
    // t: 2^t <= a / d < 2^(t + 1).
    val e = a.bitLength - d.bitLength
    val t = if (compareScaled(a, d, e) >= 0) e else e - 1
    val magnitude =
      if (t >= -1022) {
        val k = 54 - t
        val (q, r) = divide(a, d, k)
        val odd = if (r.signum != 0) q.setBit(0) else q
        Math.scalb(odd.doubleValue, -k)
      } else {
        // A subnormal: the multiple of 2^-1074 nearest to a / d, ties to even.
        val (q, r) = divide(a, d, 1074)
        val twice = r.shiftLeft(1).compareTo(d)
        val up = twice > 0 || (twice == 0 && q.testBit(0))
        java.lang.Double.longBitsToDouble((if (up) q.add(BigInteger.ONE) else q).longValue)
      }
    if (n.signum < 0) -magnitude else magnitude
  }

  /** `a` against `d * 2^e`. */
  private def compareScaled(a: BigInteger, d: BigInteger, e: Int): Int =
    if (e >= 0) a.compareTo(d.shiftLeft(e)) else a.shiftLeft(-e).compareTo(d)

  /** The quotient and remainder of `a * 2^k / d`. */
  private def divide(a: BigInteger, d: BigInteger, k: Int): (BigInteger, BigInteger) = {
    val qr =
      if (k >= 0) a.shiftLeft(k).divideAndRemainder(d)
      else a.divideAndRemainder(d.shiftLeft(-k))
    (qr(0), qr(1))
  }

  /** CPython 3.11's `_float_sqrt_of_frac(n, m)`: the square root of `n / m`, correctly rounded. */
  def sqrtOfRatio(n: BigInteger, m: BigInteger): Double = {
    val width = 2 * 53 + 3
    val q = Math.floorDiv(n.bitLength - m.bitLength - width, 2)
    if (q >= 0) {
      toDouble(sqrtRoundToOdd(n, m.shiftLeft(2 * q)).shiftLeft(q), BigInteger.ONE)
    } else {
      toDouble(sqrtRoundToOdd(n.shiftLeft(-2 * q), m), BigInteger.ONE.shiftLeft(-q))
    }
  }

  /** `_integer_sqrt_of_frac_rto(n, m)`: `isqrt(n // m)`, its last bit set where inexact. */
  private def sqrtRoundToOdd(n: BigInteger, m: BigInteger): BigInteger = {
    val a = n.divide(m).sqrt()
    if (a.multiply(a).multiply(m).equals(n)) a else a.setBit(0)
  }

  /**
   * CPython's `math.fsum` (Shewchuk's exact partials, then the round-half-even fix-up), step
   * by step: the sum, or the error Python raises (`fsum_inf` for `-inf + inf`,
   * `fsum_overflow` where a partial sum of finite values overflows).
   */
  def fsum(xs: Array[Double]): Either[String, Double] = {
    val p = new Array[Double](xs.length + 1)
    var n = 0
    var specialSum = 0.0
    var infSum = 0.0
    for (item <- xs) {
      var x = item
      val xsave = x
      var i = 0
      var j = 0
      while (j < n) {
        var y = p(j)
        if (Math.abs(x) < Math.abs(y)) {
          val t = x
          x = y
          y = t
        }
        val hi = x + y
        val yr = hi - x
        val lo = y - yr
        if (lo != 0.0) {
          p(i) = lo
          i += 1
        }
        x = hi
        j += 1
      }
      n = i
      if (x != 0.0) {
        if (x.isNaN || x.isInfinite) {
          if (!(xsave.isNaN || xsave.isInfinite)) return Left("fsum_overflow")
          if (xsave.isInfinite) infSum += xsave
          specialSum += xsave
          n = 0
        } else {
          p(n) = x
          n += 1
        }
      }
    }
    if (specialSum != 0.0 || specialSum.isNaN) {
      return if (infSum.isNaN) Left("fsum_inf") else Right(specialSum)
    }
    var hi = 0.0
    if (n > 0) {
      n -= 1
      hi = p(n)
      var lo = 0.0
      var inexact = false
      while (n > 0 && !inexact) {
        val x = hi
        n -= 1
        val y = p(n)
        hi = x + y
        val yr = hi - x
        lo = y - yr
        if (lo != 0.0) inexact = true
      }
      if (n > 0 && ((lo < 0.0 && p(n - 1) < 0.0) || (lo > 0.0 && p(n - 1) > 0.0))) {
        val y = lo * 2.0
        val x = hi + y
        val yr = x - hi
        if (y == yr) hi = x
      }
    }
    Right(hi)
  }
}
