package io.mapwithstate.pyfunc

import scala.util.Random

import io.mapwithstate.LocalSpark
import org.apache.spark.sql.{AnalysisException, Column, Row}
import org.apache.spark.sql.functions.{call_function, col, lit, raise_error, when}
import org.scalatest.funsuite.AnyFunSuite

/**
 * The reserved functions of Python's int arithmetic, against Python's exact ints (BigInt):
 * `__mws_python_add`, `__mws_python_subtract` and `__mws_python_multiply` at and past the
 * 64-bit bounds, each failure `raise_error`'s with the compiler's message, raised only where the
 * call is evaluated (never by constant folding); and `__mws_python_int_pow` (exact powers, null
 * beyond 64 bits; CPython's float for a negative exponent); generated and interpreted.
 */
class PythonExactArithmeticSuite extends AnyFunSuite with LocalSpark {
  import PythonExactArithmetic.{Add, Multiply, Operator, Subtract}

  private val Message = "OverflowError: int result does not fit in 64 bits (BIGINT) [f.py:3]"
  private val MinLong = BigInt(Long.MinValue)
  private val MaxLong = BigInt(Long.MaxValue)

  private def exact(operator: Operator, a: Long, b: Long): BigInt = operator match {
    case Add => BigInt(a) + b
    case Subtract => BigInt(a) - b
    case Multiply => BigInt(a) * b
  }

  /** The result, or None where the call raised the message as raise_error does. */
  private def run(operator: Operator, a: Long, b: Long): Option[Long] =
    try Some(operator(a, b, Message))
    catch {
      case e: RuntimeException =>
        assert(e.getMessage.contains(Message), e.getMessage)
        None
    }

  private val bounds = Seq(Long.MinValue, Long.MinValue + 1, -3037000500L, -4294967296L, -2L,
    -1L, 0L, 1L, 2L, 3037000499L, 3037000500L, 4294967296L, Long.MaxValue - 1, Long.MaxValue)

  test("add, subtract and multiply are Python's ints where 64 bits hold them, else raise") {
    val random = new Random(41)
    val pairs = (for (a <- bounds; b <- bounds) yield (a, b)) ++
      Seq.fill(20000)((random.nextLong() >> random.nextInt(64),
          random.nextLong() >> random.nextInt(64)))
    for ((a, b) <- pairs; operator <- PythonExactArithmetic.Operators) {
      val python = exact(operator, a, b)
      val expected = if (python >= MinLong && python <= MaxLong) Some(python.toLong) else None
      assert(run(operator, a, b) == expected, s"${operator.name}($a, $b): Python gives $python")
    }
  }

  test("the failure is raise_error's, with the same message") {
    val theirs = intercept[Exception] {
      spark.range(1).select(raise_error(lit(Message))).collect()
    }
    val ours = intercept[Exception] {
      spark.range(1).select(call_function(Add.name, lit(Long.MaxValue) + col("id"), lit(1L),
          lit(Message))).collect()
    }
    assert(raised(ours).getClass == raised(theirs).getClass)
    assert(raised(ours).getMessage == raised(theirs).getMessage)
    assert(raised(ours).getMessage.contains(Message))
  }

  /** The exception a task raised, out of the job failure that may wrap it. */
  private def raised(e: Throwable): Throwable =
    if (e.getCause == null || e.getCause == e) e else raised(e.getCause)

  private def overflowing(name: String, a: Column, b: Column): Column =
    call_function(name, a, b, lit(Message))

  test("the reserved functions, generated and interpreted, from a DataFrame") {
    val session = spark
    import session.implicits._
    val df = Seq((Long.MaxValue, 1L), (Long.MinValue, 1L), (3037000500L, 3037000500L),
      (5L, 7L)).toDF("a", "b")
    Seq("CODEGEN_ONLY", "NO_CODEGEN").foreach { mode =>
      spark.conf.set("spark.sql.codegen.factoryMode", mode)
      try {
        val rows = df.where(col("a") === 5L).select(
          overflowing(Add.name, col("a"), col("b")),
          overflowing(Subtract.name, col("a"), col("b")),
          overflowing(Multiply.name, col("a"), col("b"))).collect()
        assert(rows.toSeq == Seq(Row(12L, -2L, 35L)), mode)
        Seq((Add.name, Long.MaxValue), (Subtract.name, Long.MinValue),
          (Multiply.name, 3037000500L)).foreach { case (name, a) =>
          val failure = intercept[Exception] {
            df.where(col("a") === a).select(overflowing(name, col("a"), col("b"))).collect()
          }
          assert(failure.getMessage.contains(Message), s"$mode $name: ${failure.getMessage}")
        }
        val withNull = spark.sql(s"SELECT ${Add.name}(CAST(NULL AS BIGINT), 1L, 'm')").head()
        assert(withNull.isNullAt(0), mode)
      } finally spark.conf.unset("spark.sql.codegen.factoryMode")
    }
  }

  test("a constant overflow raises only where it is evaluated, not when constants fold") {
    val df = spark.range(3)
    val guarded = when(col("id") > 5, overflowing(Add.name, lit(Long.MaxValue), lit(1L)))
      .otherwise(overflowing(Add.name, lit(40L), lit(2L)))
    assert(df.select(guarded).collect().map(_.getLong(0)).toSeq == Seq(42L, 42L, 42L))
  }

  test("the message is a constant, and there are three arguments") {
    val notConstant = intercept[AnalysisException] {
      spark.range(3).select(call_function(Add.name, col("id"), col("id"),
          col("id").cast("string"))).collect()
    }
    assert(notConstant.getMessage.contains("message"), notConstant.getMessage)
    val arity = intercept[Exception](spark.sql(s"SELECT ${Multiply.name}(1L, 2L)"))
    assert(arity.getMessage.contains(Multiply.name), arity.getMessage)
  }

  test("int ** int: exact for b >= 0 (null beyond 64 bits), a float for b < 0") {
    val random = new Random(43)
    val bases = bounds ++ Seq(-10L, -7L, -3L, 3L, 7L, 10L, 1L << 31, -(1L << 31), 94906265L,
      94906266L, 2097151L, 2097152L)
    val exponents = Seq(0L, 1L, 2L, 3L, 5L, 31L, 32L, 62L, 63L, 64L, 65L, 1000L,
      Long.MaxValue - 1, Long.MaxValue)
    val cases = (for (a <- bases; b <- exponents) yield (a, b)) ++
      Seq.fill(5000)((random.nextLong() >> random.nextInt(64), random.nextInt(70).toLong))
    for ((a, b) <- cases) {
      val python = a match { // None: |a ** b| > 2**64
        case 0L => Some(BigInt(if (b == 0) 1 else 0))
        case 1L => Some(BigInt(1))
        case -1L => Some(BigInt(if (b % 2 == 0) 1 else -1))
        case _ => if (b <= 64) Some(BigInt(a).pow(b.toInt)) else None
      }
      val expected = python.filter(p => p >= MinLong && p <= MaxLong).map(_.toLong)
      val row = PythonIntPower.power(a, b)
      val got = if (row.isNullAt(0)) None else Some(row.getLong(0))
      assert(row.isNullAt(1) && got == expected, s"$a ** $b: Python gives $python")
    }
  }

  test("int ** negative int is CPython's float(a) ** b") {
    // (a, b, CPython's a ** b)
    val python = Seq((2L, -1L, 0.5), (-2L, -3L, -0.125), (10L, -1L, 0.1), (3L, -2L, 1.0 / 9),
      (1L, Long.MinValue, 1.0), (-1L, Long.MinValue, 1.0), (-1L, -3L, -1.0),
      (Long.MaxValue, -1L, 1.0842021724855044e-19), (Long.MinValue, -1L, -1.0842021724855044e-19),
      (9007199254740993L, -1L, 1.1102230246251565e-16), (2L, -1074L, 5e-324), (2L, -1075L, 0.0),
      (10L, -400L, 0.0), (7L, -30L, 4.436687086236306e-26))
    python.foreach { case (a, b, expected) =>
      val row = PythonIntPower.power(a, b)
      assert(row.isNullAt(0) && row.getDouble(1) == expected, s"$a ** $b: Python gives $expected")
    }
    assert(PythonIntPower.inverse(0L, -1L).isPosInfinity) // Python raises ZeroDivisionError
  }

  test("__mws_python_int_pow from a DataFrame: struct<i, f>, generated and interpreted") {
    val session = spark
    import session.implicits._
    val df = Seq((2L, 10L), (2L, -2L), (-3L, 3L), (2L, 63L)).toDF("a", "b")
    Seq("CODEGEN_ONLY", "NO_CODEGEN").foreach { mode =>
      spark.conf.set("spark.sql.codegen.factoryMode", mode)
      try {
        val power = call_function(PythonIntPower.Name, col("a"), col("b"))
        val rows = df.select(power.getField("i"), power.getField("f")).collect().toSeq
        assert(rows == Seq(Row(1024L, null), Row(null, 0.25), Row(-27L, null), Row(null, null)),
          mode)
      } finally spark.conf.unset("spark.sql.codegen.factoryMode")
    }
  }
}
