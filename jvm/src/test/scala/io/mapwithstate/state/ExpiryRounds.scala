package io.mapwithstate.state

import scala.collection.mutable
import scala.util.Random

import org.scalatest.Assertions._

/**
 * One expiry round of the expiry index suites (the heap map's and the RocksDB-backed map's),
 * on (BIGINT) -> (BIGINT) maps against a brute-force model (key -> (state, time)): random
 * writes, the expiring keys checked against the model and a full scan, some of them timed
 * out as a batch would, and checked again.
 */
object ExpiryRounds {
  import StateMapSuite._

  type Model = mutable.Map[Long, (Long, Long)]

  def bruteForce(model: Model, threshold: Long): Set[(Long, Long, Long)] =
    model.collect { case (k, (s, t)) if t != StateMap.NoTime && t < threshold => (k, s, t) }.toSet

  /**
   * Up to `maxWrites` random writes at time `now` (stamping states with `stamp`), then the
   * round's checks and timeouts; returns the threshold used.
   */
  def run(random: Random, map: StateMap, model: Model, now: Long, stamp: Long,
      maxWrites: Int, maxKey: Int, clue: String): Long = {
    for (_ <- 0 until random.nextInt(maxWrites)) {
      val k = random.nextInt(maxKey).toLong
      random.nextInt(10) match {
        case 0 | 1 =>
          map.remove(longKey(k)); model.remove(k)
        case 2 =>
          map.put(longKey(k), longState(k), StateMap.NoTime); model(k) = (k, StateMap.NoTime)
        case 3 => // a record's read, then its write in place
          val before = Option(map.get(longKey(k))).map(_.getLong(0)).getOrElse(0L)
          map.putInPlace(longKey(k), longState(before + 1), now); model(k) = (before + 1, now)
        case _ =>
          val t = now + random.nextInt(100) - 30
          map.put(longKey(k), longState(stamp), t); model(k) = (stamp, t)
      }
    }
    val threshold = now + random.nextInt(20)
    val expected = bruteForce(model, threshold)
    assert(longEntries(map.expiring(threshold)) === expected, clue)
    // Asking again gives the same keys: expiring does not consume the index.
    assert(longEntries(map.expiring(threshold)) === expected, clue)
    assert(longEntries(map.getByTime(threshold)).filter(_._3 != StateMap.NoTime) === expected)
    // Time some out as a batch would: remove some, re-arm some later, clear the others.
    map.expiring(threshold).foreach { e =>
      val k = e.key.getLong(0)
      random.nextInt(3) match {
        case 0 => map.remove(e.key); model.remove(k)
        case 1 => map.put(e.key, e.state, now + 50); model(k) = (model(k)._1, now + 50)
        case _ =>
          map.put(e.key, e.state, StateMap.NoTime); model(k) = (model(k)._1, StateMap.NoTime)
      }
    }
    assert(longEntries(map.expiring(threshold)) === bruteForce(model, threshold), clue)
    threshold
  }
}
