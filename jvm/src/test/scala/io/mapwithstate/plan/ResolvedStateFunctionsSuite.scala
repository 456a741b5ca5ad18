package io.mapwithstate.plan

import io.mapwithstate.LocalSpark
import io.mapwithstate.pyfunc.PythonRound
import org.apache.spark.sql.catalyst.analysis.{UnresolvedAttribute, UnresolvedFunction}
import org.apache.spark.sql.catalyst.expressions.{
  Add,
  Alias,
  Attribute,
  AttributeReference,
  Cast,
  Expression,
  Literal
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{
  DoubleType,
  IntegerType,
  LongType,
  StringType,
  StructType,
  TimestampType
}
import org.scalatest.funsuite.AnyFunSuite

/**
 * The session's cache of resolved state functions ([[ResolvedStateFunctions]]): a function
 * resolved again for the same input is not analyzed again, and one whose resolution would
 * differ — another input schema, another time zone or ANSI mode — is resolved anew, never
 * taken from the cache.
 */
class ResolvedStateFunctionsSuite extends AnyFunSuite with LocalSpark {

  private def column(name: String, dataType: org.apache.spark.sql.types.DataType): Attribute =
    AttributeReference(name, dataType)()

  /** `struct(<e> AS out)` as a request sends it: a fresh alias id every time it is built. */
  private def emitOf(e: Expression): Expression =
    UnresolvedFunction("struct", Seq(Alias(e, "out")()), isDistinct = false)

  private def resolve(columns: Seq[Attribute], emit: Expression): (StateFunction, Long) = {
    val before = ResolvedStateFunctions.resolutions
    val f = new StateFunctionResolver(spark).resolve(columns, new StructType().add("n", LongType),
      update = None, remove = None, emit = Some(emit))
    (f, ResolvedStateFunctions.resolutions - before)
  }

  /** The resolved `out` field's expression. */
  private def out(f: StateFunction): Expression = f.emit.get.children(1)

  private def withConf[T](key: String, value: String)(body: => T): T = {
    val old = spark.conf.getOption(key)
    spark.conf.set(key, value)
    try body
    finally old.fold(spark.conf.unset(key))(spark.conf.set(key, _))
  }

  test("the same function over the same input is analyzed once, with fresh attributes") {
    val plusOne = () => emitOf(Add(UnresolvedAttribute("a"), Literal(1)))
    val (first, _) = resolve(Seq(column("a", IntegerType)), plusOne())
    val (second, analyzed) = resolve(Seq(column("a", IntegerType)), plusOne())
    assert(analyzed == 0)
    assert(second.emit.get.sql == first.emit.get.sql)
    assert(second.emitType == first.emitType)
    // Its own attributes, as a new resolution has: the same names, new ids, bound in its emit.
    assert(second.dataAttributes.map(_.name) == first.dataAttributes.map(_.name))
    assert(second.dataAttributes.map(_.exprId).intersect(first.dataAttributes.map(_.exprId))
        .isEmpty)
    assert(second.emit.get.references.subsetOf(
        org.apache.spark.sql.catalyst.expressions.AttributeSet(second.inputAttributes)))
  }

  test("another input schema resolves anew") {
    val plusOne = () => emitOf(Add(UnresolvedAttribute("a"), Literal(1)))
    val (ints, _) = resolve(Seq(column("a", IntegerType)), plusOne())
    val (longs, analyzed) = resolve(Seq(column("a", LongType)), plusOne())
    assert(analyzed == 1)
    assert(ints.emitType("out").dataType == IntegerType)
    assert(longs.emitType("out").dataType == LongType)
  }

  /**
   * Resolves the same function (one request's expression, built once) under each value of a
   * conf in turn, and checks each against the analyzer's own answer under that value, made
   * without the cache; returns the answers, which must differ between values.
   */
  private def underEach(key: String, values: Seq[String], columns: Seq[Attribute],
      emit: Expression): Seq[String] = values.map { value =>
    withConf(key, value) {
      val cached = resolve(columns, emit)._1.emit.get
      val analyzed = new StateFunctionResolver(spark).analyze(emit, columns, "emit")
      assert(cached.sql == analyzed.sql, s"under $key=$value")
      assert(cached.dataType == analyzed.dataType, s"under $key=$value")
      s"${cached.sql}: ${cached.dataType.sql}"
    }
  }

  test("another time zone resolves anew: a cast to TIMESTAMP keeps the session's zone") {
    val zones = Seq("UTC", "America/Los_Angeles", "UTC")
    val emit = emitOf(Cast(UnresolvedAttribute("s"), TimestampType))
    val input = Seq(column("s", StringType))
    underEach(SQLConf.SESSION_LOCAL_TIMEZONE.key, zones, input, emit)
    val resolved = zones.map { zone =>
      withConf(SQLConf.SESSION_LOCAL_TIMEZONE.key, zone)(resolve(input, emit)._1)
    }
    assert(resolved.map(f => out(f).asInstanceOf[Cast].timeZoneId) == zones.map(Some(_)))
  }

  test("another ANSI mode resolves anew: INT + STRING coerces differently") {
    val emit = emitOf(Add(UnresolvedAttribute("a"), UnresolvedAttribute("s")))
    val answers = underEach(SQLConf.ANSI_ENABLED.key, Seq("true", "false", "true"),
      Seq(column("a", IntegerType), column("s", StringType)), emit)
    assert(answers(0) != answers(1) && answers(0) == answers(2))
  }

  test("the Python compiler's functions are cached; a temporary function is not") {
    val rounded = () =>
      emitOf(UnresolvedFunction(PythonRound.Name,
          Seq(UnresolvedAttribute("d"), Literal(1)), isDistinct = false))
    resolve(Seq(column("d", DoubleType)), rounded())
    assert(resolve(Seq(column("d", DoubleType)), rounded())._2 == 0)
    spark.udf.register("plus_one", (x: Int) => x + 1)
    try {
      val temp = () =>
        emitOf(UnresolvedFunction("plus_one", Seq(UnresolvedAttribute("a")),
            isDistinct = false))
      resolve(Seq(column("a", IntegerType)), temp())
      assert(resolve(Seq(column("a", IntegerType)), temp())._2 == 1)
    } finally spark.sessionState.catalog.dropTempFunction("plus_one", ignoreIfNotExists = true)
  }

  test("a nondeterministic function is resolved for every query (rand() draws its seed)") {
    val random = () => emitOf(UnresolvedFunction("rand", Nil, isDistinct = false))
    val (first, _) = resolve(Seq(column("a", IntegerType)), random())
    val (second, analyzed) = resolve(Seq(column("a", IntegerType)), random())
    assert(analyzed == 1)
    assert(out(first) != out(second))
  }
}
