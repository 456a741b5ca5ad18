package io.mapwithstate.pyfunc

import scala.util.Random

import io.mapwithstate.LocalSpark
import org.apache.spark.sql.functions.{call_function, col}
import org.scalatest.funsuite.AnyFunSuite

/**
 * `__mws_python_mod_pow` against CPython's `pow(a, b, m)` of ints: the values CPython 3.11
 * gives (signs of the modulus, negative exponents and their inverses, the 64-bit bounds), null
 * where Python raises ValueError; random arguments against Python's definition over exact
 * integers; and the expression through Spark, generated and interpreted, as the compiler calls
 * it.
 */
class PythonModPowSuite extends AnyFunSuite with LocalSpark {

  private val Max = Long.MaxValue
  private val Min = Long.MinValue

  // (a, b, m, CPython's pow(a, b, m), or None where it raises ValueError)
  private val python: Seq[(Long, Long, Long, Option[Long])] = Seq(
    (3L, -1L, 7L, Some(5L)), (3L, -1L, -7L, Some(-2L)), (5L, 0L, -3L, Some(-2L)),
    (2L, -1L, 1L, Some(0L)), (0L, -1L, -1L, Some(0L)), (0L, 0L, 5L, Some(1L)),
    (0L, 0L, -5L, Some(-4L)), (-3L, 3L, 10L, Some(3L)), (3L, 3L, -10L, Some(-3L)),
    (-3L, 3L, -10L, Some(-7L)), (7L, -2L, -9L, Some(-2L)), (Max, Max, Min, Some(-1L)),
    (Min, Max, Max, Some(Max - 1)), (Min, -1L, Max, Some(Max - 1)), (Max, -3L, Min, Some(-1L)),
    (2L, 63L, Min, Some(0L)), (-2L, 63L, Min, Some(0L)),
    (123456789L, 987654321L, 1000000007L, Some(652541198L)),
    (-1L, -1L, 1L << 62, Some((1L << 62) - 1)), (2L, -1L, 4L, None), (0L, -1L, 7L, None),
    (6L, -5L, -9L, None), (5L, 3L, 0L, None), (0L, 0L, 0L, None))

  /** Python's pow(a, b, m) over exact integers, from its definition. */
  private def definition(a: Long, b: Long, m: Long): Option[Long] =
    if (m == 0) {
      None
    } else {
      val size = BigInt(m).abs
      val base =
        if (size == 1 || b >= 0) Some(BigInt(a))
        else if (BigInt(a).gcd(size) != 1) None
        else Some(BigInt(a).modInverse(size))
      base.map { x =>
        val r = if (size == 1) BigInt(0) else x.modPow(BigInt(b).abs, size)
        (if (m < 0 && r != 0) r - size else r).toLong
      }
    }

  private def call(a: Long, b: Long, m: Long): Option[Long] =
    Option(PythonModPow.modPow(a, b, m)).map(_.longValue)

  test("the values CPython gives, and null where it raises ValueError") {
    python.foreach { case (a, b, m, expected) =>
      assert(call(a, b, m) == expected, s"pow($a, $b, $m): Python gives $expected")
    }
  }

  test("random arguments and the 64-bit bounds follow Python's definition") {
    val random = new Random(41)
    val bounds = Seq(Min, Min + 1, -7L, -2L, -1L, 0L, 1L, 2L, 7L, Max - 1, Max)
    val triples = (for (a <- bounds; b <- bounds; m <- bounds) yield (a, b, m)) ++
      Seq.fill(20000) {
        def draw(): Long = random.nextLong() >> random.nextInt(64)
        (draw(), draw(), draw())
      }
    triples.foreach { case (a, b, m) =>
      assert(call(a, b, m) == definition(a, b, m), s"pow($a, $b, $m)")
    }
  }

  test("the reserved function, generated and interpreted, from a DataFrame") {
    val session = spark
    import session.implicits._
    // Columns, not literals, so that the expression runs in the projection.
    val df = python.map { case (a, b, m, _) => (a, b, m) }.toDF("a", "b", "m")
    Seq("CODEGEN_ONLY", "NO_CODEGEN").foreach { mode =>
      spark.conf.set("spark.sql.codegen.factoryMode", mode)
      try {
        val got = df.select(call_function(PythonModPow.Name, col("a"), col("b"), col("m")))
          .collect().map(r => if (r.isNullAt(0)) None else Some(r.getLong(0))).toSeq
        assert(got == python.map(_._4), mode)
      } finally spark.conf.unset("spark.sql.codegen.factoryMode")
    }
    assert(spark.sql(s"SELECT ${PythonModPow.Name}(NULL, 2, 5)").head().isNullAt(0))
    assert(spark.sql(s"SELECT ${PythonModPow.Name}(3, 2, 5)").head().getLong(0) == 4L)
    val arity = intercept[Exception](spark.sql(s"SELECT ${PythonModPow.Name}(3, 2)"))
    assert(arity.getMessage.contains(PythonModPow.Name), arity.getMessage)
  }
}
