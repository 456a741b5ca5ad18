package io.mapwithstate.pyfunc

import java.math.{BigDecimal => JBigDecimal, RoundingMode}

import scala.util.Random

import io.mapwithstate.LocalSpark
import org.apache.spark.sql.functions.{call_function, col, lit}
import org.scalatest.funsuite.AnyFunSuite

/**
 * `__mws_python_round` against CPython's `round(x, ndigits)` of a float: the values where
 * Python and Spark's `round`/`bround` part ways (as CPython 3 returns them), the bounds of
 * `ndigits`, signed zeros and non-finite values; random doubles checked to round to the double
 * nearest the exactly rounded decimal; and the expression through Spark, generated and
 * interpreted, as the compiler calls it: with ndigits a literal or a column.
 */
class PythonRoundSuite extends AnyFunSuite with LocalSpark {

  private def same(a: Double, b: Double): Boolean =
    java.lang.Double.doubleToRawLongBits(a) == java.lang.Double.doubleToRawLongBits(b) ||
    a.isNaN && b.isNaN

  // (x, ndigits, CPython's round(x, ndigits))
  private val python = Seq(
    (2.675, 2, 2.67), (0.125, 2, 0.12), (0.375, 2, 0.38), (-0.125, 2, -0.12), (2.5, 0, 2.0),
    (-2.5, 0, -2.0), (1.5, 0, 2.0), (1.005, 2, 1.0), (0.1 + 0.2, 17, 0.1 + 0.2), (0.15, 1, 0.1),
    (0.25, 1, 0.2), (0.35, 1, 0.3), (1234.5, -1, 1230.0), (1235.0, -1, 1240.0),
    (1250.0, -2, 1200.0), (-0.001, 2, -0.0), (-0.0, 2, -0.0), (0.0, -5, 0.0), (1e300, 2, 1e300),
    (1e300, -299, 1e300), (5e-324, 324, 5e-324), (5e-324, 323, 0.0), (-5e-324, 400, -5e-324),
    (123.456, -400, 0.0), (-123.456, -400, -0.0), (1.7976931348623157e308, -300, 1.79769313e308),
    (12345.6785, 3, 12345.678), (9007199254740993.0, 2, 9007199254740992.0), (0.5, -1, 0.0),
    (5.0, -1, 0.0), (15.0, -1, 20.0))

  test("the values where Python's round and Spark's differ, as CPython gives them") {
    python.foreach { case (x, n, expected) =>
      val got = PythonRounding.round(x, n)
      assert(same(got, expected), s"round($x, $n) is $got; Python gives $expected")
    }
  }

  test("nan, the infinities and zeros are returned as they are, whatever ndigits") {
    Seq(Double.NaN, Double.PositiveInfinity, Double.NegativeInfinity, 0.0, -0.0).foreach { x =>
      Seq(-400, -308, -1, 0, 2, 323, 400).foreach { n =>
        assert(same(PythonRounding.round(x, n), x), s"round($x, $n)")
      }
    }
  }

  test("a result past the largest double is infinite (the compiler raises OverflowError)") {
    assert(PythonRounding.round(1.7976931348623157e308, -308) == Double.PositiveInfinity)
    assert(PythonRounding.round(-1.7976931348623157e308, -308) == Double.NegativeInfinity)
  }

  test("random doubles round to the double nearest the exactly rounded decimal") {
    val random = new Random(41)
    (1 to 20000).foreach { i =>
      val x = if (i % 2 == 0) java.lang.Double.longBitsToDouble(random.nextLong())
      else (random.nextDouble() - 0.5) * math.pow(10, random.nextInt(40) - 20)
      val n = random.nextInt(40) - 20
      if (!x.isNaN && !x.isInfinite && x != 0.0) {
        val got = PythonRounding.round(x, n)
        val decimal = new JBigDecimal(x).setScale(n, RoundingMode.HALF_EVEN)
        if (!got.isInfinite && got != 0.0) {
          val distance = new JBigDecimal(got).subtract(decimal).abs
          Seq(math.nextUp(got), math.nextDown(got)).filterNot(_.isInfinite).foreach { other =>
            val otherDistance = new JBigDecimal(other).subtract(decimal).abs
            assert(distance.compareTo(otherDistance) <= 0,
              s"round($x, $n) is $got, but $other is nearer to $decimal")
          }
        } else if (got == 0.0) {
          assert(decimal.signum == 0 && math.copySign(1.0, got) == math.copySign(1.0, x),
            s"round($x, $n) is $got, the decimal is $decimal")
        }
      }
    }
  }

  test("the reserved function, generated and interpreted, from a DataFrame") {
    val session = spark
    import session.implicits._
    // By position, not by value: -0.0 = 0.0 in SQL. A column, not a literal, so that the
    // expression runs in the projection rather than in constant folding.
    val df = python.map(_._1).zipWithIndex.toDF("x", "i")
    Seq("CODEGEN_ONLY", "NO_CODEGEN").foreach { mode =>
      spark.conf.set("spark.sql.codegen.factoryMode", mode)
      try {
        python.zipWithIndex.foreach { case ((x, n, expected), i) =>
          val got = df.where(col("i") === i)
            .select(call_function(PythonRound.Name, col("x"), lit(n))).head().getDouble(0)
          assert(same(got, expected), s"$mode: round($x, $n) is $got; Python gives $expected")
        }
      } finally spark.conf.unset("spark.sql.codegen.factoryMode")
    }
    assert(spark.sql(s"SELECT ${PythonRound.Name}(CAST(NULL AS DOUBLE), 2)").head().isNullAt(0))
    assert(spark.sql(s"SELECT ${PythonRound.Name}(2, 0)").head().getDouble(0) == 2.0)
  }

  test("ndigits may be a column, and there are two arguments") {
    val session = spark
    import session.implicits._
    val df = python.map { case (x, n, _) => (x, n) }.toDF("x", "n")
    Seq("CODEGEN_ONLY", "NO_CODEGEN").foreach { mode =>
      spark.conf.set("spark.sql.codegen.factoryMode", mode)
      try {
        val got = df.select(call_function(PythonRound.Name, col("x"), col("n"))).collect()
        python.zip(got).foreach { case ((x, n, expected), row) =>
          assert(same(row.getDouble(0), expected), s"$mode: round($x, $n) is ${row.get(0)}")
        }
      } finally spark.conf.unset("spark.sql.codegen.factoryMode")
    }
    val arity = intercept[Exception](spark.sql(s"SELECT ${PythonRound.Name}(1.5D)"))
    assert(arity.getMessage.contains(PythonRound.Name), arity.getMessage)
  }
}
