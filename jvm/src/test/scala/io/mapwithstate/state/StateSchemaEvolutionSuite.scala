package io.mapwithstate.state

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.util.{ArrayBasedMapData, GenericArrayData}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * The schema evolution rules ([[StateSchemaEvolution]]): each allowed change converts real rows
 * (nested ones included) to the new schema, and each refused change names its field's path,
 * both types and why.
 */
class StateSchemaEvolutionSuite extends AnyFunSuite {
  import StateSchemaEvolution._

  private def schema(ddl: String): StructType = StructType.fromDDL(ddl)

  private def allowed(from: String, to: String): Conversion =
    plan(schema(from), schema(to)) match {
      case Right(conversion) => conversion
      case Left(problems) => fail(s"$from -> $to refused: ${problems.map(_.describe)}")
    }

  private def refused(from: String, to: String): Seq[Incompatibility] =
    plan(schema(from), schema(to)) match {
      case Right(_) => fail(s"$from -> $to allowed")
      case Left(problems) => problems
    }

  private def s(text: String): UTF8String = UTF8String.fromString(text)

  test("an unchanged schema, or one with only nullability relaxed, keeps stored rows") {
    assert(allowed("a INT, b STRING", "a INT, b STRING").identity)
    val relaxed = plan(schema("a INT, b STRING").add("c", LongType, nullable = false),
      schema("a INT, b STRING, c BIGINT"))
    assert(relaxed.toOption.get.identity)
  }

  test("added, dropped and reordered fields") {
    val conversion = allowed("a INT, b STRING, c BIGINT", "c BIGINT, a INT, d DOUBLE")
    assert(!conversion.identity)
    val row = conversion(InternalRow(1, s("x"), 3L))
    assert(row.getLong(0) === 3L)
    assert(row.getInt(1) === 1)
    assert(row.isNullAt(2))
    assert(row.numFields === 3)
  }

  test("every allowed widening converts the value") {
    val widenings = Seq(
      ("TINYINT", "SMALLINT", 7.toByte, (r: InternalRow) => r.getShort(0) === 7),
      ("TINYINT", "BIGINT", (-7).toByte, (r: InternalRow) => r.getLong(0) === -7L),
      ("SMALLINT", "INT", 300.toShort, (r: InternalRow) => r.getInt(0) === 300),
      ("INT", "BIGINT", Int.MaxValue, (r: InternalRow) => r.getLong(0) === Int.MaxValue.toLong),
      ("INT", "DOUBLE", 5, (r: InternalRow) => r.getDouble(0) === 5.0),
      ("BIGINT", "DOUBLE", 1L << 40, (r: InternalRow) => r.getDouble(0) === (1L << 40).toDouble),
      ("FLOAT", "DOUBLE", 1.5f, (r: InternalRow) => r.getDouble(0) === 1.5))
    widenings.foreach { case (from, to, value, check) =>
      val row = allowed(s"v $from", s"v $to")(InternalRow(value))
      assert(check(row), s"$from -> $to of $value")
    }
    val decimal = allowed("v DECIMAL(5,2)", "v DECIMAL(8,3)")(
      InternalRow(Decimal(BigDecimal("123.45"), 5, 2)))
    assert(decimal.getDecimal(0, 8, 3).toBigDecimal === BigDecimal("123.450"))
  }

  test("changes inside nested structs, array elements and map values") {
    val conversion = allowed(
      "s STRUCT<x: INT, y: STRING>, a ARRAY<STRUCT<p: INT, q: INT>>, m MAP<STRING, INT>",
      "s STRUCT<y: STRING, x: BIGINT, z: INT>, a ARRAY<STRUCT<q: BIGINT>>, m MAP<STRING, DOUBLE>")
    val row = conversion(InternalRow(
        InternalRow(1, s("y")),
        new GenericArrayData(Array[Any](InternalRow(1, 2), null, InternalRow(3, 4))),
        ArrayBasedMapData(Map(s("k") -> 2))))
    val struct = row.getStruct(0, 3)
    assert(struct.getUTF8String(0).toString === "y")
    assert(struct.getLong(1) === 1L)
    assert(struct.isNullAt(2))
    val array = row.getArray(1)
    assert(array.numElements() === 3)
    assert(array.getStruct(0, 1).getLong(0) === 2L)
    assert(array.isNullAt(1))
    assert(array.getStruct(2, 1).getLong(0) === 4L)
    val map = row.getMap(2)
    assert(map.keyArray().getUTF8String(0).toString === "k")
    assert(map.valueArray().getDouble(0) === 2.0)
    // A null struct stays null.
    assert(conversion(InternalRow(null, null, null)).isNullAt(0))
  }

  test("narrowing and other type changes are refused, naming path and types") {
    val problems = refused("a BIGINT, b STRING, c DOUBLE, d DECIMAL(8,3)",
      "a INT, b INT, c FLOAT, d DECIMAL(8,2)")
    assert(problems.map(_.path) === Seq("a", "b", "c", "d"))
    assert(problems.head.describe.startsWith("a: BIGINT -> INT (not a widening"))
    assert(problems(1).describe.startsWith("b: STRING -> INT"))
    assert(problems(3).describe.contains("DECIMAL(8,3) -> DECIMAL(8,2)"))
    // Fewer integer digits: 12345.6 does not fit DECIMAL(6,2).
    assert(refused("d DECIMAL(6,1)", "d DECIMAL(6,2)").head.reason.contains("integer digits"))
  }

  test("nested refusals name their path") {
    val problems = refused(
      "s STRUCT<x: INT, t: STRUCT<y: BIGINT>>, a ARRAY<STRUCT<c: STRING>>, m MAP<INT, STRING>",
      "s STRUCT<x: INT, t: STRUCT<y: INT>>, a ARRAY<STRUCT<c: INT>>, m MAP<INT, INT>")
    assert(problems.map(_.path) === Seq("s.t.y", "a[].c", "m{}"))
    assert(problems(1).oldType === Some(StringType) && problems(1).newType === Some(IntegerType))
  }

  test("a changed map key is refused") {
    val problem = refused("m MAP<INT, STRING>", "m MAP<BIGINT, STRING>").head
    assert(problem.path === "m")
    assert(problem.reason.contains("key type changes from INT to BIGINT"))
  }

  test("a field becoming NOT NULL, or added NOT NULL, is refused; the reverse is allowed") {
    val nullable = schema("a INT, b ARRAY<INT>")
    val strict = new StructType().add("a", IntegerType, nullable = false)
      .add("b", ArrayType(IntegerType, containsNull = false))
    val problems = plan(nullable, strict).left.toOption.get
    assert(problems.map(_.path) === Seq("a", "b[]"))
    assert(problems.head.reason.contains("becomes NOT NULL"))
    assert(plan(strict, nullable).isRight)
    val added = plan(nullable, nullable.add("c", LongType, nullable = false)).left.toOption.get
    assert(added.map(_.describe) === Seq(
      "c: (absent) -> BIGINT (added as NOT NULL, but existing keys have no value for it: " +
        "add it nullable)"))
  }

  test("a field dropped and another of the same type added is a likely rename, refused") {
    val problems = refused("count BIGINT, seen STRING", "n BIGINT, seen STRING, note STRING")
    assert(problems.size === 1)
    val rename = problems.head
    assert(rename.path === "n" && rename.oldType.isEmpty && rename.newType === Some(LongType))
    assert(rename.reason.contains("count of the same type is dropped"))
    assert(rename.reason.contains("a rename needs a migration that sets n from the old " +
        "state's count"))
    // Inside a struct too; a drop and an add of different types is no rename.
    assert(refused("s STRUCT<a: INT>", "s STRUCT<b: INT>").head.path === "s.b")
    assert(allowed("a INT", "b STRING").newSchema.fieldNames.toSeq === Seq("b"))
  }
}
