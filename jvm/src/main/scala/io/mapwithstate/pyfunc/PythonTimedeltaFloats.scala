package io.mapwithstate.pyfunc

import java.math.{BigDecimal => JBigDecimal, BigInteger}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, GenericInternalRow, TernaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, CodegenFallback, ExprCode}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{DataType, LongType, StringType, StructField, StructType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Python's `timedelta * float`, `timedelta / float` and `timedelta(...)` of floats, exactly
 * as CPython computes them, which the Python state function compiler emits as the reserved
 * functions `__mws_python_timedelta_multiply(micros, x, n)`, `__mws_python_timedelta_divide(micros,
 * x, n)` and `__mws_python_timedelta(units, ints, floats)` (registered by [[PythonFunctions]]).
 *
 * `td * x` is the timedelta's microseconds times the float's exact binary fraction
 * (`as_integer_ratio`), rounded half to even (`divide_and_round`); `td / x` the same with the
 * fraction inverted. The constructor is CPython's `delta_new`: each unit in turn (microseconds,
 * milliseconds, seconds, minutes, hours, days, weeks), an int added exactly, a float's whole
 * part added exactly and its fraction, times the unit in microseconds, added in doubles to a
 * leftover that is finally rounded half to even.
 *
 * The result is a struct: `micros`, the exact microseconds, or `error`, Python's exception and
 * message (NaN, an infinity, a zero divisor, None for a unit, days beyond Python's range), or
 * the compiler's OverflowError for a timedelta Python holds but a DAY TO SECOND interval (a
 * long of microseconds) does not.
 */
object PythonTimedeltaFloats {

  val MultiplyName = "__mws_python_timedelta_multiply"
  val DivideName = "__mws_python_timedelta_divide"
  val ConstructorName = "__mws_python_timedelta"

  val ResultType: StructType = StructType(
    Seq(StructField("micros", LongType), StructField("error", StringType)))

  /** Each unit's microseconds, by `timedelta`'s keyword. */
  val Units: Map[String, Long] = Map(
    "microseconds" -> 1L,
    "milliseconds" -> 1000L,
    "seconds" -> 1000000L,
    "minutes" -> 60000000L,
    "hours" -> 3600000000L,
    "days" -> 86400000000L,
    "weeks" -> 604800000000L)

  private val Day = BigInteger.valueOf(86400000000L)
  private val MaxDays = 999999999L

  private def failure(exception: String, message: String): InternalRow =
    new GenericInternalRow(Array[Any](null, UTF8String.fromString(s"$exception: $message")))

  /** CPython's `microseconds_to_delta`: the microseconds, or its OverflowError. */
  private def delta(micros: BigInteger): InternalRow = {
    val days = micros.subtract(micros.mod(Day)).divide(Day)
    if (days.bitLength > 31) {
      failure("OverflowError", "Python int too large to convert to C int")
    } else if (days.abs.longValue > MaxDays) {
      failure("OverflowError", s"days=$days; must have magnitude <= $MaxDays")
    } else if (micros.bitLength > 63) {
      // Python holds it; a DAY TO SECOND interval (microseconds in a long) does not.
      failure("OverflowError", "timedelta does not fit a DAY TO SECOND interval (106751991 days)")
    } else {
      new GenericInternalRow(Array[Any](micros.longValue, null))
    }
  }

  /** `float.as_integer_ratio()`: numerator and (positive) denominator, or its error. */
  private def ratio(x: Double): Either[InternalRow, (BigInteger, BigInteger)] =
    if (x.isNaN) {
      Left(failure("ValueError", "cannot convert NaN to integer ratio"))
    } else if (x.isInfinite) {
      Left(failure("OverflowError", "cannot convert Infinity to integer ratio"))
    } else {
      val exact = new JBigDecimal(x)
      if (exact.scale <= 0) {
        Right((exact.toBigIntegerExact, BigInteger.ONE))
      } else {
        Right((exact.unscaledValue, BigInteger.TEN.pow(exact.scale)))
      }
    }

  /** CPython's `divide_and_round`: `a / b` rounded half to even (`b` not 0). */
  private def divideAndRound(a: BigInteger, b: BigInteger): BigInteger = {
    // Floor division, as Python's divmod.
    val Array(t, r0) = a.divideAndRemainder(b)
    val (q, r) =
      if (r0.signum != 0 && r0.signum != b.signum) (t.subtract(BigInteger.ONE), r0.add(b))
      else (t, r0)
    val twice = r.shiftLeft(1)
    val greater = if (b.signum > 0) twice.compareTo(b) > 0 else twice.compareTo(b) < 0
    if (greater || (twice == b && q.testBit(0))) q.add(BigInteger.ONE) else q
  }

  /** `float.as_integer_ratio()` of `x`, or `n / 1` where the int `n` is given. */
  private def ratio(x: Double, n: java.lang.Long): Either[InternalRow, (BigInteger, BigInteger)] =
    if (n != null) Right((BigInteger.valueOf(n), BigInteger.ONE)) else ratio(x)

  /** `timedelta(microseconds=micros) * x` (or `* n`, an int, where it is given). */
  def multiply(micros: Long, x: Double, n: java.lang.Long): InternalRow = ratio(x, n) match {
    case Left(error) => error
    case Right((n, d)) => delta(divideAndRound(BigInteger.valueOf(micros).multiply(n), d))
  }

  /** `timedelta(microseconds=micros) / x` (or `/ n`, an int, where it is given). */
  def divide(micros: Long, x: Double, n: java.lang.Long): InternalRow = ratio(x, n) match {
    case Left(error) => error
    case Right((n, _)) if n.signum == 0 =>
      failure("ZeroDivisionError", "integer division or modulo by zero")
    case Right((n, d)) => delta(divideAndRound(BigInteger.valueOf(micros).multiply(d), n))
  }

  /** C's `round`: half away from zero. */
  private def cRound(x: Double): Double = {
    val whole = if (x < 0) Math.ceil(x) else Math.floor(x)
    if (Math.abs(x - whole) >= 0.5) whole + Math.signum(x) else whole
  }

  /** `PyLong_FromDouble` of a whole double, or its error. */
  private def whole(x: Double): Either[InternalRow, BigInteger] =
    if (x.isNaN) Left(failure("ValueError", "cannot convert float NaN to integer"))
    else if (x.isInfinite)
      Left(failure("OverflowError", "cannot convert float infinity to integer"))
    else Right(new JBigDecimal(x).toBigIntegerExact)

  /**
   * `timedelta(**units)`: `units` names each argument and its kind in CPython's order
   * (`"seconds=f,days=i"`: `i` an int in `ints`, `f` a float in `floats`, `n` whichever is
   * not null), the arrays aligned with it; null in both is None.
   */
  def construct(units: String, ints: ArrayData, floats: ArrayData): InternalRow = {
    var total = BigInteger.ZERO
    var leftover = 0.0
    for ((unit, k) <- units.split(",").zipWithIndex) {
      val Array(name, kind) = unit.split("=")
      val factor = Units(name)
      val isInt = kind != "f" && !ints.isNullAt(k)
      val isFloat = kind != "i" && !floats.isNullAt(k)
      if (isInt) {
        total = total.add(BigInteger.valueOf(ints.getLong(k)).multiply(BigInteger.valueOf(factor)))
      } else if (isFloat) {
        val x = floats.getDouble(k)
        val intPart = if (x < 0) Math.ceil(x) else Math.floor(x)
        val fraction = if (x.isInfinite) 0.0 else x - intPart
        whole(if (x.isNaN) x else intPart) match {
          case Left(error) => return error
          case Right(n) => total = total.add(n.multiply(BigInteger.valueOf(factor)))
        }
        if (fraction != 0.0) {
          val scaled = factor.toDouble * fraction
          val scaledWhole = if (scaled < 0) Math.ceil(scaled) else Math.floor(scaled)
          total = total.add(new JBigDecimal(scaledWhole).toBigIntegerExact)
          leftover += scaled - scaledWhole
        }
      } else {
        return failure("TypeError", s"unsupported type for timedelta $name component: NoneType")
      }
    }
    if (leftover != 0.0) {
      var rounded = cRound(leftover)
      if (Math.abs(rounded - leftover) == 0.5) {
        val odd = if (total.testBit(0)) 1 else 0
        rounded = 2.0 * cRound((leftover + odd) * 0.5) - odd
      }
      total = total.add(BigInteger.valueOf(rounded.toLong))
    }
    delta(total)
  }
}

/**
 * `__mws_python_timedelta_multiply(micros, x, n)` (`divide` false) or
 * `__mws_python_timedelta_divide(micros, x, n)`: by the float `x`, or by the int `n` where it
 * is not null (an int-or-float that holds an int); null where `micros` is, or both `x` and `n`.
 */
case class PythonTimedeltaByFloat(divide: Boolean, micros: Expression, x: Expression,
    n: Expression)
  extends TernaryExpression
  with CodegenFallback {

  override def first: Expression = micros
  override def second: Expression = x
  override def third: Expression = n
  override def dataType: DataType = PythonTimedeltaFloats.ResultType
  override def nullable: Boolean = true
  override def prettyName: String =
    if (divide) PythonTimedeltaFloats.DivideName else PythonTimedeltaFloats.MultiplyName

  override def eval(input: InternalRow): Any = {
    val m = micros.eval(input)
    val f = x.eval(input)
    val i = n.eval(input).asInstanceOf[java.lang.Long]
    if (m == null || (f == null && i == null)) {
      null
    } else {
      val double = if (f == null) 0.0 else f.asInstanceOf[Double]
      if (divide) PythonTimedeltaFloats.divide(m.asInstanceOf[Long], double, i)
      else PythonTimedeltaFloats.multiply(m.asInstanceOf[Long], double, i)
    }
  }

  override protected def withNewChildrenInternal(
      newFirst: Expression,
      newSecond: Expression,
      newThird: Expression): PythonTimedeltaByFloat =
    copy(micros = newFirst, x = newSecond, n = newThird)
}

/** `__mws_python_timedelta(units, ints, floats)`: the constructor of floats. */
case class PythonTimedeltaOfFloats(units: Expression, ints: Expression, floats: Expression)
  extends TernaryExpression {

  override def first: Expression = units
  override def second: Expression = ints
  override def third: Expression = floats
  override def dataType: DataType = PythonTimedeltaFloats.ResultType
  override def prettyName: String = PythonTimedeltaFloats.ConstructorName

  override protected def nullSafeEval(u: Any, i: Any, f: Any): Any =
    PythonTimedeltaFloats.construct(u.toString, i.asInstanceOf[ArrayData],
      f.asInstanceOf[ArrayData])

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val floats = PythonTimedeltaFloats.getClass.getName.stripSuffix("$")
    defineCodeGen(ctx, ev, (u, i, f) => s"$floats.construct($u.toString(), $i, $f)")
  }

  override protected def withNewChildrenInternal(
      newFirst: Expression,
      newSecond: Expression,
      newThird: Expression): PythonTimedeltaOfFloats =
    copy(units = newFirst, ints = newSecond, floats = newThird)
}
