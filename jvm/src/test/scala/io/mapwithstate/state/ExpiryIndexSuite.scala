package io.mapwithstate.state

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}

import scala.collection.mutable
import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/**
 * The expiry index behind [[StateMap.expiring]]: random sequences of puts (with and without a
 * time), removes, copies (with compaction), reloads from files and expiry rounds, each round
 * checked against a brute-force model of the map and against a full scan ([[StateMap.getByTime]]).
 */
class ExpiryIndexSuite extends AnyFunSuite {
  import StateMapSuite._

  private def reload(map: DeltaChainStateMap): DeltaChainStateMap = {
    val bytes = new ByteArrayOutputStream()
    val out = new DataOutputStream(bytes)
    StateMapSerde.writeSnapshot(map, out)
    out.close()
    StateMapSerde.readSnapshot(new DataInputStream(new ByteArrayInputStream(bytes.toByteArray)),
      1, 1, 20)
  }

  for (seed <- 1 to 6) test(s"random puts, removes, copies and expiry rounds (seed $seed)") {
    val random = new Random(seed)
    var map: DeltaChainStateMap = StateMap.empty(1, 1, deltaChainThreshold = 3)
    val model = mutable.Map.empty[Long, (Long, Long)]
    var now = 0L
    for (round <- 1 to 60) {
      now += 10
      ExpiryRounds.run(random, map, model, now, round.toLong, 400, 300, s"round $round")
      random.nextInt(4) match {
        case 0 => map = map.copy()
        case 1 => map = reload(map).copy()
        case _ =>
      }
    }
  }

  test("an index over several chunks pops in time order across them, stale entries dropped") {
    // Past ChunkEntries entries the heap spans chunks: parents and children of one sift sit in
    // different chunks. Keys are put up to three times; only a key's last time is current.
    val random = new Random(11)
    val index = new ExpiryIndex
    val keys = 2 * ExpiryIndex.ChunkEntries
    val current = mutable.Map.empty[Long, Long]
    def bytesOf(k: Long): Array[Byte] = java.nio.ByteBuffer.allocate(8).putLong(k).array()
    def keyOf(bytes: Array[Byte]): Long = java.nio.ByteBuffer.wrap(bytes).getLong
    val entries = 3 * ExpiryIndex.ChunkEntries + 123
    for (_ <- 0 until entries) {
      val k = random.nextInt(keys).toLong
      val t = random.nextInt(1000000).toLong
      index.add(t, bytesOf(k), org.apache.spark.unsafe.Platform.BYTE_ARRAY_OFFSET, 8)
      current(k) = t
    }
    assert(index.size === entries)
    var previous = 0L
    for (threshold <- Seq(1000L, 250000L, 250000L, 600000L, 1000001L)) {
      val (times, dueKeys) = index.due(threshold, bytes => current.getOrElse(keyOf(bytes), -1L))
      val expected = current.filter(_._2 < threshold)
      assert(dueKeys.map(keyOf).toSet === expected.keySet, s"threshold $threshold")
      assert(dueKeys.length === expected.size)
      assert(times.toSeq === times.toSeq.sorted)
      assert(dueKeys.map(keyOf).zip(times).forall { case (k, t) => current(k) === t })
      // The caller removes what expired before the next, later threshold.
      if (threshold != previous) dueKeys.foreach(b => current.remove(keyOf(b)))
      previous = threshold
    }
    assert(current.isEmpty)
  }

  test("stale entries are bounded: the index is rebuilt when they outnumber the keys") {
    val map = StateMap.empty(1, 1)
    (0 until 100).foreach(k => map.put(longKey(k), longState(k), 1000L + k))
    map.buildExpiryIndex()
    for (t <- 1 to 200; k <- 0 until 100) map.put(longKey(k), longState(k), 2000L + t)
    assert(map.expiryIndexBytes < 64L * (2 * 100 + (1 << 12)))
    assert(longEntries(map.expiring(2201)).size === 100)
  }

  test("no index until a threshold passes the earliest time; loose bounds still answer right") {
    val map = StateMap.empty(1, 1)
    (0 until 1000).foreach(k => map.put(longKey(k), longState(k), 1000L + k))
    assert(map.earliestTime === 1000L)
    // Nothing can be due: no index is built, and puts add nothing to one.
    assert(map.expiring(1000).isEmpty && map.expiryIndexBytes === 0L)
    (0 until 1000).foreach(k => map.put(longKey(k), longState(k), 5000L + k))
    assert(map.expiryIndexBytes === 0L)
    // Every key was put again later: the bound (1000) is loose and nothing is due at 2000.
    var next = map.copy()
    next.put(longKey(5000), longState(1), StateMap.NoTime)
    assert(next.earliestTime === 1000L && next.expiring(2000).isEmpty)
    assert(next.expiryIndexBytes > 0L)
    assert(longEntries(next.expiring(5002)) === Set((0L, 0L, 5000L), (1L, 1L, 5001L)))
    // A compaction writes a new base: the bound is the live keys' earliest again.
    next = next.compact()
    assert(next.earliestTime === 5000L)
    // A key without a time does not count, and a timer earlier than every key does.
    next.put(longKey(7), longState(7), 10L)
    assert(next.earliestTime === 10L && longEntries(next.expiring(11)) === Set((7L, 7L, 10L)))
  }

  test("a copy takes the index over; a read-only map still answers by scanning") {
    val map = StateMap.empty(1, 1)
    map.put(longKey(1), longState(1), 5)
    assert(longEntries(map.expiring(6)) === Set((1L, 1L, 5L)))
    val next = map.copy()
    next.put(longKey(2), longState(2), 3)
    assert(longEntries(next.expiring(6)) === Set((1L, 1L, 5L), (2L, 2L, 3L)))
    assert(longEntries(map.expiring(6)) === Set((1L, 1L, 5L)))
    assert(map.expiryIndexBytes === 0L && next.expiryIndexBytes > 0L)
  }

  test("memory per key of the index (BIGINT keys)") {
    val map = StateMap.empty(1, 1)
    val n = 200000
    (0 until n).foreach(k => map.put(longKey(k), longState(k), 1000L + k))
    map.buildExpiryIndex()
    val perKey = map.expiryIndexBytes.toDouble / n
    // scalastyle:off println
    println(f"expiry index: $perKey%.1f bytes per key for $n BIGINT keys " +
      f"(state map without it: ${(map.memoryUsedBytes - map.expiryIndexBytes).toDouble / n}%.1f)")
    // scalastyle:on println
    assert(perKey < 64)
  }
}
