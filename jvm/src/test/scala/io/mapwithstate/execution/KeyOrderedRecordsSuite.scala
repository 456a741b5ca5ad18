package io.mapwithstate.execution

import scala.util.Random

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.{DataType, IntegerType, LongType, StringType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * The RocksDB backend's input order: every record comes out once, each key's records in the
 * order they came in (within a chunk and across chunks), and within a chunk the keys in the
 * unsigned byte order of their rows — the order a RocksDB store keeps them in.
 */
class KeyOrderedRecordsSuite extends AnyFunSuite {

  /** (key, sequence number) rows, as UnsafeRows reused by the iterator as a shuffle's are. */
  private def records(keys: Seq[Any], keyType: DataType): Iterator[UnsafeRow] = {
    val project = UnsafeProjection.create(Seq(
        BoundReference(0, keyType, nullable = true),
        BoundReference(1, IntegerType, nullable = false)))
    keys.iterator.zipWithIndex.map { case (k, i) =>
      project(InternalRow(k, i)) // the projection reuses its row: the iterator must copy
    }
  }

  private def keyRow(row: InternalRow, keyType: DataType): UnsafeRow =
    UnsafeProjection.create(Seq(BoundReference(0, keyType, nullable = true)))(row).copy()

  private def check(keys: Seq[Any], keyType: DataType, maxRows: Int): Unit = {
    val out = new KeyOrderedRecords(records(keys, keyType), Seq(0), Seq(keyType), maxRows)
      .map(r => (keyRow(r, keyType), r.getInt(1))).toVector
    // Every record once.
    assert(out.map(_._2).sorted == keys.indices)
    // Each key's records in their input order.
    out.groupBy(_._1).values.foreach { rs => assert(rs.map(_._2) == rs.map(_._2).sorted) }
    // Within each chunk, keys in byte order; chunks in input order.
    out.grouped(maxRows).zipWithIndex.foreach { case (chunk, c) =>
      assert(chunk.map(_._2).forall(i => i / maxRows == c))
      chunk.sliding(2).foreach {
        case Seq(a, b) => assert(KeyOrderedRecords.compareBytes(a._1, b._1) <= 0)
        case _ =>
      }
    }
  }

  test("long keys: every record once, each key's records in order, keys in byte order") {
    val rnd = new Random(7)
    val keys = Seq.fill(5000)(rnd.nextInt(300).toLong * 1000003L - 150000000L)
    check(keys, LongType, maxRows = 1 << 16)
    check(keys, LongType, maxRows = 777)
  }

  test("string keys of any length, and null keys") {
    val rnd = new Random(11)
    val pool = Seq.fill(50)(UTF8String.fromString(rnd.alphanumeric.take(rnd.nextInt(30)).mkString))
    val keys = Seq.fill(3000)(if (rnd.nextInt(20) == 0) null else pool(rnd.nextInt(pool.size)))
    check(keys, StringType, maxRows = 1 << 16)
    check(keys, StringType, maxRows = 100)
  }

  test("byte order is unsigned and first byte first") {
    def row(bytes: Int*): UnsafeRow = {
      val r = new UnsafeRow(1)
      val data = new Array[Byte](16)
      bytes.zipWithIndex.foreach { case (b, i) => data(8 + i) = b.toByte }
      r.pointTo(data, 16)
      r
    }
    assert(KeyOrderedRecords.compareBytes(row(0x01), row(0xff)) < 0) // 0xff unsigned: larger
    assert(KeyOrderedRecords.compareBytes(row(0x02, 0x00), row(0x01, 0xff)) > 0) // first byte
    assert(KeyOrderedRecords.compareBytes(row(0x05), row(0x05)) == 0)
  }

  test("records that are not UnsafeRows, among UnsafeRows, come out as they went in") {
    val rnd = new Random(3)
    val keys = Seq.fill(2000)(rnd.nextInt(100).toLong)
    val mixed = records(keys, LongType).zipWithIndex.map { case (r, i) =>
      if (i % 3 == 0) InternalRow(r.getLong(0), r.getInt(1)) else r
    }
    val out = new KeyOrderedRecords(mixed, Seq(0), Seq(LongType), maxRows = 500)
      .map(r => (r.getLong(0), r.getInt(1))).toVector
    assert(out.map(_._2).sorted == keys.indices)
    assert(out.forall { case (k, i) => keys(i) == k })
    out.groupBy(_._1).values.foreach { rs => assert(rs.map(_._2) == rs.map(_._2).sorted) }
  }

  test("a chunk ends at its byte budget too, and an empty input is empty") {
    val keys = (0 until 1000).map(i => (i % 37).toLong)
    val small = new KeyOrderedRecords(records(keys, LongType), Seq(0), Seq(LongType),
      maxRows = 1 << 16, maxBytes = 4096)
    val seqs = small.map(_.getInt(1)).toVector
    assert(seqs.sorted == keys.indices)
    // 4 KB holds far fewer than 1000 rows: the first output rows all come from an early chunk.
    assert(seqs.take(10).max < 500)
    assert(!new KeyOrderedRecords(Iterator.empty, Seq(0), Seq(LongType)).hasNext)
  }
}
