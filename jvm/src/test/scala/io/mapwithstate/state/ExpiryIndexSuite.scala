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

  private def expiringSet(map: StateMap, threshold: Long): Set[(Long, Long, Long)] =
    longEntries(map.expiring(threshold))

  private def bruteForce(model: mutable.Map[Long, (Long, Long)], threshold: Long) =
    model.collect { case (k, (s, t)) if t != StateMap.NoTime && t < threshold => (k, s, t) }.toSet

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
      for (_ <- 0 until random.nextInt(400)) {
        val k = random.nextInt(300).toLong
        random.nextInt(10) match {
          case 0 | 1 =>
            map.remove(longKey(k)); model.remove(k)
          case 2 =>
            map.put(longKey(k), longState(k), StateMap.NoTime); model(k) = (k, StateMap.NoTime)
          case _ =>
            val t = now + random.nextInt(100) - 30
            map.put(longKey(k), longState(round.toLong), t); model(k) = (round.toLong, t)
        }
      }
      val threshold = now + random.nextInt(20)
      val expected = bruteForce(model, threshold)
      assert(expiringSet(map, threshold) === expected, s"round $round")
      // Asking again gives the same keys: expiring does not consume the index.
      assert(expiringSet(map, threshold) === expected)
      assert(longEntries(map.getByTime(threshold)).filter(_._3 != StateMap.NoTime) === expected)
      // Time some out as a batch would: remove half, re-arm the rest later or clear them.
      map.expiring(threshold).foreach { e =>
        val k = e.key.getLong(0)
        random.nextInt(3) match {
          case 0 => map.remove(e.key); model.remove(k)
          case 1 => map.put(e.key, e.state, now + 50); model(k) = (model(k)._1, now + 50)
          case _ => map.put(e.key, e.state, StateMap.NoTime); model(k) = (model(k)._1, StateMap.NoTime)
        }
      }
      assert(expiringSet(map, threshold) === bruteForce(model, threshold))
      random.nextInt(4) match {
        case 0 => map = map.copy()
        case 1 => map = reload(map).copy()
        case _ =>
      }
    }
  }

  test("stale entries are bounded: the index is rebuilt when they outnumber the keys") {
    val map = StateMap.empty(1, 1)
    (0 until 100).foreach(k => map.put(longKey(k), longState(k), 1000L + k))
    assert(map.expiring(0).isEmpty) // builds the index
    for (t <- 1 to 200; k <- 0 until 100) map.put(longKey(k), longState(k), 2000L + t)
    assert(map.expiryIndexBytes < 64L * (2 * 100 + (1 << 12)))
    assert(longEntries(map.expiring(2201)).size === 100)
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
    assert(map.expiring(0).isEmpty) // builds the index
    val perKey = map.expiryIndexBytes.toDouble / n
    // scalastyle:off println
    println(f"expiry index: $perKey%.1f bytes per key for $n BIGINT keys " +
      f"(state map without it: ${(map.memoryUsedBytes - map.expiryIndexBytes).toDouble / n}%.1f)")
    // scalastyle:on println
    assert(perKey < 64)
  }
}
