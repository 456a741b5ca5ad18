package io.mapwithstate.state

import java.io.{DataInputStream, DataOutputStream, EOFException, IOException}
import java.nio.ByteOrder
import java.util.zip.CRC32

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.unsafe.Platform

/**
 * The durable formats of a [[StateMap]], for checkpoints: a snapshot holds every live entry; a
 * delta holds the top layer of a [[DeltaChainStateMap]], i.e. the puts and tombstones of the
 * writes made since its parent was copied, and is only meaningful on top of that parent's
 * contents.
 *
 * Both formats are self-checking, because loading wrong state silently is the one failure a
 * stateful query cannot recover from. Every stream starts with a magic number telling the two
 * formats apart and a format version, then the key and state field counts and counts of what
 * follows, closed by a CRC32 of the header so that a damaged count is caught before it sizes
 * anything; then the records, an end-of-records marker and a CRC32 of everything before it. A
 * delta also records the size of the parent it was written against and the size it results
 * in. A stream that is truncated, corrupted, of the other kind, of another schema or applied to
 * the wrong parent fails with an IOException saying so; a failed read returns no map.
 *
 * Layout (integers are big-endian; row bytes are UnsafeRow bytes, copied as they are):
 * {{{
 *   int magic, int version, int keyNumFields, int stateNumFields,
 *   (delta only) int parentSize, int resultSize,
 *   int recordCount,
 *   (delta of version 3 only) int parentIdLength (-1: the parent has no checkpoint id),
 *                      parentIdLength bytes of the parent's checkpoint id (UTF-8),
 *   int CRC32 of the header,
 *   recordCount times: int keyLength, int stateLength (-1 for a tombstone, 0 for a key that
 *                      holds only a timer), long updateTime, key bytes, state bytes,
 *   int -1 (end of records), int 0, long 0 (a record header, so that every record header is
 *                      read in one go without reading past the end),
 *   int CRC32 of all the above
 * }}}
 *
 * Reads consume exactly one file's bytes, so a stream may hold several files back to back.
 *
 * Format version 2 added keys without a state that hold a timer (stateLength 0, which no
 * state row can have); files of version 1 are read as before, and a version-1 reader refuses
 * version-2 files by their version rather than misreading them. Format version 3 is a delta of
 * a checkpoint with checkpoint ids (format v2 of Spark's state checkpoints, see
 * [[CommitLineage]]): version 2 with the checkpoint id of the version it was written on, so
 * that the lineage of a committed version can be followed back through its files. Only such
 * deltas are written in version 3; every other file stays in version 2.
 */
object StateMapSerde {

  val SnapshotMagic: Int = 0x4d575353 // "MWSS"
  val DeltaMagic: Int = 0x4d575344 // "MWSD"
  val FormatVersion: Int = 3

  /** The version of every file but a delta that names its parent ([[FormatVersion]]). */
  private val UnnamedFormatVersion: Int = 2

  /**
   * The versions this reader knows: 1 lacks keys that hold only a timer, 3 is 2 with a delta's
   * parent id.
   */
  private val ReadableVersions = Set(1, UnnamedFormatVersion, FormatVersion)

  /** Checkpoint ids longer than this are damage (Spark's are 36-character UUIDs). */
  private val MaxParentIdBytes = 1024

  private val EndOfRecords = -1
  private val TombstoneLength = -1

  /** The state length of a key that holds only a timer (no state row is this short). */
  private val NoStateLength = 0

  /**
   * Row lengths above this are treated as corruption rather than trusted, so that a damaged
   * length cannot ask for an absurd allocation.
   */
  private val MaxRowBytes = (1 << 30) - 8

  /**
   * Presizing is only a speed-up: beyond this many entries the table grows as records arrive,
   * in case a header that passed its checksum still carries a wild count.
   */
  private val MaxPresizedEntries = 1 << 24

  /** Writes every live entry of `map`. Does not close `out`. */
  def writeSnapshot(map: StateMap, out: DataOutputStream): Unit = {
    val writer = new ChecksummedWriter(out)
    writer.writeInt(SnapshotMagic)
    writer.writeInt(UnnamedFormatVersion)
    writer.writeInt(map.keyNumFields)
    writer.writeInt(map.stateNumFields)
    val expected = map.size
    writer.writeInt(expected)
    writer.writeHeaderChecksum()
    // A key that holds only a timer has no state bytes (NoStateLength).
    val written = map.visitEntries(writer)
    if (written != expected) {
      throw new IllegalStateException(s"state map of size $expected produced $written entries")
    }
    writer.finish()
  }

  /**
   * Reads a snapshot into a new single-layer map.
   *
   * @param keyNumFields   the key field count the caller expects; a snapshot of another schema
   *                       is rejected
   * @param stateNumFields likewise for states
   */
  def readSnapshot(
      in: DataInputStream,
      keyNumFields: Int,
      stateNumFields: Int,
      deltaChainThreshold: Int = StateMap.DefaultDeltaChainThreshold): DeltaChainStateMap = {
    val reader = new ChecksummedReader(in, "state map snapshot")
    reader.readHeader(SnapshotMagic)
    val recordCount = reader.readInt()
    reader.checkHeader(keyNumFields, stateNumFields)
    reader.checkCount("record count", recordCount)
    val presizedEntries = math.min(recordCount, MaxPresizedEntries)
    val map = DeltaChainStateMap.presized(keyNumFields, stateNumFields, deltaChainThreshold,
      presizedEntries, presizedEntries * 32L)
    var read = 0
    while (reader.nextRecord(read, recordCount)) {
      if (reader.stateLength == TombstoneLength) {
        throw reader.corrupt(s"record $read is a tombstone, which a snapshot cannot hold")
      }
      val sizeBefore = map.size
      map.putBytes(reader.keyHash, reader.buffer, reader.keyOffset, reader.keyLength,
        reader.buffer, reader.stateOffset, reader.stateLength, reader.updateTime)
      if (map.size == sizeBefore) throw reader.corrupt(s"record $read repeats an earlier key")
      read += 1
    }
    reader.finish()
    map
  }

  /**
   * Writes the top layer of `map`: the puts and tombstones of the writes made since its parent
   * was copied (all its entries, if it has no parent). Given `parent` (a delta of a checkpoint
   * with checkpoint ids), the file is of [[FormatVersion]] 3 and names the checkpoint id of the
   * version it was written on (`parent.id`; None: that version has none). Does not close `out`.
   */
  def writeDelta(
      map: DeltaChainStateMap,
      out: DataOutputStream,
      parent: Option[DeltaParent] = None): Unit = {
    val recordCount = map.writtenSinceCopyCount

    val writer = new ChecksummedWriter(out)
    writer.writeInt(DeltaMagic)
    writer.writeInt(if (parent.isDefined) FormatVersion else UnnamedFormatVersion)
    writer.writeInt(map.keyNumFields)
    writer.writeInt(map.stateNumFields)
    writer.writeInt(if (map.parentMap == null) 0 else map.parentMap.size)
    writer.writeInt(map.size)
    writer.writeInt(recordCount)
    parent.foreach { p =>
      p.id match {
        case None => writer.writeInt(-1)
        case Some(id) =>
          val bytes = id.getBytes(java.nio.charset.StandardCharsets.UTF_8)
          require(bytes.length <= MaxParentIdBytes, s"checkpoint id too long: $id")
          writer.writeInt(bytes.length)
          writer.writeBytes(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length)
      }
    }
    writer.writeHeaderChecksum()
    val written = map.visitWrittenSinceCopy(writer)
    // The header's count came from the layer's counters; a reader checks it against the
    // records, so a miscount must not reach a file.
    if (written != recordCount) {
      throw new IllegalStateException(
        s"state map layer counted $recordCount live keys and tombstones but holds $written")
    }
    writer.finish()
  }

  /**
   * Applies a delta to `parent` and returns the result: `parent.copy()` with the delta's writes
   * (so `parent` becomes read-only, and the copy may compact the chain). `parent` must have the
   * contents of the parent of the map the delta was written from, e.g. as read back from its
   * own snapshot or deltas, or be empty for a delta of a map without parent. Sizes recorded in
   * the delta catch most mix-ups of versions; the header is checked before `parent` is copied.
   */
  def readDelta(in: DataInputStream, parent: DeltaChainStateMap): DeltaChainStateMap = {
    val reader = new ChecksummedReader(in, "state map delta")
    val DeltaHeader(parentSize, resultSize, recordCount, _) =
      reader.readDeltaHeader(parent.keyNumFields, parent.stateNumFields)
    if (parentSize != parent.size) {
      throw new IOException(s"state map delta was written on top of a map of $parentSize keys, " +
        s"but is being applied to one of ${parent.size} keys: wrong parent version?")
    }

    val map = parent.copy()
    var read = 0
    while (reader.nextRecord(read, recordCount)) {
      if (map.writtenSinceCopy(reader.keyHash, reader.buffer, reader.keyOffset,
          reader.keyLength)) {
        throw reader.corrupt(s"record $read repeats an earlier key")
      }
      if (reader.stateLength == TombstoneLength) {
        val removed = map.removeBytes(
          reader.keyHash, reader.buffer, reader.keyOffset, reader.keyLength)
        if (!removed) {
          throw new IOException(s"state map delta removes a key (record $read) that its parent " +
            "does not have: wrong parent version?")
        }
      } else {
        map.putBytes(reader.keyHash, reader.buffer, reader.keyOffset, reader.keyLength,
          reader.buffer, reader.stateOffset, reader.stateLength, reader.updateTime)
      }
      read += 1
    }
    reader.finish()
    if (map.size != resultSize) {
      throw new IOException(s"state map delta should result in $resultSize keys but gave " +
        s"${map.size}: wrong parent version?")
    }
    map
  }

  /**
   * The records of a delta as they are, without applying them to a parent: for a change feed,
   * which reports what each batch wrote rather than the state it led to. The whole stream is
   * read and checked (header and final checksums, counts, row sizes, no key twice) before
   * anything is returned, so a damaged delta yields an IOException and no records. The rows
   * are the caller's own copies.
   */
  def readDeltaRecords(
      in: DataInputStream,
      keyNumFields: Int,
      stateNumFields: Int): IndexedSeq[DeltaRecord] = {
    val reader = new ChecksummedReader(in, "state map delta")
    val recordCount = reader.readDeltaHeader(keyNumFields, stateNumFields).recordCount

    val records = new scala.collection.mutable.ArrayBuffer[DeltaRecord](
      math.min(recordCount, MaxPresizedEntries))
    val keys = new java.util.HashSet[UnsafeRow]()
    def row(numFields: Int, from: Int, length: Int): UnsafeRow = {
      val row = new UnsafeRow(numFields)
      row.pointTo(java.util.Arrays.copyOfRange(reader.buffer, from, from + length), length)
      row
    }
    var read = 0
    while (reader.nextRecord(read, recordCount)) {
      val key = row(keyNumFields, 0, reader.keyLength)
      if (!keys.add(key)) throw reader.corrupt(s"record $read repeats an earlier key")
      val state =
        if (reader.stateLength == TombstoneLength || reader.stateLength == NoStateLength) null
        else row(stateNumFields, reader.keyLength, reader.stateLength)
      records += DeltaRecord(key, state, reader.updateTime,
        isRemoval = reader.stateLength == TombstoneLength)
      read += 1
    }
    reader.finish()
    records.toIndexedSeq
  }

  /**
   * The parent a delta names in its header (format version 3), reading the header alone, or
   * None for a delta of an older version, which names none. The header's checksum is checked.
   */
  def readDeltaParent(
      in: DataInputStream,
      keyNumFields: Int,
      stateNumFields: Int): Option[DeltaParent] =
    new ChecksummedReader(in, "state map delta").readDeltaHeader(keyNumFields, stateNumFields)
      .parent

  /** A delta's header after its magic number, version and schema: its counts and parent. */
  private final case class DeltaHeader(
      parentSize: Int,
      resultSize: Int,
      recordCount: Int,
      parent: Option[DeltaParent])

  /**
   * Writes to `out` through a buffer, computing the CRC32 that [[finish]] appends a buffer at a
   * time: records are small, and a write and a checksum update per field would cost more than
   * the copying. As a [[StateRecordVisitor]] it writes each record a map hands it.
   */
  private final class ChecksummedWriter(out: DataOutputStream) extends StateRecordVisitor {
    private val crc = new CRC32
    private val buffer = new Array[Byte](WriteBufferBytes)
    private var buffered = 0

    def writeInt(value: Int): Unit = {
      if (buffer.length - buffered < 4) flushBuffer()
      putInt(buffered, value)
      buffered += 4
    }

    def writeLong(value: Long): Unit = {
      if (buffer.length - buffered < 8) flushBuffer()
      putLong(buffered, value)
      buffered += 8
    }

    def writeRecordHeader(keyLength: Int, stateLength: Int, updateTime: Long): Unit = {
      if (buffer.length - buffered < RecordHeaderBytes) flushBuffer()
      putInt(buffered, keyLength)
      putInt(buffered + 4, stateLength)
      putLong(buffered + 8, updateTime)
      buffered += RecordHeaderBytes
    }

    override def live(
        keyBase: AnyRef, keyOffset: Long, keyLength: Int,
        stateBase: AnyRef, stateOffset: Long, stateLength: Int,
        updateTime: Long): Unit = {
      writeRecordHeader(keyLength, stateLength, updateTime)
      if ((stateBase eq keyBase) && stateOffset == keyOffset + keyLength) {
        // Adjacent (a record in a layer's arena): one copy.
        writeBytes(keyBase, keyOffset, keyLength + stateLength)
      } else {
        writeBytes(keyBase, keyOffset, keyLength)
        if (stateLength > 0) writeBytes(stateBase, stateOffset, stateLength)
      }
    }

    override def removed(keyBase: AnyRef, keyOffset: Long, keyLength: Int): Unit = {
      writeRecordHeader(keyLength, TombstoneLength, 0L)
      writeBytes(keyBase, keyOffset, keyLength)
    }

    /** Copies bytes from an Unsafe address (on or off heap). */
    def writeBytes(base: AnyRef, unsafeOffset: Long, length: Int): Unit = {
      if (length <= SmallCopyBytes && (length & 7) == 0 && buffer.length - buffered >= length) {
        // A record's rows are a few words: copied a word at a time, they skip the checks and
        // the call that Unsafe.copyMemory costs on every copy, which for rows this small cost
        // more than the copying.
        var i = 0
        while (i < length) {
          Platform.putLong(buffer, Platform.BYTE_ARRAY_OFFSET + buffered + i,
            Platform.getLong(base, unsafeOffset + i))
          i += 8
        }
        buffered += length
        return
      }
      var done = 0
      while (done < length) {
        if (buffered == buffer.length) flushBuffer()
        val chunk = math.min(length - done, buffer.length - buffered)
        Platform.copyMemory(base, unsafeOffset + done,
          buffer, Platform.BYTE_ARRAY_OFFSET + buffered, chunk)
        buffered += chunk
        done += chunk
      }
    }

    /** Writes the CRC32 of everything written so far (it counts towards the final one too). */
    def writeHeaderChecksum(): Unit = {
      flushBuffer()
      writeInt(crc.getValue.toInt)
    }

    /** Writes the end marker and the checksum, then flushes. */
    def finish(): Unit = {
      writeRecordHeader(EndOfRecords, 0, 0L)
      flushBuffer()
      out.writeInt(crc.getValue.toInt)
      out.flush()
    }

    private def putInt(at: Int, value: Int): Unit = putBigEndianInt(buffer, at, value)

    private def putLong(at: Int, value: Long): Unit = putBigEndianLong(buffer, at, value)

    private def flushBuffer(): Unit = {
      out.write(buffer, 0, buffered)
      crc.update(buffer, 0, buffered)
      buffered = 0
    }
  }

  /**
   * Reads one stream, checksumming as it goes. Record by record it holds the current record's
   * key and state bytes back to back in [[buffer]]; the buffer only grows as bytes actually
   * arrive, so a corrupted length fails at end-of-stream instead of allocating its value.
   */
  private final class ChecksummedReader(in: DataInputStream, what: String) {
    private val crc = new CRC32
    private val scratch = new Array[Byte](RecordHeaderBytes)
    private var recordsRead = 0
    private var expectedRecords = -1

    var buffer: Array[Byte] = new Array[Byte](256)
    var keyLength = 0
    var stateLength = 0
    var updateTime = 0L
    var keyHash = 0
    private var keyNumFields = 0
    private var stateNumFields = 0
    private var version = 0

    def keyOffset: Long = Platform.BYTE_ARRAY_OFFSET

    def stateOffset: Long = Platform.BYTE_ARRAY_OFFSET + keyLength

    def corrupt(problem: String): IOException = new IOException(s"$what is corrupt: $problem")

    /** Reads the start of the header, checking what can be checked before its checksum. */
    def readHeader(expectedMagic: Int): Unit = {
      val magic = readInt()
      if (magic != expectedMagic) {
        val kind =
          if (magic == SnapshotMagic) "a state map snapshot"
          else if (magic == DeltaMagic) "a state map delta"
          else f"no state map file (magic number 0x$magic%08x)"
        throw new IOException(s"expected a $what but found $kind")
      }
      version = readInt()
      if (!ReadableVersions.contains(version)) {
        throw new IOException(s"$what has format version $version; this reader knows " +
          s"versions ${ReadableVersions.toSeq.sorted.mkString(" and ")}")
      }
      keyNumFields = readInt()
      stateNumFields = readInt()
    }

    /** Reads the header's checksum, then checks the schema the header announced. */
    def checkHeader(expectedKeyNumFields: Int, expectedStateNumFields: Int): Unit = {
      val computed = crc.getValue.toInt
      val stored = readInt()
      if (stored != computed) {
        throw corrupt(f"header checksum mismatch (stored 0x$stored%08x, computed 0x$computed%08x)")
      }
      if (keyNumFields != expectedKeyNumFields || stateNumFields != expectedStateNumFields) {
        throw new IOException(s"$what holds keys of $keyNumFields and states of " +
          s"$stateNumFields fields, expected $expectedKeyNumFields and $expectedStateNumFields")
      }
    }

    /** Reads and checks a delta's whole header, for keys and states of these field counts. */
    def readDeltaHeader(expectedKeyNumFields: Int, expectedStateNumFields: Int): DeltaHeader = {
      readHeader(DeltaMagic)
      val (parentSize, resultSize, recordCount) = (readInt(), readInt(), readInt())
      val parent = if (version < FormatVersion) None else Some(DeltaParent(readParentId()))
      val header = DeltaHeader(parentSize, resultSize, recordCount, parent)
      checkHeader(expectedKeyNumFields, expectedStateNumFields)
      checkCount("parent size", header.parentSize)
      checkCount("result size", header.resultSize)
      checkCount("record count", header.recordCount)
      header
    }

    /** A version-3 delta's parent id; its length is checked again with the header's CRC. */
    private def readParentId(): Option[String] = {
      val length = readInt()
      if (length == -1) None
      else {
        if (length < 0 || length > MaxParentIdBytes) {
          throw corrupt(s"parent checkpoint id of $length bytes")
        }
        val bytes = new Array[Byte](length)
        readFully(bytes, 0, length)
        Some(new String(bytes, java.nio.charset.StandardCharsets.UTF_8))
      }
    }

    def checkCount(name: String, count: Int): Unit = {
      if (count < 0) throw corrupt(s"negative $name $count")
    }

    /**
     * Reads the record after `read` records, or the end marker; returns false at the end.
     * Checks that exactly `expected` records came before the marker.
     */
    def nextRecord(read: Int, expected: Int): Boolean = {
      recordsRead = read
      expectedRecords = expected
      readFully(scratch, 0, RecordHeaderBytes)
      keyLength = getInt(0)
      stateLength = getInt(4)
      updateTime = getLong(8)
      if (keyLength == EndOfRecords) {
        if (read != expected) {
          throw corrupt(s"ends after $read records, its header announced $expected")
        }
        return false
      }
      if (read == expected) {
        throw corrupt(s"has more than the $expected records its header announced")
      }
      checkRowLength("key", keyLength, keyNumFields)
      val stateBytes = if (stateLength == TombstoneLength) {
        0
      } else if (stateLength == NoStateLength && version >= 2) {
        // A key holding only a timer: it must have one.
        if (updateTime == StateMap.NoTime) {
          throw corrupt(s"record $read has neither a state nor a timer")
        }
        0
      } else {
        checkRowLength("state", stateLength, stateNumFields)
        stateLength
      }
      readBytes(keyLength + stateBytes)
      keyHash = DeltaChainStateMap.hashOf(buffer, keyOffset, keyLength)
      true
    }

    /** Reads and checks the final checksum, which must match everything read before it. */
    def finish(): Unit = {
      val computed = crc.getValue.toInt
      val stored =
        try in.readInt()
        catch {
          case e: EOFException => throw truncated(e)
        }
      if (stored != computed) {
        throw corrupt(f"checksum mismatch (stored 0x$stored%08x, computed 0x$computed%08x)")
      }
    }

    private def checkRowLength(name: String, length: Int, numFields: Int): Unit = {
      val fixedPart = UnsafeRow.calculateBitSetWidthInBytes(numFields) + 8L * numFields
      if (length < fixedPart || length % 8 != 0 || length > MaxRowBytes) {
        throw corrupt(s"record $recordsRead has a $name of $length bytes, which is not a valid " +
          s"size for a row of $numFields fields")
      }
    }

    def readInt(): Int = {
      readFully(scratch, 0, 4)
      getInt(0)
    }

    private def getInt(at: Int): Int = getBigEndianInt(scratch, at)

    private def getLong(at: Int): Long = getBigEndianLong(scratch, at)

    private def readBytes(length: Int): Unit = {
      var done = 0
      while (done < length) {
        val chunk = math.min(length - done, ReadChunkBytes)
        if (buffer.length < done + chunk) {
          buffer = java.util.Arrays.copyOf(buffer,
            math.max(done + chunk, math.min(buffer.length.toLong * 2, Int.MaxValue - 8L).toInt))
        }
        readFully(buffer, done, chunk)
        done += chunk
      }
    }

    private def readFully(bytes: Array[Byte], offset: Int, length: Int): Unit = {
      try in.readFully(bytes, offset, length)
      catch {
        case e: EOFException => throw truncated(e)
      }
      crc.update(bytes, offset, length)
    }

    private def truncated(cause: EOFException): IOException = {
      val progress =
        if (expectedRecords < 0) "in its header"
        else s"after $recordsRead of $expectedRecords records"
      new IOException(s"$what is truncated: the stream ended $progress", cause)
    }
  }

  private val ReadChunkBytes = 1 << 20
  private val WriteBufferBytes = 1 << 16

  /** A record header: int keyLength, int stateLength, long updateTime. */
  private val RecordHeaderBytes = 16

  /** Rows up to this size are copied into the write buffer a word at a time. */
  private val SmallCopyBytes = 256

  /** The files are big-endian; Platform's loads and stores are in the machine's order. */
  private val NativeLittleEndian = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN

  // A file's fields, each one load or store and a byte swap, where a byte at a time was eight.
  private def putBigEndianInt(bytes: Array[Byte], at: Int, value: Int): Unit =
    Platform.putInt(bytes, Platform.BYTE_ARRAY_OFFSET + at,
      if (NativeLittleEndian) Integer.reverseBytes(value) else value)

  private def putBigEndianLong(bytes: Array[Byte], at: Int, value: Long): Unit =
    Platform.putLong(bytes, Platform.BYTE_ARRAY_OFFSET + at,
      if (NativeLittleEndian) java.lang.Long.reverseBytes(value) else value)

  private def getBigEndianInt(bytes: Array[Byte], at: Int): Int = {
    val word = Platform.getInt(bytes, Platform.BYTE_ARRAY_OFFSET + at)
    if (NativeLittleEndian) Integer.reverseBytes(word) else word
  }

  private def getBigEndianLong(bytes: Array[Byte], at: Int): Long = {
    val word = Platform.getLong(bytes, Platform.BYTE_ARRAY_OFFSET + at)
    if (NativeLittleEndian) java.lang.Long.reverseBytes(word) else word
  }
}

/**
 * One record of a [[StateMapSerde]] delta: the key's new `state` written at `updateTime` (null
 * for a key left holding only a timer), or the key's removal (a tombstone).
 */
final case class DeltaRecord(
    key: UnsafeRow, state: UnsafeRow, updateTime: Long, isRemoval: Boolean)

/**
 * What a delta of format version 3 says of the version it was written on (the one before its
 * own): its checkpoint id, or None for a version without one (version 0, the empty state, or
 * a version whose files are named by their version alone).
 */
final case class DeltaParent(id: Option[String])
