package io.mapwithstate.state

import java.io.{
  ByteArrayInputStream,
  ByteArrayOutputStream,
  DataInputStream,
  DataOutputStream,
  IOException
}

import scala.collection.mutable
import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/**
 * The snapshot and delta file formats ([[StateMapSerde]]): round trips of maps and of chains of
 * copies (with and without compaction), several files in one stream, and the self-checks that
 * make a truncated, corrupted or mismatched file fail with an IOException instead of loading
 * wrong state.
 */
class StateMapSerdeSuite extends AnyFunSuite {
  import StateMapSuite._

  test("snapshot and delta round trips") {
    val map1 = StateMap.empty(1, 1)
    checkRoundTrips(Seq(map1), "empty map")

    map1.put(longKey(1), longState(100), 1)
    map1.put(longKey(2), longState(200), 2)
    checkRoundTrips(Seq(map1), "map with data + no delta")

    val map2 = map1.copy()
    assert(!map1.shouldCompact && !map2.shouldCompact)
    checkRoundTrips(Seq(map1, map2), "map with 1 delta + no new data")

    map2.put(longKey(3), longState(300), 3)
    map2.put(longKey(4), longState(400), 4)
    checkRoundTrips(Seq(map1, map2), "map with 1 delta + new data")

    val map3 = map2.copy()
    checkRoundTrips(Seq(map1, map2, map3), "map with 2 deltas + no new data")
    map3.put(longKey(3), longState(600), 3)
    map3.remove(longKey(2))
    map3.put(longKey(5), longState(500), 5)
    map3.remove(longKey(5))
    checkRoundTrips(Seq(map1, map2, map3), "map with 2 deltas + new data")

    val wide = StateMap.empty(PairKeyCodec.numFields, WideStateCodec.numFields)
    wide.put(PairKeyCodec((1, "a")), WideStateCodec(WideState(null, 5L, "x" * 100)), 1)
    wide.put(PairKeyCodec((null, null)), WideStateCodec(WideState("", null, null)), 2)
    val wideChild = wide.copy()
    wideChild.remove(PairKeyCodec((1, "a")))
    wideChild.put(PairKeyCodec((2, "b")), WideStateCodec(WideState("y", 6L, "")), 3)
    checkRoundTrips(Seq(wide, wideChild), "map with strings and nulls")
  }

  test("keys holding only a timer round trip, and are told apart from removals in a delta") {
    val parent = StateMap.empty(1, 1)
    parent.put(longKey(1), longState(100), 1)
    parent.put(longKey(2), longState(200), 2)
    parent.put(longKey(3), null, 3)
    val child = parent.copy()
    child.put(longKey(1), null, 10) // state removed, a timer kept
    child.remove(longKey(2))
    child.put(longKey(4), null, 40) // a timer without ever a state
    checkRoundTrips(Seq(parent, child), "timers without state")
    val records = StateMapSerde.readDeltaRecords(
      new DataInputStream(new ByteArrayInputStream(writeDelta(child))), 1, 1)
    assert(records.map(r => (r.key.getLong(0), r.state, r.updateTime, r.isRemoval)).toSet ===
      Set((1L, null, 10L, false), (2L, null, 0L, true), (4L, null, 40L, false)))
  }

  test(
    "format version 1 files are read; a key without state and timer, or in version 1, is corrupt") {
    val map = StateMap.empty(1, 1)
    map.put(longKey(1), longState(100), 1)
    val v1 = asVersion1(writeSnapshot(map), headerBytes = 20)
    assert(longContents(readSnapshot(v1, 1, 1)) === longContents(map))
    val child = map.copy()
    child.put(longKey(2), longState(7), 2)
    assert(longContents(readDelta(asVersion1(writeDelta(child), headerBytes = 28), map.compact()))
      === longContents(child))

    val timerOnly = StateMap.empty(1, 1)
    timerOnly.put(longKey(1), null, 5)
    val inV1 = intercept[IOException](readSnapshot(asVersion1(writeSnapshot(timerOnly), 20), 1, 1))
    assert(inV1.getMessage.contains("not a valid size"))
    // The record's time (bytes 32..39: after the 24-byte header, key and state lengths) zeroed
    // to NoTime, the checksum made right again: well formed, but a key with nothing.
    val bytes = writeSnapshot(timerOnly)
    java.nio.ByteBuffer.wrap(bytes).putLong(32, StateMap.NoTime)
    val e = intercept[IOException](readSnapshot(withFinalCrc(bytes), 1, 1))
    assert(e.getMessage.contains("neither a state nor a timer"))
  }

  test("snapshot and delta round trips with compaction") {
    val deltaChainThreshold = 5
    val random = new Random(11)
    val maps = mutable.ArrayBuffer(StateMap.empty(1, 1, deltaChainThreshold))
    for (i <- 1 to 13) {
      val map = maps.last
      map.put(longKey(random.nextLong()), longState(random.nextLong()), i)
      map.put(longKey(i % 4), longState(i), i)
      if (i % 2 == 0) map.remove(longKey((i + 1) % 4))
      maps += map.copy()
    }
    assert(maps.map(_.deltaChainLength).max === deltaChainThreshold)
    assert(maps.last.deltaChainLength < deltaChainThreshold)
    checkRoundTrips(maps.toSeq, "compacted chain")

    // Deltas also replay onto a chain that compacts at other points.
    for (threshold <- Seq(1, 3, 20)) {
      val replica = replayDeltas(maps.toSeq, threshold)
      assert(longContents(replica) === longContents(maps.last),
        s"replica with threshold $threshold")
    }

    val compacted = maps.last.compact()
    checkRoundTrips(Seq(compacted), "compact() result")
    val restored = readSnapshot(writeSnapshot(maps.last), 1, 1, deltaChainThreshold)
    assert(restored.deltaChainLength === 0)
    assert(!restored.shouldCompact)
  }

  test("streams hold several files back to back") {
    val a = StateMap.empty(1, 1)
    a.put(longKey(1), longState(1), 1)
    val b = a.copy()
    b.put(longKey(2), longState(2), 2)
    val bytes = new ByteArrayOutputStream()
    val out = new DataOutputStream(bytes)
    StateMapSerde.writeSnapshot(a, out)
    StateMapSerde.writeDelta(b, out)
    StateMapSerde.writeSnapshot(b, out)
    out.writeInt(12345)
    val in = new DataInputStream(new ByteArrayInputStream(bytes.toByteArray))
    val a2 = StateMapSerde.readSnapshot(in, 1, 1)
    val b2 = StateMapSerde.readDelta(in, a2)
    val b3 = StateMapSerde.readSnapshot(in, 1, 1)
    assert(in.readInt() === 12345)
    assert(longContents(a2) === longContents(a))
    assert(longContents(b2) === longContents(b))
    assert(longContents(b3) === longContents(b))
  }

  test("truncated streams fail with a clear IOException") {
    val (parent, child) = sampleChain()
    for ((name, bytes, read) <- sampleFiles(parent, child); length <- 0 until bytes.length) {
      val e = intercept[IOException](read(bytes.take(length)))
      assert(e.getMessage.contains("truncated"), s"$name cut to $length bytes: ${e.getMessage}")
    }
  }

  test("corrupted streams fail with an IOException") {
    val (parent, child) = sampleChain()
    for {
      (name, bytes, read) <- sampleFiles(parent, child)
      position <- bytes.indices
      flip <- Seq(0x01, 0x80, 0xff)
    } {
      val corrupted = bytes.clone()
      corrupted(position) = (corrupted(position) ^ flip).toByte
      val e = intercept[IOException](read(corrupted))
      assert(e.getMessage.nonEmpty, s"$name with byte $position flipped by $flip")
    }
  }

  test("files of the wrong kind, schema or parent are rejected") {
    val (parent, child) = sampleChain()
    val snapshot = writeSnapshot(child)
    val delta = writeDelta(child)

    val asDelta = intercept[IOException](readDelta(snapshot, parent.compact()))
    assert(asDelta.getMessage.contains("expected a state map delta but found a state map snapshot"))
    val asSnapshot = intercept[IOException](readSnapshot(delta, 1, 2))
    assert(asSnapshot.getMessage.contains("but found a state map delta"))
    val garbage = intercept[IOException](readSnapshot("not a state map".getBytes("UTF-8"), 1, 2))
    assert(garbage.getMessage.contains("no state map file"))

    val schema = intercept[IOException](readSnapshot(snapshot, 1, 2))
    assert(schema.getMessage.contains("holds keys of 1 and states of 3 fields, expected 1 and 2"))
    val deltaSchema = intercept[IOException](readDelta(delta, StateMap.empty(2, 2)))
    assert(deltaSchema.getMessage.contains("expected 2 and 2"))

    // A parent of another size.
    val bigger = parent.compact()
    bigger.put(longKey(1000), WideStateCodec(WideState("z", 1L, "z")), 1)
    val size = intercept[IOException](readDelta(delta, bigger))
    assert(size.getMessage.contains("wrong parent version"))
    assert(bigger.contains(longKey(1000)) && !bigger.shouldCompact)
    bigger.put(longKey(1001), WideStateCodec(WideState("z", 1L, "z")), 1) // still writable

    // A parent of the same size that lacks a key the delta removes.
    val sameSize = StateMap.empty(1, 3)
    for (k <- 500L until 500L + parent.size) {
      sameSize.put(longKey(k), WideStateCodec(WideState("z", 1L, "z")), 1)
    }
    val missing = intercept[IOException](readDelta(delta, sameSize))
    assert(missing.getMessage.contains("removes a key"))

    // A parent of the same size whose keys make the delta's puts land differently.
    val (parent2, _) = sampleChain()
    val putsOnly = parent2.copy()
    putsOnly.put(longKey(2), WideStateCodec(WideState("new", 2L, "new")), 9)
    putsOnly.put(longKey(3), WideStateCodec(WideState("new", 3L, "new")), 9)
    val shifted = StateMap.empty(1, 3)
    shifted.put(longKey(2), WideStateCodec(WideState("old", 2L, "old")), 1)
    for (k <- 500L until 500L + parent2.size - 1) {
      shifted.put(longKey(k), WideStateCodec(WideState("z", 1L, "z")), 1)
    }
    val result = intercept[IOException](readDelta(writeDelta(putsOnly), shifted))
    assert(result.getMessage.contains("should result in"))
  }

  /**
   * Checks snapshot round trips of every map of a chain of copies, and a replay of their deltas
   * (each written from one map of the chain, in order) onto an empty map.
   */
  private def checkRoundTrips(chain: Seq[DeltaChainStateMap], msg: String): Unit = withClue(msg) {
    val states = chain.head.stateNumFields
    for (map <- chain) {
      val restored = readSnapshot(writeSnapshot(map), map.keyNumFields, states)
      assert(restored.deltaChainLength === 0)
      assert(restored.size === map.size)
      assert(rawContents(restored) === rawContents(map))
      assert(rawContents(map.compact()) === rawContents(map))
    }
    val replica = replayDeltas(chain, StateMap.DefaultDeltaChainThreshold)
    assert(rawContents(replica) === rawContents(chain.last))
    assert(replica.size === chain.last.size)
    for (entry <- chain.last.getAll()) {
      assert(replica.get(entry.key) === entry.state)
    }
  }

  private def replayDeltas(chain: Seq[DeltaChainStateMap], threshold: Int): DeltaChainStateMap = {
    var replica = StateMap.empty(chain.head.keyNumFields, chain.head.stateNumFields, threshold)
    for (map <- chain) {
      replica = readDelta(writeDelta(map), replica)
    }
    replica
  }

  /** A file rewritten as format version 1, checksums included (`headerBytes`: before its CRC). */
  private def asVersion1(file: Array[Byte], headerBytes: Int): Array[Byte] = {
    val bytes = file.clone()
    val buffer = java.nio.ByteBuffer.wrap(bytes)
    buffer.putInt(4, 1)
    val crc = new java.util.zip.CRC32
    crc.update(bytes, 0, headerBytes)
    buffer.putInt(headerBytes, crc.getValue.toInt)
    withFinalCrc(bytes)
  }

  private def withFinalCrc(bytes: Array[Byte]): Array[Byte] = {
    val crc = new java.util.zip.CRC32
    crc.update(bytes, 0, bytes.length - 4)
    java.nio.ByteBuffer.wrap(bytes).putInt(bytes.length - 4, crc.getValue.toInt)
    bytes
  }

  /** A parent with entries and a child with puts, overwrites and tombstones. */
  private def sampleChain(): (DeltaChainStateMap, DeltaChainStateMap) = {
    val parent = StateMap.empty(1, 3)
    for (k <- 0L until 6L) {
      parent.put(longKey(k),
        WideStateCodec(WideState(if (k % 2 == 0) null else "s" * k.toInt,
            k, "t")), k)
    }
    val child = parent.copy()
    child.remove(longKey(0))
    child.remove(longKey(1))
    child.put(longKey(2), WideStateCodec(WideState("two", null, "")), 20)
    child.put(longKey(10), WideStateCodec(WideState(null, 10L, null)), 21)
    (parent, child)
  }

  private def sampleFiles(parent: DeltaChainStateMap, child: DeltaChainStateMap)
      : Seq[(String, Array[Byte], Array[Byte] => StateMap)] = Seq(
    ("snapshot", writeSnapshot(child), bytes => readSnapshot(bytes, 1, 3)),
    ("empty snapshot", writeSnapshot(StateMap.empty(1, 3)), bytes => readSnapshot(bytes, 1, 3)),
    // A fresh compacted copy of the parent each time: a failed read may freeze the parent.
    ("delta", writeDelta(child), bytes => readDelta(bytes, parent.compact())))
}
