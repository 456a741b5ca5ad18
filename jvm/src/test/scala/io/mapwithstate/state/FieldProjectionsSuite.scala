package io.mapwithstate.state

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.util.{ArrayBasedMapData, GenericArrayData}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * The JVM's field projections ([[FieldProjections]]): their rows are byte for byte those of
 * `UnsafeProjection.create` (what the state's stores and checkpoints hold), each call gets an
 * instance of its own (its own row buffer), and a list of fields is generated once.
 */
class FieldProjectionsSuite extends AnyFunSuite {

  private val types: Seq[DataType] = Seq(LongType, StringType, DecimalType(38, 6),
    DecimalType(10, 2), TimestampType, BooleanType, DoubleType,
    ArrayType(StringType), MapType(StringType, LongType),
    new StructType().add("a", IntegerType).add("b",
      ArrayType(new StructType().add("c", StringType))))

  private val rows: Seq[InternalRow] = Seq(
    InternalRow(1L, UTF8String.fromString("é—x"),
      Decimal(BigDecimal("12345678901234567890.123456"), 38, 6),
      Decimal(BigDecimal("-3.25"), 10, 2), 1700000000000000L, true, -0.0,
      new GenericArrayData(Array[Any](UTF8String.fromString(""), null)),
      ArrayBasedMapData(Map(UTF8String.fromString("k") -> 7L)),
      InternalRow(5,
        new GenericArrayData(Array[Any](InternalRow(UTF8String.fromString("z")), null)))),
    InternalRow(Seq.fill(10)(null): _*))

  private def bytes(row: UnsafeRow): Seq[Byte] = row.getBytes.toSeq

  test("the same bytes as UnsafeProjection.create, for every type, nested and null") {
    val fields = types.zipWithIndex.map { case (t, i) => BoundReference(i, t, nullable = true) }
    val ours = FieldProjections.create(fields)
    val spark = UnsafeProjection.create(fields)
    rows.foreach(r => assert(bytes(ours(r)) == bytes(spark(r))))
    // Fields taken from later ordinals, in another order, one not nullable.
    val picked = Seq(BoundReference(4, TimestampType, nullable = true),
      BoundReference(0, LongType, nullable = false), BoundReference(9, types(9), nullable = true))
    assert(bytes(FieldProjections.create(picked)(rows.head)) ==
      bytes(UnsafeProjection.create(picked)(rows.head)))
    assert(bytes(FieldProjections.of(types.drop(7), from = 7)(rows(1))) ==
      bytes(UnsafeProjection.create(types.drop(7).zipWithIndex.map { case (t, i) =>
        BoundReference(7 + i, t, nullable = true)
      })(rows(1))))
  }

  test("a list of fields is generated once; each call gets its own instance and buffer") {
    val fields = Seq(StringType, LongType, DecimalType(20, 3))
    val first = FieldProjections.of(fields, from = 1)
    val generated = FieldProjections.generations
    val second = FieldProjections.of(fields, from = 1)
    assert(FieldProjections.generations == generated)
    assert(second ne first)
    val a = first(InternalRow(0, UTF8String.fromString("a"), 1L, null))
    val b = second(InternalRow(0, UTF8String.fromString("bb"), 2L, null))
    assert(a ne b)
    assert(a.getUTF8String(0).toString == "a" && b.getUTF8String(0).toString == "bb")
    // Another list (another ordinal) is a class of its own.
    FieldProjections.of(fields, from = 2)
    assert(FieldProjections.generations == generated + 1)
  }
}
