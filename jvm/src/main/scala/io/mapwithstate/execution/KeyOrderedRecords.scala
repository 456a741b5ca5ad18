package io.mapwithstate.execution

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.DataType
import org.apache.spark.unsafe.Platform

/**
 * A micro-batch's records reordered, a chunk at a time, by their key's bytes, keeping the
 * order of each key's records: what a store that keeps its keys sorted on disk (RocksDB) reads
 * fastest. Keys read in the store's order fall in the data blocks just read, so a batch that
 * touches a tenth of a partition's keys reads each block once instead of once per key (the
 * block cache holds a few blocks, not the partition). The order of one key's records is all
 * mapWithState's semantics depend on; rows of different keys were in no promised order.
 *
 * A chunk is at most `maxRows` records or `maxBytes` of them (copied on the heap); records of
 * a key in a later chunk come after those in an earlier one, so each key's order holds across
 * chunks too.
 *
 * @param records  one micro-batch's records (a one-batch timeline: the order across keys free)
 * @param keyOrdinals where the key columns are in the records
 * @param keyTypes the key columns' types
 */
final class KeyOrderedRecords(
    records: Iterator[InternalRow],
    keyOrdinals: Seq[Int],
    keyTypes: Seq[DataType],
    maxRows: Int = KeyOrderedRecords.DefaultMaxRows,
    maxBytes: Long = KeyOrderedRecords.DefaultMaxBytes) extends Iterator[InternalRow] {

  private val keyOf = UnsafeProjection.create(
    keyOrdinals.zip(keyTypes).map { case (o, t) => BoundReference(o, t, nullable = true) })

  private var rows = new Array[InternalRow](0)
  private var keys = new Array[UnsafeRow](0)
  private var order = new Array[Integer](0)
  private var filled = 0
  private var at = 0

  override def hasNext: Boolean = at < filled || { fill(); at < filled }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException
    val row = rows(order(at))
    at += 1
    row
  }

  /** Reads the next chunk and sorts it (stable: equal keys keep their order). */
  private def fill(): Unit = {
    java.util.Arrays.fill(rows.asInstanceOf[Array[AnyRef]], 0, filled, null)
    filled = 0
    at = 0
    var bytes = 0L
    while (records.hasNext && filled < maxRows && bytes < maxBytes) {
      val row = records.next().copy()
      val key = keyOf(row).copy()
      if (filled == rows.length) grow()
      rows(filled) = row
      keys(filled) = key
      order(filled) = filled
      bytes += key.getSizeInBytes + (row match {
        case u: UnsafeRow => u.getSizeInBytes
        case _ => 64
      })
      filled += 1
    }
    java.util.Arrays.sort(order, 0, filled, (a: Integer, b: Integer) => {
      val c = KeyOrderedRecords.compareBytes(keys(a), keys(b))
      if (c != 0) c else Integer.compare(a, b)
    })
  }

  private def grow(): Unit = {
    val n = math.max(16, rows.length * 2)
    rows = java.util.Arrays.copyOf(rows.asInstanceOf[Array[AnyRef]], n)
      .asInstanceOf[Array[InternalRow]]
    keys = java.util.Arrays.copyOf(keys.asInstanceOf[Array[AnyRef]], n)
      .asInstanceOf[Array[UnsafeRow]]
    order = java.util.Arrays.copyOf(order.asInstanceOf[Array[AnyRef]], n)
      .asInstanceOf[Array[Integer]]
  }
}

object KeyOrderedRecords {
  val DefaultMaxRows: Int = 1 << 16
  val DefaultMaxBytes: Long = 32L << 20

  /** The rows' bytes compared as unsigned bytes, first to last (RocksDB's default order). */
  def compareBytes(a: UnsafeRow, b: UnsafeRow): Int = {
    val (ab, ao, al) = (a.getBaseObject, a.getBaseOffset, a.getSizeInBytes)
    val (bb, bo, bl) = (b.getBaseObject, b.getBaseOffset, b.getSizeInBytes)
    val n = math.min(al, bl)
    var i = 0
    while (i + 8 <= n) {
      val x = Platform.getLong(ab, ao + i)
      val y = Platform.getLong(bb, bo + i)
      if (x != y) {
        // Bytes in memory order, first byte most significant.
        val (bx, by) =
          if (java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN) {
            (java.lang.Long.reverseBytes(x), java.lang.Long.reverseBytes(y))
          } else (x, y)
        return java.lang.Long.compareUnsigned(bx, by)
      }
      i += 8
    }
    while (i < n) {
      val c = (Platform.getByte(ab, ao + i) & 0xff) - (Platform.getByte(bb, bo + i) & 0xff)
      if (c != 0) return c
      i += 1
    }
    Integer.compare(al, bl)
  }
}
