package io.mapwithstate.pyfunc

import io.mapwithstate.LocalSpark
import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.expressions.{BindReferences, Expression, UnsafeProjection}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext
import org.apache.spark.sql.catalyst.plans.logical.Project
import org.scalatest.funsuite.AnyFunSuite

/**
 * `__mws_python_let(value, x -> body)`: the body with `x` bound to the value, generated and
 * interpreted alike, for null values, nested lets, lets inside a loop's lambda and a loop's
 * lambda inside a let, a body part that generates no code, code long enough for Spark to move
 * into methods of their own; a nest of lets analysed in time linear in its depth (nested
 * `transform`s take time exponential in it); canonical forms; the lambda argument's check.
 */
class PythonLetSuite extends AnyFunSuite with LocalSpark {

  private val Let = PythonLet.Name

  private def inMode[T](mode: String)(body: => T): T = {
    spark.conf.set("spark.sql.codegen.factoryMode", mode)
    try body
    finally spark.conf.unset("spark.sql.codegen.factoryMode")
  }

  /** `expressions` over a few rows (`a` BIGINT, `s` STRING, `xs` ARRAY<BIGINT>, `m` MAP),
   * with nulls, as rows, generated and interpreted: both must give the same. */
  private def both(expressions: String*): Seq[Row] = {
    val query = s"SELECT ${expressions.mkString(", ")} FROM VALUES " +
      "(1L, 'ab', array(1L, 2L, 3L), map('a', 1L, 'b', 5L)), " +
      "(CAST(NULL AS BIGINT), CAST(NULL AS STRING), array(4L, CAST(NULL AS BIGINT)), " +
      "map('c', 2L)), (-7L, 'é', CAST(NULL AS ARRAY<BIGINT>), CAST(NULL AS MAP<STRING, " +
      "BIGINT>)) AS t(a, s, xs, m)"
    val generated = inMode("CODEGEN_ONLY")(spark.sql(query).collect().toSeq)
    val interpreted = inMode("NO_CODEGEN")(spark.sql(query).collect().toSeq)
    assert(generated == interpreted)
    generated
  }

  test("the body sees the value, evaluated once; a null value is a null variable") {
    val rows = both(s"$Let(a * 2, x -> x + x)", s"$Let(a, x -> coalesce(x, -1L))",
      s"$Let(s, x -> concat(x, x))", s"$Let(CAST(NULL AS BIGINT), x -> x IS NULL)",
      s"$Let(named_struct('p', a, 'q', s), r -> r.q)", s"$Let(xs, v -> v IS NULL)",
      s"$Let(rand(41), r -> r = r)")
    assert(rows.map(_.toSeq) == Seq(
      Seq(4L, 1L, "abab", true, "ab", false, true),
      Seq(null, -1L, null, true, null, false, true),
      Seq(-28L, -7L, "éé", true, "é", true, true)))
  }

  test("nested lets, each value reading the names around it") {
    val rows = both(s"$Let(a + 1, x -> $Let(x * x, y -> $Let(y - x, z -> z + y + x)))",
      s"$Let(a, x -> $Let(x, x -> x + 1))")
    assert(rows.map(_.toSeq) == Seq(Seq(8L, 2L), Seq(null, null), Seq(72L, -6L)))
  }

  test("a let inside a loop's lambda, and a loop's lambda inside a let") {
    val rows = both(s"transform(xs, e -> $Let(e * 10, x -> x + x + coalesce(a, 0L)))",
      s"$Let(coalesce(a, 100L), x -> transform(xs, (e, i) -> e + x + i))",
      s"$Let(a, x -> aggregate(xs, 0L, (acc, e) -> acc + $Let(e + x, y -> y * y)))")
    assert(rows.map(_.toSeq) == Seq(
      Seq(Seq(21L, 41L, 61L), Seq(2L, 4L, 6L), 29L),
      Seq(Seq(80L, null), Seq(104L, null), null),
      Seq(null, null, null)))
  }

  test("a body part that generates no code reads the variable as the generated code set it") {
    // map_filter and array_sort with a comparator are CodegenFallback: they call eval.
    val rows = both(s"$Let(a, x -> map_filter(m, (k, v) -> v > x))",
      s"$Let(a, x -> array_sort(xs, (l, r) -> CASE WHEN l * x < r * x THEN -1 " +
        "WHEN l * x > r * x THEN 1 ELSE 0 END))")
    assert(rows.map(_.toSeq) == Seq(
      Seq(Map("b" -> 5L), Seq(1L, 2L, 3L)),
      Seq(Map(), Seq(4L, null)),
      Seq(null, null)))
  }

  /** The analysed expression of `sql` (one column over `a` BIGINT), bound to its input. */
  private def bound(sql: String): (Expression, Seq[org.apache.spark.sql.catalyst.InternalRow]) = {
    val df = spark.sql(s"SELECT $sql AS c FROM VALUES (1L), (CAST(NULL AS BIGINT)), (5L) AS t(a)")
    val plan = df.queryExecution.analyzed.asInstanceOf[Project]
    val input = spark.sql("SELECT * FROM VALUES (1L), (CAST(NULL AS BIGINT)), (5L) AS t(a)")
      .queryExecution.toRdd.collect().map(_.copy()).toSeq
    (BindReferences.bindReference(plan.projectList.head, plan.child.output), input)
  }

  test("a long value and a long body, in methods of their own, read the variable") {
    // Negations nested 40 deep: code Spark moves into methods of their own, in a projection
    // over rows, which read the variable's fields.
    def negated(e: String) = (1 to 40).foldLeft(e)((e, _) => s"-($e)")
    val value = negated("coalesce(a, 0L)")
    val (expression, input) = bound(s"$Let($value, x -> ${negated("x")} + x)")
    val ctx = new CodegenContext
    ctx.INPUT_ROW = "i"
    expression.genCode(ctx)
    assert(ctx.declareAddedFunctions().contains("lambdaValue"))
    val expected = input.map(r => if (r.isNullAt(0)) 0L else r.getLong(0) * 2)
    Seq("CODEGEN_ONLY", "NO_CODEGEN").foreach { mode =>
      inMode(mode) {
        val projection = UnsafeProjection.create(Seq(expression))
        assert(input.map(r => projection(r).getLong(0)) == expected, mode)
      }
    }
  }

  test("a nest of lets is analysed in time linear in its depth") {
    // Each value reads the variable before it twice. Nested transforms (the form this
    // replaces) take time doubling with each level to analyse: 40 levels would not finish.
    // The analyzer resolves one level a pass, so a nest is bounded by its passes
    // (spark.sql.analyzer.maxIterations, 100): 120 levels fail there.
    val depth = 80
    val nest = (1 to depth).foldRight(s"x$depth") { (i, body) =>
      s"$Let(x${i - 1} + x${i - 1} % 3, x$i -> $body)"
    }
    val started = System.nanoTime()
    val rows = spark.sql(s"SELECT $Let(a, x0 -> $nest) FROM VALUES (1L), (2L) AS t(a)")
      .collect()
    val seconds = (System.nanoTime() - started) / 1e9
    val expected = Seq(1L, 2L).map(a => (1 to depth).foldLeft(a)((x, _) => x + x % 3))
    assert(rows.map(_.getLong(0)).toSeq == expected)
    assert(seconds < 30, s"$depth nested lets took $seconds s")
  }

  test("lets compare by their canonical forms, whatever their variables' ids") {
    def analysed(sql: String): Expression = bound(sql)._1.children.head // under its alias
    val outer = s"$Let(a, x -> $Let(a + 1, y -> x))"
    val inner = s"$Let(a, x -> $Let(a + 1, y -> y))"
    assert(analysed(outer).semanticEquals(analysed(outer)))
    assert(!analysed(outer).semanticEquals(analysed(inner)))
    assert(analysed(outer).semanticHash() == analysed(outer).semanticHash())
  }

  test("the second argument must be a lambda function") {
    val error = intercept[Exception](spark.sql(s"SELECT $Let(1, 2)").collect())
    assert(error.getMessage.contains(Let), error.getMessage)
    assert(error.getMessage.contains("lambda"), error.getMessage)
  }
}
