package io.mapwithstate.execution

import org.apache.spark.sql.catalyst.InternalRow
import io.mapwithstate.state.FieldProjections
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeRow}
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
 * A chunk is at most `maxRows` records or `maxBytes` of their bytes; records of a key in a
 * later chunk come after those in an earlier one, so each key's order holds across chunks too.
 * The chunk's rows and keys are copied into two byte arenas reused from chunk to chunk (no
 * objects per record: a growth batch of 1M records would otherwise leave millions behind for
 * the collector), and the rows handed out are one [[UnsafeRow]] pointed at each in turn, valid
 * until the next call — as a shuffle reader's are. A record that is not an UnsafeRow is kept
 * as a copy of itself.
 *
 * @param records     one micro-batch's records (a one-batch timeline: the order across keys
 *                    free)
 * @param keyOrdinals where the key columns are in the records
 * @param keyTypes    the key columns' types
 */
final class KeyOrderedRecords(
    records: Iterator[InternalRow],
    keyOrdinals: Seq[Int],
    keyTypes: Seq[DataType],
    maxRows: Int = KeyOrderedRecords.DefaultMaxRows,
    maxBytes: Long = KeyOrderedRecords.DefaultMaxBytes) extends Iterator[InternalRow] {

  require(maxRows >= 1 && maxBytes >= 1,
    s"maxRows $maxRows and maxBytes $maxBytes must be positive")

  private val keyOf = FieldProjections.create(
    keyOrdinals.zip(keyTypes).map { case (o, t) => BoundReference(o, t, nullable = true) })

  private var rowData = new Array[Byte](1 << 16)
  private var keyData = new Array[Byte](1 << 14)
  private var rowEnd = 0
  private var keyEnd = 0
  // Per record of the chunk, by arrival: where its row and key are in the arenas (a row length
  // of -1: the record is in `objects`).
  private var rowOffset = new Array[Int](0)
  private var rowLength = new Array[Int](0)
  private var keyOffset = new Array[Int](0)
  private var keyLength = new Array[Int](0)
  private var objects: Array[InternalRow] = null
  // The arrival numbers, sorted; boxed once each (`numbers`) and reused, not per record.
  private var order = new Array[Integer](0)
  private var numbers = new Array[Integer](0)
  private var out: UnsafeRow = null
  private var filled = 0
  private var at = 0

  private val byKey: java.util.Comparator[Integer] = (a: Integer, b: Integer) => {
    val (i, j) = (a.intValue, b.intValue)
    val c = KeyOrderedRecords.compareBytes(keyData, Platform.BYTE_ARRAY_OFFSET + keyOffset(i),
      keyLength(i), keyData, Platform.BYTE_ARRAY_OFFSET + keyOffset(j), keyLength(j))
    if (c != 0) c else Integer.compare(i, j)
  }

  override def hasNext: Boolean = at < filled || { fill(); at < filled }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException
    val i = order(at).intValue
    at += 1
    if (rowLength(i) < 0) objects(i)
    else {
      out.pointTo(rowData, Platform.BYTE_ARRAY_OFFSET + rowOffset(i), rowLength(i))
      out
    }
  }

  /** Reads the next chunk and sorts it (stable: a key's records keep their order). */
  private def fill(): Unit = {
    if (objects != null) java.util.Arrays.fill(objects.asInstanceOf[Array[AnyRef]], 0, filled, null)
    filled = 0
    at = 0
    rowEnd = 0
    keyEnd = 0
    while (records.hasNext && filled < maxRows && rowEnd.toLong + keyEnd < maxBytes) {
      val row = records.next()
      if (filled == order.length) grow()
      val key = keyOf(row)
      keyOffset(filled) = keyEnd
      keyLength(filled) = key.getSizeInBytes
      keyData = append(keyData, keyEnd, key)
      keyEnd += key.getSizeInBytes
      row match {
        case u: UnsafeRow =>
          if (out == null) out = new UnsafeRow(u.numFields)
          rowOffset(filled) = rowEnd
          rowLength(filled) = u.getSizeInBytes
          rowData = append(rowData, rowEnd, u)
          rowEnd += u.getSizeInBytes
        case other =>
          if (objects == null) objects = new Array[InternalRow](order.length)
          objects(filled) = other.copy()
          rowLength(filled) = -1
      }
      order(filled) = numbers(filled)
      filled += 1
    }
    java.util.Arrays.sort(order, 0, filled, byKey)
  }

  /** `row`'s bytes copied into `arena` at `end`; the arena, grown if it had to. */
  private def append(arena: Array[Byte], end: Int, row: UnsafeRow): Array[Byte] = {
    val length = row.getSizeInBytes
    val into = if (end + length <= arena.length) arena
    else {
      java.util.Arrays.copyOf(arena,
        math.max(end + length,
          math.min(arena.length * 2L,
            Int.MaxValue - 16L).toInt))
    }
    Platform.copyMemory(row.getBaseObject, row.getBaseOffset, into,
      Platform.BYTE_ARRAY_OFFSET + end, length)
    into
  }

  private def grow(): Unit = {
    val n = math.max(64, order.length * 2)
    rowOffset = java.util.Arrays.copyOf(rowOffset, n)
    rowLength = java.util.Arrays.copyOf(rowLength, n)
    keyOffset = java.util.Arrays.copyOf(keyOffset, n)
    keyLength = java.util.Arrays.copyOf(keyLength, n)
    if (objects != null) {
      objects = java.util.Arrays.copyOf(objects.asInstanceOf[Array[AnyRef]], n)
        .asInstanceOf[Array[InternalRow]]
    }
    order = java.util.Arrays.copyOf(order.asInstanceOf[Array[AnyRef]], n)
      .asInstanceOf[Array[Integer]]
    val more = new Array[Integer](n)
    System.arraycopy(numbers, 0, more, 0, numbers.length)
    (numbers.length until n).foreach(i => more(i) = Integer.valueOf(i))
    numbers = more
  }
}

object KeyOrderedRecords {
  val DefaultMaxRows: Int = 1 << 16
  val DefaultMaxBytes: Long = 32L << 20

  /** The rows' bytes compared as unsigned bytes, first to last (RocksDB's default order). */
  def compareBytes(a: UnsafeRow, b: UnsafeRow): Int = compareBytes(a.getBaseObject,
    a.getBaseOffset, a.getSizeInBytes, b.getBaseObject, b.getBaseOffset, b.getSizeInBytes)

  /** Two byte ranges compared as unsigned bytes, first to last, the shorter first on a tie. */
  def compareBytes(
      aBase: AnyRef, aOffset: Long, aLength: Int,
      bBase: AnyRef, bOffset: Long, bLength: Int): Int = {
    val n = math.min(aLength, bLength)
    var i = 0
    while (i + 8 <= n) {
      val x = Platform.getLong(aBase, aOffset + i)
      val y = Platform.getLong(bBase, bOffset + i)
      if (x != y) {
        // The first differing byte decides: in memory order, the first byte most significant.
        return if (LittleEndian) {
          java.lang.Long.compareUnsigned(
            java.lang.Long.reverseBytes(x), java.lang.Long.reverseBytes(y))
        } else java.lang.Long.compareUnsigned(x, y)
      }
      i += 8
    }
    while (i < n) {
      val c = (Platform.getByte(aBase, aOffset + i) & 0xff) -
        (Platform.getByte(bBase, bOffset + i) & 0xff)
      if (c != 0) return c
      i += 1
    }
    Integer.compare(aLength, bLength)
  }

  private val LittleEndian =
    java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN
}
