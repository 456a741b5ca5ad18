package io.mapwithstate.state

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}
import java.util.ConcurrentModificationException

import scala.collection.mutable
import scala.util.Random

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.{DataType, IntegerType, LongType, StringType}
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * Spark's StateMapSuite re-expressed for UnsafeRow keys and states, plus what our map adds:
 * copying of caller buffers, read-only parents, compaction on copy, memory bounds, writes
 * during iteration (the file formats: StateMapSerdeSuite).
 */
class StateMapSuite extends AnyFunSuite {
  import StateMapSuite._

  test("empty map") {
    val map = StateMap.empty(1, 1)
    assert(map.get(longKey(1)) === null)
    assert(!map.contains(longKey(1)))
    assert(map.getByTime(10000).isEmpty)
    assert(map.getAll().isEmpty)
    assert(map.size === 0)
    map.remove(longKey(1)) // no exception
    assert(map.size === 0)

    val copy = map.copy()
    assert(copy.size === 0)
    assert(copy.getAll().isEmpty)
    assert(copy.deltaChainLength === 1)
    copy.put(longKey(1), longState(100), 1)
    assert(longContents(copy) === Map(1L -> (100L, 1L)))
    assert(map.getAll().isEmpty)
  }

  test("put, get, getByTime, getAll, remove") {
    val map = StateMap.empty(1, 1)

    map.put(longKey(1), longState(100), 10)
    assert(map.get(longKey(1)).getLong(0) === 100)
    assert(map.get(longKey(2)) === null)
    assert(map.contains(longKey(1)))
    assert(!map.contains(longKey(2)))
    assert(longEntries(map.getByTime(11)) === Set((1, 100, 10)))
    assert(longEntries(map.getByTime(10)) === Set.empty)
    assert(longEntries(map.getByTime(9)) === Set.empty)
    assert(longEntries(map.getAll()) === Set((1, 100, 10)))
    assert(map.size === 1)

    map.put(longKey(2), longState(200), 20)
    assert(longEntries(map.getByTime(21)) === Set((1, 100, 10), (2, 200, 20)))
    assert(longEntries(map.getByTime(11)) === Set((1, 100, 10)))
    assert(longEntries(map.getByTime(10)) === Set.empty)
    assert(longEntries(map.getByTime(9)) === Set.empty)
    assert(longEntries(map.getAll()) === Set((1, 100, 10), (2, 200, 20)))
    assert(map.size === 2)

    map.put(longKey(1), longState(101), 30)
    assert(map.get(longKey(1)).getLong(0) === 101)
    assert(longEntries(map.getByTime(21)) === Set((2, 200, 20)))
    assert(map.size === 2)

    map.remove(longKey(1))
    assert(map.get(longKey(1)) === null)
    assert(!map.contains(longKey(1)))
    assert(longEntries(map.getAll()) === Set((2, 200, 20)))
    assert(map.size === 1)

    map.remove(longKey(1)) // removing twice changes nothing
    assert(map.size === 1)
    map.put(longKey(1), longState(102), 40)
    assert(longEntries(map.getAll()) === Set((1, 102, 40), (2, 200, 20)))
    assert(map.size === 2)
  }

  test("extreme update times are kept and compared strictly") {
    val map = StateMap.empty(1, 1)
    map.put(longKey(1), longState(1), Long.MinValue)
    map.put(longKey(2), longState(2), Long.MaxValue)
    map.put(longKey(3), longState(3), 0)
    assert(longEntries(map.getAll()) ===
      Set((1, 1, Long.MinValue), (2, 2, Long.MaxValue), (3, 3, 0)))
    assert(longEntries(map.getByTime(Long.MinValue)) === Set.empty)
    assert(longEntries(map.getByTime(0)) === Set((1, 1, Long.MinValue)))
    assert(longEntries(map.getByTime(Long.MaxValue)) === Set((1, 1, Long.MinValue), (3, 3, 0)))
    assert(longContents(map.compact()) === longContents(map))
  }

  test("put copies the caller's key and state bytes") {
    val keyProjection = UnsafeProjection.create(Array[DataType](LongType))
    val stateProjection = UnsafeProjection.create(Array[DataType](StringType))
    val map = StateMap.empty(1, 1)
    // The projections reuse one buffer each, as the operator's projections do.
    for (i <- 0 until 100) {
      map.put(keyProjection(InternalRow(i.toLong)),
        stateProjection(InternalRow(UTF8String.fromString("state " + i))), i)
    }
    for (i <- 0 until 100) {
      assert(map.get(keyProjection(InternalRow(i.toLong))).getUTF8String(0).toString ===
        "state " + i)
    }
    assert(map.size === 100)
  }

  test("rows handed out stay valid after later writes") {
    val map = StateMap.empty(1, 1)
    map.put(longKey(1), stringState("first"), 1)
    val first = map.get(longKey(1))
    val entry = map.getAll().next()

    map.put(longKey(1), stringState("second"), 2)
    map.remove(longKey(1))
    // Enough overwrites of one key to make the layer copy its records into a new arena.
    val big = "x" * 200
    for (i <- 0 until 20000) map.put(longKey(1), stringState(big + i), i)
    assert(map.get(longKey(1)).getUTF8String(0).toString === big + 19999)

    assert(first.getUTF8String(0).toString === "first")
    assert(entry.key.getLong(0) === 1)
    assert(entry.state.getUTF8String(0).toString === "first")
    assert(entry.updateTime === 1)
  }

  test("rows of the wrong field count are rejected") {
    val map = StateMap.empty(1, 1)
    val twoFields = UnsafeProjection.create(Array[DataType](LongType, LongType))
    val wide = twoFields(InternalRow(1L, 2L)).copy()
    intercept[IllegalArgumentException](map.put(wide, longState(1), 1))
    intercept[IllegalArgumentException](map.put(longKey(1), wide, 1))
    intercept[IllegalArgumentException](map.get(wide))
    intercept[IllegalArgumentException](map.remove(wide))
    assert(map.size === 0)
  }

  test("put, get, getByTime, getAll, remove with copy") {
    val parentMap = StateMap.empty(1, 1)
    parentMap.put(longKey(1), longState(100), 1)
    parentMap.put(longKey(2), longState(200), 2)
    parentMap.remove(longKey(1))

    // Create child map and make changes
    val map = parentMap.copy()
    assert(map.get(longKey(1)) === null)
    assert(map.get(longKey(2)).getLong(0) === 200)
    assert(longEntries(map.getByTime(10)) === Set((2, 200, 2)))
    assert(longEntries(map.getByTime(2)) === Set.empty)
    assert(longEntries(map.getAll()) === Set((2, 200, 2)))
    assert(map.size === 1)

    // Add new items
    map.put(longKey(3), longState(300), 3)
    assert(map.get(longKey(3)).getLong(0) === 300)
    map.put(longKey(4), longState(400), 4)
    assert(map.get(longKey(4)).getLong(0) === 400)
    assert(longEntries(map.getByTime(10)) === Set((2, 200, 2), (3, 300, 3), (4, 400, 4)))
    assert(longEntries(map.getByTime(4)) === Set((2, 200, 2), (3, 300, 3)))
    assert(longEntries(map.getAll()) === Set((2, 200, 2), (3, 300, 3), (4, 400, 4)))
    assert(longEntries(parentMap.getAll()) === Set((2, 200, 2)))
    assert(map.size === 3)

    // Remove items
    map.remove(longKey(4))
    assert(map.get(longKey(4)) === null) // added in this map, then removed in this map
    map.remove(longKey(2))
    assert(map.get(longKey(2)) === null) // added in the parent, then removed in this map
    assert(longEntries(map.getAll()) === Set((3, 300, 3)))
    assert(longEntries(parentMap.getAll()) === Set((2, 200, 2)))
    assert(parentMap.get(longKey(2)).getLong(0) === 200)
    assert(map.size === 1)

    // Update items
    map.put(longKey(1), longState(1000), 100)
    assert(map.get(longKey(1)).getLong(0) === 1000) // removed in the parent, added in this map
    map.put(longKey(2), longState(2000), 200)
    assert(map.get(longKey(2)).getLong(0) === 2000) // in the parent, removed + added here
    map.put(longKey(3), longState(3000), 300)
    assert(map.get(longKey(3)).getLong(0) === 3000) // added + updated in this map
    map.put(longKey(4), longState(4000), 400)
    assert(map.get(longKey(4)).getLong(0) === 4000) // removed + updated in this map

    assert(longEntries(map.getAll()) ===
      Set((1, 1000, 100), (2, 2000, 200), (3, 3000, 300), (4, 4000, 400)))
    assert(longEntries(parentMap.getAll()) === Set((2, 200, 2)))
    assert(map.size === 4)
    assert(parentMap.size === 1)

    map.remove(longKey(2)) // remove a key of the parent, so that the child does not see it

    // Create child map and see availability of items
    val childMap = map.copy()
    assert(longEntries(childMap.getAll()) === longEntries(map.getAll()))
    assert(childMap.get(longKey(1)).getLong(0) === 1000) // removed in grandparent, added in parent
    assert(childMap.get(longKey(2)) === null) // added in grandparent, removed in parent
    assert(childMap.get(longKey(3)).getLong(0) === 3000) // added and updated in parent
    assert(childMap.size === 3)

    childMap.put(longKey(2), longState(20000), 200)
    assert(childMap.get(longKey(2)).getLong(0) === 20000)
    assert(childMap.size === 4)
    assert(map.get(longKey(2)) === null)
    assert(parentMap.get(longKey(2)).getLong(0) === 200)
  }

  test("a map that has been copied is read-only") {
    val parent = StateMap.empty(1, 1)
    parent.put(longKey(1), longState(1), 1)
    val child = parent.copy()
    intercept[IllegalStateException](parent.put(longKey(2), longState(2), 2))
    intercept[IllegalStateException](parent.remove(longKey(1)))
    assert(longContents(parent) === Map(1L -> (1L, 1L)))

    // A second copy of the same parent (a retried batch) starts from the same contents.
    child.put(longKey(2), longState(2), 2)
    val retry = parent.copy()
    assert(longContents(retry) === Map(1L -> (1L, 1L)))
    retry.remove(longKey(1))
    assert(longContents(child) === Map(1L -> (1L, 1L), 2L -> (2L, 2L)))
    assert(longContents(retry).isEmpty)
  }

  test("getByTime across layers") {
    val base = StateMap.empty(1, 1)
    for (k <- 0 until 10) base.put(longKey(k), longState(k), k)
    val middle = base.copy()
    middle.put(longKey(2), longState(20), 20) // newer time hides the base's old one
    middle.put(longKey(10), longState(10), 10)
    middle.remove(longKey(3))
    val top = middle.copy()
    top.put(longKey(4), longState(40), 1) // an older time than the base's wins as well
    top.remove(longKey(10))
    top.put(longKey(11), longState(11), 11)

    val expected = Map[Long, (Long, Long)](
      0L -> (0L, 0L), 1L -> (1L, 1L), 2L -> (20L, 20L), 4L -> (40L, 1L), 5L -> (5L, 5L),
      6L -> (6L, 6L), 7L -> (7L, 7L), 8L -> (8L, 8L), 9L -> (9L, 9L), 11L -> (11L, 11L))
    assertMap(top, LongCodec, LongCodec, expected, 0L until 12L, 25L)
    assert(longEntries(top.getByTime(2)) === Set((0, 0, 0), (4, 40, 1), (1, 1, 1)))
    assert(longEntries(top.getByTime(5)) === Set((0, 0, 0), (4, 40, 1), (1, 1, 1)))
    assert(longEntries(top.getByTime(6)) === Set((0, 0, 0), (4, 40, 1), (1, 1, 1), (5, 5, 5)))
  }

  test("string, multi-column and nullable keys; states with nulls and strings") {
    val keyCodec = PairKeyCodec
    val stateCodec = WideStateCodec
    var map = StateMap.empty(keyCodec.numFields, stateCodec.numFields)
    val ref = mutable.HashMap[(Integer, String), (WideState, Long)]()
    val keys = Seq[(Integer, String)](
      (1, "a"), (1, "b"), (2, "a"), (null, "a"), (1, null), (null, null), (0, ""),
      (1, "a long key string that needs more than one word of variable-length data"),
      (Int.MinValue, "ü∂ unicode"))
    val random = new Random(7)
    var time = 0L
    for (_ <- 0 until 5; key <- keys) {
      time += 1
      if (random.nextInt(4) == 0) {
        map.remove(keyCodec(key))
        ref.remove(key)
      } else {
        val state = WideState.random(random)
        map.put(keyCodec(key), stateCodec(state), time)
        ref(key) = (state, time)
      }
      if (key == keys.last) {
        assertMap(map, keyCodec, stateCodec, ref.toMap, keys, time + 1)
        map = map.copy()
      }
    }
    assertMap(map, keyCodec, stateCodec, ref.toMap, keys, time + 1)
    // (null, "a") and (1, null) and (null, null) are three different keys.
    assert(keys.count(k => map.contains(keyCodec(k))) === ref.size)

    val stringKeys = StateMap.empty(1, stateCodec.numFields)
    stringKeys.put(StringCodec("k"), stateCodec(WideState(null, null, null)), 1)
    stringKeys.put(StringCodec(""), stateCodec(WideState("", 0L, "")), 2)
    stringKeys.put(StringCodec(null), stateCodec(WideState("n", -1L, null)), 3)
    assert(contents(stringKeys, StringCodec, stateCodec) === Map(
      "k" -> (WideState(null, null, null), 1L),
      "" -> (WideState("", 0L, ""), 2L),
      (null: String) -> (WideState("n", -1L, null), 3L)))
  }

  test("under full churn, a chain compacts once it holds twice the live keys") {
    val keys = DeltaChainStateMap.MinEntriesToCompactEarly
    var map = StateMap.empty(1, 1)
    (0 until keys).foreach(k => map.put(longKey(k), longState(0), 0))
    val chainLengths = mutable.ArrayBuffer[Int]()
    for (round <- 1 to 6) {
      map = map.copy()
      chainLengths += map.deltaChainLength
      (0 until keys).foreach(k => map.put(longKey(k), longState(round), round))
    }
    // Spark's rule alone would have let the chain grow to 6 layers of every key.
    assert(chainLengths === Seq(1, 2, 3, 1, 2, 3))
    assert(map.size === keys)
    assert(map.getAll().forall(e => e.state.getLong(0) == 6L && e.updateTime == 6L))
  }

  test("compaction when the chain reaches the threshold") {
    val threshold = 5
    var map = StateMap.empty(1, 1, threshold)
    val ref = mutable.HashMap[Long, (Long, Long)]()
    val chainLengths = mutable.ArrayBuffer[Int]()
    for (i <- 1 to 12) {
      map.put(longKey(i), longState(i * 10), i)
      ref(i.toLong) = (i * 10L, i.toLong)
      if (i % 3 == 0) {
        map.remove(longKey(i - 1))
        ref.remove(i - 1L)
      }
      map.put(longKey(1), longState(i), i) // a key that every layer overwrites
      ref(1L) = (i.toLong, i.toLong)

      val before = map
      val beforeContents = longContents(before)
      assert(beforeContents === ref)
      map = map.copy()
      chainLengths += map.deltaChainLength
      assert(longContents(map) === beforeContents, s"copy $i differs from its parent")
      assert(longContents(before) === beforeContents, s"copy $i changed its parent")
      if (before.shouldCompact) {
        assert(map.parentMap ne before)
        assert(map.parentMap.deltaChainLength === 0)
      } else {
        assert(map.parentMap eq before)
      }
      assertMap(map, LongCodec, LongCodec, ref.toMap, 0L to 13L, 14L)
    }
    assert(chainLengths === Seq(1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2))

    val compacted = map.compact()
    assert(compacted.deltaChainLength === 0)
    assert(compacted.parentMap === null)
    assert(longContents(compacted) === longContents(map))
    compacted.put(longKey(100), longState(100), 100) // independent of the map it came from
    assert(!map.contains(longKey(100)))
  }

  test("small upper layers are merged over the base they share; large ones compact it") {
    val random = new Random(31)
    val ref = mutable.HashMap[Long, (Long, Long)]()
    val base = StateMap.empty(1, 1, 100)
    for (k <- 0L until 4000L) { base.put(longKey(k), longState(k), 1); ref(k) = (k, 1L) }
    var map = base.copy()
    var replica = readSnapshot(writeSnapshot(base), 1, 1).copy()
    var time = 2L
    var merges = 0
    var fulls = 0
    var currentBase = base
    for (round <- 1 to 40) {
      // Updates and removes of base keys, new keys, and new keys removed or re-put later.
      for (_ <- 1 to 150) {
        val k = random.nextInt(4600).toLong
        time += 1
        if (random.nextInt(3) == 0) { map.remove(longKey(k)); ref.remove(k) }
        else { map.put(longKey(k), longState(time), time); ref(k) = (time, time) }
      }
      replica = readDelta(writeDelta(map), replica)
      val committed = map
      map = committed.copy()
      if (round % 4 == 0) {
        // As the provider does: compacted while the next batch writes, then rebased under it.
        val chain = committed.compactedChain()
        assert(longContents(chain) === ref, s"round $round")
        assert(chain.size === ref.size)
        if (chain.deltaChainLength == 1) {
          merges += 1
          assert(chain.parentMap eq currentBase, "the merged layer is not over the same base")
        } else {
          // The keys written since the base outgrew half of it: a new base.
          assert(chain.deltaChainLength === 0, chain.toDebugString)
          assert(merges > 0, "a full compaction before any merge")
          fulls += 1
          currentBase = chain
        }
        val next = ref.clone()
        for (_ <- 1 to 50) {
          val k = random.nextInt(4600).toLong
          time += 1
          if (random.nextBoolean()) { map.remove(longKey(k)); next.remove(k) }
          else { map.put(longKey(k), longState(-time), time); next(k) = (-time, time) }
        }
        map = map.rebased(committed, chain).get
        assert(map.deltaChainLength === chain.deltaChainLength + 1)
        ref.clear(); ref ++= next
        assert(longContents(map) === ref, s"rebased, round $round")
        for (k <- 0L until 4600L) {
          assert(Option(map.get(longKey(k))).map(_.getLong(0)) === ref.get(k).map(_._1), s"key $k")
        }
        // The rebased top layer's delta still brings a replica to the same contents.
        val again = readDelta(writeDelta(map), replica)
        assert(longContents(again) === ref)
      }
    }
    assert(merges >= 2 && fulls >= 1, s"$merges merges, $fulls full compactions")
    assert(longContents(map.compact()) === ref)
    assert(longContents(readSnapshot(writeSnapshot(map), 1, 1)) === ref)
    assert(longEntries(map.getByTime(time / 2)).map(_._1) ===
      ref.collect { case (k, (_, t)) if t < time / 2 => k }.toSet)
  }

  test("under full churn the top layer alone is the compacted chain, with no record copied") {
    // Every key written each batch, as S2: each layer shadows every layer below it.
    val keys = 3000L
    var map = StateMap.empty(1, 1, 100).copy()
    var ref = Map.empty[Long, (Long, Long)]
    for (batch <- 1 to 4) {
      for (k <- 0L until keys) map.put(longKey(k), longState(k * batch), batch)
      ref = (0L until keys).map(k => k -> (k * batch, batch.toLong)).toMap
      if (batch < 4) map = map.copy()
    }
    val committed = map
    val chain = committed.compactedChain()
    assert(chain.deltaChainLength === 0, chain.toDebugString)
    assert(chain.size === keys)
    assert(longContents(chain) === ref)
    // It is the top layer itself, over nothing: the three shadowed layers are gone.
    assert(chain.layer eq committed.layer)
    assert(chain.parentMap === null)
    assert(chain.memoryUsedBytes < committed.memoryUsedBytes)

    // The next batch writes over it, as the provider rebases a running batch; the committed
    // map, which shares the layer, keeps its contents.
    val next = committed.copy()
    next.put(longKey(1), longState(-1), 5)
    next.remove(longKey(2))
    next.put(longKey(keys), longState(keys), 5)
    val rebased = next.rebased(committed, chain).get
    val expected = ref - 2L + (1L -> (-1L, 5L)) + (keys -> (keys, 5L))
    assert(rebased.deltaChainLength === 1)
    assert(longContents(rebased) === expected)
    assert(rebased.size === keys)
    assert(longContents(committed) === ref)
    assert(longContents(chain) === ref)
    // The removal hides the base's key in the next delta, as over any base.
    val replica = readDelta(writeDelta(rebased), readSnapshot(writeSnapshot(chain), 1, 1))
    assert(longContents(replica) === expected)

    // A copy that compacts takes the same way out: its base is the top layer, not a copy.
    val churned = StateMap.empty(1, 1, 2).copy()
    for (k <- 0L until keys) churned.put(longKey(k), longState(k), 1)
    val second = churned.copy()
    for (k <- 0L until keys) second.put(longKey(k), longState(-k), 2)
    val third = second.copy() // the chain reached its threshold of 2
    assert(third.deltaChainLength === 1)
    assert(third.parentMap.layer eq second.layer)
    assert(third.parentMap.parentMap === null)
    assert(longContents(third) === (0L until keys).map(k => k -> (-k, 2L)).toMap)

    // A top layer with a removed key is not the whole chain: a compaction copies as before.
    val withRemoval = second.copy()
    for (k <- 0L until keys) withRemoval.put(longKey(k), longState(k), 3)
    withRemoval.remove(longKey(0))
    val compacted = withRemoval.compactedChain()
    assert(compacted.deltaChainLength === 0)
    assert(!(compacted.layer eq withRemoval.layer))
    assert(longContents(compacted) === (1L until keys).map(k => k -> (k, 3L)).toMap)
  }

  test("a layer filled from two layers of its capacity, in their slot order, probes short") {
    // As a repartition merges two partitions, or a conversion a map's layers: each source
    // 60% full of its capacity, so two of them placed alike would overfill the same slots.
    val perSource = (RowHashMap.capacityFor(40000) * 0.6).toInt
    def source(first: Long): DeltaChainStateMap = {
      val map = StateMap.empty(1, 1).copy()
      for (k <- first until first + perSource) map.put(longKey(k), longState(k), 1L)
      map
    }
    val (a, b) = (source(0), source(perSource))
    assert(a.layer.slotCapacity === b.layer.slotCapacity)
    val merged = StateMap.empty(1, 1).copy()
    // All of a and the start of b, stopping before the merged layer outgrows the sources'.
    val beforeGrowth = (a.layer.slotCapacity * 0.74).toInt - perSource
    (a.getAll() ++ b.getAll().take(beforeGrowth)).foreach { e =>
      merged.put(e.key, e.state, e.updateTime)
    }
    assert(merged.layer.slotCapacity === a.layer.slotCapacity)
    assert(merged.layer.meanProbeDistance < 4.0, merged.layer.meanProbeDistance)
  }

  test("a copy's layer is sized for the smaller of the last two batches' writes") {
    def batch(map: StateMap, keys: Long, time: Long): Unit =
      for (k <- 0L until keys) map.put(longKey(k), longState(time), time)
    // Full churn: from the third version on, each layer takes its batch without growing.
    var map = StateMap.empty(1, 1, 100).copy()
    for (v <- 1 to 5) {
      val grewBefore = map.layer.layoutVersion
      batch(map, 5000, v)
      if (v >= 3) assert(map.layer.layoutVersion === grewBefore, s"version $v's layer grew")
      map = map.copy()
    }
    assert(map.layer.slotCapacity === RowHashMap.capacityFor(5000))
    // A large first batch, then small ones: no layer after it is sized for the large one.
    val small = StateMap.empty(1, 1, 100).copy()
    batch(small, 20000, 1)
    val second = small.copy()
    assert(second.layer.slotCapacity < RowHashMap.capacityFor(100))
    batch(second, 50, 2)
    val third = second.copy()
    assert(third.layer.slotCapacity < RowHashMap.capacityFor(100))
    assert(longContents(third).size === 20000)
  }

  test("a first version over an empty base is the base its small upper layers merge over") {
    // As a new query's state: version 0 is empty, version 1 a layer of every key over it.
    val empty = StateMap.empty(1, 1, 100)
    val first = empty.copy()
    val ref = mutable.HashMap[Long, (Long, Long)]()
    for (k <- 0L until 4000L) { first.put(longKey(k), longState(k), 1); ref(k) = (k, 1L) }
    var map = first.copy()
    for (round <- 2 to 6) {
      for (k <- round * 100L until round * 100L + 50) {
        map.put(longKey(k), longState(-k), round); ref(k) = (-k, round.toLong)
      }
      map.remove(longKey(round)); ref.remove(round)
      if (round < 6) map = map.copy()
    }
    val committed = map
    val chain = committed.compactedChain()
    // The layers above the first version merged into one over it: not a copy of every key.
    assert(chain.parentMap eq first, chain.toDebugString)
    assert(chain.deltaChainLength === 2)
    assert(longContents(chain) === ref)
    val next = committed.copy()
    next.put(longKey(5000), longState(5000), 7)
    val rebased = next.rebased(committed, chain).get
    assert(rebased.deltaChainLength === 3)
    assert(longContents(rebased) === (ref + (5000L -> (5000L, 7L))))
    assert(rebased.size === ref.size + 1)
    // A chain whose layers are all empty has nothing to merge over: a full compaction.
    val allEmpty = StateMap.empty(1, 1, 100).copy().copy().copy()
    assert(allEmpty.compactedChain().deltaChainLength === 0)
  }

  test("a removed key is dropped unless a lower layer has it") {
    val base = StateMap.empty(1, 1)
    base.put(longKey(1), longState(1), 1)
    val top = base.copy()
    top.put(longKey(2), longState(2), 2)
    top.remove(longKey(2)) // never below: no tombstone needed
    top.remove(longKey(1)) // below: needs a tombstone
    top.remove(longKey(3)) // nowhere: nothing to do
    val layer = top.layer
    val tombstones = (0 until layer.slotCapacity).count(layer.isTombstone)
    val removed = (0 until layer.slotCapacity).count(layer.isRemoved)
    assert(tombstones === 1)
    assert(removed === 2)
    assert(deltaRecordCount(top) === 1)
    assert(top.size === 0)
  }

  test("removed keys do not pile up in a layer") {
    val map = StateMap.empty(1, 1)
    val live = 1000
    for (i <- 0 until 200000) {
      map.put(longKey(i), longState(i), i)
      if (i >= live) map.remove(longKey(i - live))
    }
    assert(map.size === live)
    assert(map.layer.slotCapacity <= 4096, map.toDebugString)
    assert(map.memoryUsedBytes < (2L << 20), map.toDebugString)
    assert(longContents(map) === (200000 - live until 200000).map { i =>
      i.toLong -> (i.toLong, i.toLong)
    }.toMap)
  }

  test("overwrites of the same keys do not pile up garbage") {
    val map = StateMap.empty(1, 1)
    val payload = "p" * 100
    for (round <- 0 until 2000; k <- 0 until 50) {
      map.put(longKey(k), stringState(payload + round), round)
    }
    assert(map.size === 50)
    assert(map.memoryUsedBytes < (4L << 20), map.toDebugString)
    for (k <- 0 until 50) {
      assert(map.get(longKey(k)).getUTF8String(0).toString === payload + 1999)
    }
  }

  test("a layer tells keys of one hash apart by their bytes, through growth and vacuuming") {
    // Probes compare a tag of the hash kept in the slot's address word, then the key bytes:
    // keys whose hashes agree in every bit, or differ only in the tag's bits, or only below
    // them, must all stay apart while slots are rebuilt and records moved.
    val layer = new RowHashMap(4, 1024)
    val base = Platform.BYTE_ARRAY_OFFSET.toLong
    val hashes = Seq(0x12345678, 0x12345678 ^ 0x7ff80000, 0x12345678 ^ 0x00070000,
      0x92345678)
    def key(i: Int): Array[Byte] = java.nio.ByteBuffer.allocate(8).putLong(i * 7919L).array()
    def hashOf(i: Int): Int = hashes(Math.floorMod(i, hashes.size))
    def state(i: Int, round: Int): Array[Byte] = Array.fill(1000)((i + round).toByte)
    def find(i: Int): Int = layer.find(hashOf(i), key(i), base, 8)
    val keys = 0 until 400
    for (i <- keys) {
      assert(find(i) === -1, s"key $i before its insert")
      val s = state(i, 0)
      layer.insertLive(hashOf(i), key(i), base, 8, s, base, s.length, i, shadowsParent = false)
    }
    val rebuilds = layer.layoutVersion
    assert(rebuilds > 0, "the layer never grew")
    // 400 keys x 1000 bytes a round: the old records' garbage soon outweighs the live ones,
    // and the records are moved to a new arena.
    for (round <- 1 to 12; i <- keys) {
      val s = state(i, round)
      layer.updateLive(find(i), s, base, s.length, round)
    }
    for (i <- keys if i % 3 == 0) layer.markRemoved(find(i))
    for (i <- keys) {
      val slot = find(i)
      assert(slot >= 0, s"key $i lost")
      assert(layer.hashAt(slot) === hashOf(i))
      if (i % 3 == 0) {
        assert(layer.isRemoved(slot), s"key $i")
      } else {
        assert(layer.isLive(slot), s"key $i")
        assert(layer.updateTimeAt(slot) === 12L)
        val bytes = new Array[Byte](layer.stateLengthAt(slot))
        Platform.copyMemory(layer.pageAt(slot), layer.stateOffsetAt(slot), bytes, base,
          bytes.length)
        assert(bytes.toSeq === state(i, 12).toSeq, s"key $i")
      }
    }
    assert(find(400) === -1 && find(-1) === -1)
    // 13 rounds of 400 kB were written; vacuuming keeps about two rounds' worth.
    assert(layer.footprintBytes < (3L << 20), "the updates' garbage was never vacuumed")
  }

  test("memory per entry of small states") {
    val entries = 180000
    val map = StateMap.empty(1, 1)
    for (i <- 0 until entries) map.put(longKey(i), longState(i), i)
    val bytesPerEntry = map.memoryUsedBytes.toDouble / entries
    info(f"$bytesPerEntry%.1f bytes per (BIGINT key, BIGINT state) entry at $entries entries")
    // 32 bytes of rows, 8 of record header, 20 per slot at a load factor of 0.69.
    assert(bytesPerEntry < 80)
  }

  test("removing or re-putting the key just returned while iterating") {
    def chain(): (DeltaChainStateMap, mutable.HashMap[Long, (Long, Long)]) = {
      val base = StateMap.empty(1, 1)
      val ref = mutable.HashMap[Long, (Long, Long)]()
      for (k <- 0L until 100L) {
        base.put(longKey(k), longState(k), k)
        ref(k) = (k, k)
      }
      val top = base.copy()
      for (k <- 100L until 150L) {
        top.put(longKey(k), longState(k), k)
        ref(k) = (k, k)
      }
      for (k <- 0L until 10L) {
        top.put(longKey(k), longState(k), 1000)
        ref(k) = (k, 1000L)
      }
      for (k <- 10L until 20L) {
        top.remove(longKey(k))
        ref.remove(k)
      }
      (top, ref)
    }

    // Timing out, as mapWithState does it: remove each key as getByTime returns it.
    val (timingOut, timingOutRef) = chain()
    val timedOut = mutable.ArrayBuffer[Long]()
    timingOut.getByTime(120).foreach { entry =>
      timedOut += entry.key.getLong(0)
      timingOut.remove(entry.key)
    }
    assert(timedOut.sorted === ((20L until 100L) ++ (100L until 120L)))
    timedOut.foreach(timingOutRef.remove)
    assert(longContents(timingOut) === timingOutRef)

    // Updating every key as getAll returns it: each key is returned exactly once.
    val (updating, updatingRef) = chain()
    val updated = mutable.ArrayBuffer[Long]()
    updating.getAll().foreach { entry =>
      val k = entry.key.getLong(0)
      updated += k
      updating.put(entry.key, longState(entry.state.getLong(0) + 1), 2000)
    }
    assert(updated.sorted === updatingRef.keys.toSeq.sorted)
    assert(longContents(updating) === updatingRef.map { case (k, (s, _)) => k -> (s + 1, 2000L) })
  }

  test(
    "a scan of a long chain hides every key an upper layer holds, " +
      "also while writing the key just returned") {
    // A base and six layers of puts, re-puts and removes: below the second layer a scan checks
    // entries against one table of the upper layers' keys instead of each layer.
    def chain(): (DeltaChainStateMap, mutable.HashMap[Long, (Long, Long)]) = {
      val random = new Random(5)
      var map = StateMap.empty(1, 1, 20)
      val ref = mutable.HashMap[Long, (Long, Long)]()
      for (k <- 0L until 2000L) {
        map.put(longKey(k), longState(k), k)
        ref(k) = (k, k)
      }
      for (layer <- 1 to 6) {
        map = map.copy()
        for (_ <- 0 until 300) {
          val k = random.nextInt(2500).toLong
          if (random.nextInt(4) == 0) {
            map.remove(longKey(k))
            ref.remove(k)
          } else {
            map.put(longKey(k), longState(k * 10 + layer), layer * 10000L + k)
            ref(k) = (k * 10 + layer, layer * 10000L + k)
          }
        }
      }
      assert(map.deltaChainLength == 6)
      (map, ref)
    }

    val (scanned, ref) = chain()
    assert(longContents(scanned) === ref)
    assert(longEntries(scanned.getByTime(30000L)) ===
      ref.collect { case (k, (s, t)) if t < 30000L => (k, s, t) }.toSet)
    assert(longContents(readSnapshot(writeSnapshot(scanned), 1, 1)) === ref)

    val (timingOut, timingOutRef) = chain()
    timingOut.getByTime(30000L).foreach(entry => timingOut.remove(entry.key))
    timingOutRef.filterInPlace { case (_, (_, t)) => t >= 30000L }
    assert(longContents(timingOut) === timingOutRef)

    val (updating, updatingRef) = chain()
    val updated = mutable.ArrayBuffer[Long]()
    updating.getAll().foreach { entry =>
      updated += entry.key.getLong(0)
      updating.put(entry.key, longState(entry.state.getLong(0) + 1), 99999L)
    }
    assert(updated.sorted === updatingRef.keys.toSeq.sorted)
    assert(longContents(updating) === updatingRef.map { case (k, (s, _)) => k -> (s + 1, 99999L) })
  }
  test("other writes while iterating fail fast") {
    val map = StateMap.empty(1, 1)
    for (k <- 0 until 10) map.put(longKey(k), longState(k), k)
    val entries = map.getAll()
    entries.next()
    for (k <- 10 until 10000) map.put(longKey(k), longState(k), k)
    intercept[ConcurrentModificationException](entries.foreach(_ => ()))
  }

  test("all possible sequences of operations with copies") {
    checkAllSequences(numSets = 3, numOpsPerSet = 3, deltaChainThreshold = 20)
  }

  test("all possible sequences of operations with copies and compaction") {
    // Chain lengths 1, 2, then every other copy compacts.
    checkAllSequences(numSets = 4, numOpsPerSet = 2, deltaChainThreshold = 2)
    // Every copy after the first compacts.
    checkAllSequences(numSets = 3, numOpsPerSet = 3, deltaChainThreshold = 1)
  }

  test("all possible sequences of read-modify-writes with copies and compaction") {
    checkAllSequences(numSets = 3, numOpsPerSet = 3, deltaChainThreshold = 20,
      readModifyWrite = true)
    checkAllSequences(numSets = 4, numOpsPerSet = 2, deltaChainThreshold = 2,
      readModifyWrite = true)
  }

  test("putInPlace overwrites only the views of the key's current state") {
    val map = StateMap.empty(1, 1)
    map.put(longKey(1), longState(10), 1)
    map.put(longKey(2), longState(20), 1)
    val one = map.get(longKey(1))
    val two = map.get(longKey(2))
    val used = map.memoryUsedBytes

    map.putInPlace(longKey(1), longState(11), 2)
    assert(map.get(longKey(1)).getLong(0) === 11)
    assert(one.getLong(0) === 11, "same-size state: written over the old bytes")
    assert(two.getLong(0) === 20)
    // The state row get handed out may be put back: only the update time changes.
    map.putInPlace(longKey(1), map.get(longKey(1)), 3)
    assert(longContents(map) === Map(1L -> (11L, 3L), 2L -> (20L, 1L)))

    // Overwrites of same-size states take no memory.
    for (i <- 0 until 100000) map.putInPlace(longKey(1 + i % 2), longState(i), i)
    assert(map.memoryUsedBytes === used)
    assert(longContents(map) === Map(1L -> (99998L, 99998L), 2L -> (99999L, 99999L)))

    // A state of another size cannot go where the old one was: plain put, old views intact.
    val strings = StateMap.empty(1, 1)
    strings.put(longKey(1), stringState("short"), 1)
    val short = strings.get(longKey(1))
    strings.putInPlace(longKey(1), stringState("a state that takes more words"), 2)
    assert(short.getUTF8String(0).toString === "short")
    assert(strings.get(longKey(1)).getUTF8String(0).toString === "a state that takes more words")
  }

  test("putInPlace leaves the layers a copy has frozen alone") {
    val base = StateMap.empty(1, 1)
    base.put(longKey(1), longState(10), 1)
    val frozen = base.get(longKey(1))
    val top = base.copy()
    top.putInPlace(longKey(1), longState(11), 2)
    val mine = top.get(longKey(1))
    top.putInPlace(longKey(1), longState(12), 3)
    assert(frozen.getLong(0) === 10)
    assert(longContents(base) === Map(1L -> (10L, 1L)))
    assert(mine.getLong(0) === 12, "the top layer's own record is overwritten")
    assert(longContents(top) === Map(1L -> (12L, 3L)))
    // A removed key put again in place gets a record of its own.
    top.remove(longKey(1))
    top.putInPlace(longKey(1), longState(13), 4)
    assert(longContents(top) === Map(1L -> (13L, 4L)))
    assert(longContents(base) === Map(1L -> (10L, 1L)))
  }

  test("a write after a get of another key, or of a reused key buffer, finds its own key") {
    val keys = UnsafeProjection.create(Array[DataType](LongType))
    // Keys that start probing at the same slot of a new layer, so that one takes the empty
    // slot where a get of the other ended.
    val slots = 128 // a new layer's capacity
    def slotOf(k: Long): Int = {
      val row = longKey(k)
      DeltaChainStateMap.hashOf(row.getBaseObject, row.getBaseOffset, row.getSizeInBytes) &
        (slots - 1)
    }
    val a = 1L
    val b = Iterator.from(2).map(_.toLong).find(k => slotOf(k) == slotOf(a)).get
    val map = StateMap.empty(1, 1)
    assert(map.layer.slotCapacity === slots)

    assert(map.get(keys(InternalRow(a))) === null)
    val key = keys(InternalRow(b)) // the same buffer, now holding b
    map.putInPlace(key, longState(20), 1)
    map.put(longKey(a), longState(10), 2)
    assert(longContents(map) === Map(a -> (10L, 2L), b -> (20L, 1L)))

    // A get, a write of another key, then a write of the first key.
    assert(map.get(longKey(a)).getLong(0) === 10)
    map.remove(longKey(b))
    map.putInPlace(longKey(a), longState(11), 3)
    assert(longContents(map) === Map(a -> (11L, 3L)))

    // A get of a new key, then an insert of it that makes the layer grow first.
    val full = StateMap.empty(1, 1)
    var k = 0L
    while (full.layer.usedSlotCount < full.layer.slotCapacity * 3 / 4) {
      full.put(longKey(k), longState(k), k)
      k += 1
    }
    assert(full.get(keys(InternalRow(k))) === null)
    full.putInPlace(keys(InternalRow(k)), longState(k), k)
    assert(full.layer.slotCapacity === 2 * slots)
    assert(longContents(full) === (0L to k).map(i => i -> (i, i)).toMap)
  }

  test(
    "a key may hold only a timer: no state, but a time, in lookups, scans, copies and the index") {
    val map = StateMap.empty(1, 1)
    map.put(longKey(1), longState(10), 100)
    map.put(longKey(2), null, 200)
    assert(map.get(longKey(2)) === null && map.contains(longKey(2)))
    assert(map.getTime(longKey(2)) === 200L && map.size === 2)
    intercept[IllegalArgumentException](map.put(longKey(3), null, StateMap.NoTime))
    map.prepareExpiry()

    // A copy: the key's state removed while it keeps a timer, over a parent with the state.
    val next = map.copy()
    next.get(longKey(1))
    next.putInPlace(longKey(1), null, 150)
    assert(next.get(longKey(1)) === null && next.getTime(longKey(1)) === 150L)
    assert(map.get(longKey(1)) === longState(10)) // the parent is untouched
    assert(next.size === 2)
    def entries(m: StateMap, it: Iterator[StateEntry]) =
      it.map(e => (e.key.getLong(0), Option(e.state).map(_.getLong(0)), e.updateTime)).toSet
    assert(entries(next, next.getAll()) === Set((1L, None, 150L), (2L, None, 200L)))
    assert(entries(next, next.expiring(201)) === Set((1L, None, 150L), (2L, None, 200L)))
    assert(entries(next, next.getByTime(160)) === Set((1L, None, 150L)))

    // A state again, then only a timer again (in place, the same record), then neither.
    next.putInPlace(longKey(2), longState(20), 300)
    assert(next.get(longKey(2)) === longState(20))
    next.putInPlace(longKey(2), null, 310)
    next.putInPlace(longKey(2), null, 320)
    assert(next.get(longKey(2)) === null && next.getTime(longKey(2)) === 320L)
    next.remove(longKey(2))
    assert(!next.contains(longKey(2)) && next.size === 1)
    assert(entries(next, next.expiring(1000)) === Set((1L, None, 150L)))
    assert(rawContents(next.compact()) === rawContents(next))
  }

  test("getTime right after a get gives the time that get found, and a write makes it look again") {
    val map = StateMap.empty(1, 1)
    map.put(longKey(1), longState(10), 100)
    map.put(longKey(2), null, 200)
    val next = map.copy()
    next.put(longKey(3), longState(30), 300)
    // Found in the parent, in the top layer, holding only a timer, and missing.
    Seq(1L -> 100L, 3L -> 300L, 2L -> 200L, 4L -> StateMap.NoTime).foreach { case (k, t) =>
      next.get(longKey(k))
      assert(next.getTime(longKey(k)) === t, s"key $k")
    }
    // Another key than the last get's, and a write after the get.
    next.get(longKey(1))
    assert(next.getTime(longKey(3)) === 300L)
    next.get(longKey(1))
    next.putInPlace(longKey(1), longState(11), 110)
    assert(next.getTime(longKey(1)) === 110L)
    next.get(longKey(3))
    next.remove(longKey(3))
    assert(next.getTime(longKey(3)) === StateMap.NoTime)
  }

  test("random operations with copies, timeouts and large states against a reference map") {
    checkRandomOperations(readModifyWrite = false)
  }

  test("random read-modify-writes with copies, timeouts and large states against a reference map") {
    checkRandomOperations(readModifyWrite = true)
  }

  /**
   * With `readModifyWrite`, most writes follow a get (of their key, mostly, from a reused key
   * buffer; half of them after a prefetch, given the key's hash) and half of the puts are
   * putInPlace.
   */
  private def checkRandomOperations(readModifyWrite: Boolean): Unit = {
    // Enough churn for layer rebuilds and arena vacuums, and states larger than an arena page.
    val random = new Random(23)
    val keyBuffer = UnsafeProjection.create(Array[DataType](LongType))
    val numKeys = 3000
    var map = StateMap.empty(1, 1, 4)
    var replica = StateMap.empty(1, 1, 3)
    val ref = mutable.HashMap[Long, (String, Long)]()
    def randomState(): String = random.nextInt(1000) match {
      case 0 => "L" * (RowArena.MaxPageSize + random.nextInt(1000))
      case n if n < 20 => "m" * random.nextInt(3000)
      case _ => "s" * random.nextInt(40)
    }
    for (time <- 1L to 60000L) {
      val k = random.nextInt(numKeys).toLong
      val key = if (readModifyWrite) keyBuffer(InternalRow(k)) else longKey(k)
      if (readModifyWrite && random.nextInt(8) != 0) {
        val read = if (random.nextInt(8) == 0) random.nextInt(numKeys).toLong else k
        val readKey = keyBuffer(InternalRow(read))
        // Half of the reads as a replay makes them: a group's keys read ahead (a hint, which
        // must change nothing), then a lookup given the key's hash.
        val state = if (random.nextBoolean()) map.get(readKey)
        else {
          val group = Array.fill(1 + random.nextInt(16))(longKey(random.nextInt(numKeys)).hashCode)
          group(random.nextInt(group.length)) = readKey.hashCode
          map.prefetch(group, group.length)
          map.get(readKey, readKey.hashCode)
        }
        assert(Option(state).map(_.getUTF8String(0).toString) === ref.get(read).map(_._1))
        keyBuffer(InternalRow(k))
      }
      if (random.nextInt(3) == 0) {
        map.remove(key)
        ref.remove(k)
      } else {
        val state = randomState()
        if (readModifyWrite && random.nextBoolean()) {
          map.putInPlace(key, stringState(state), time)
        } else {
          map.put(key, stringState(state), time)
        }
        ref(k) = (state, time)
      }
      if (time % 2000 == 0) {
        // Time out what has not been updated for a while, as mapWithState does.
        map.getByTime(time - 3000).foreach { entry =>
          assert(entry.updateTime < time - 3000)
          map.remove(entry.key)
        }
        ref.filterInPlace { case (_, (_, updateTime)) => updateTime >= time - 3000 }
        assert(contents(map, LongCodec, StringCodec) === ref, s"at time $time")
        assert(map.size === ref.size)
        replica = readDelta(writeDelta(map), replica)
        assert(contents(replica, LongCodec, StringCodec) === ref, s"replica at time $time")
        map = map.copy()
      }
    }
    for (k <- 0L until numKeys) {
      val row = map.get(longKey(k))
      assert(Option(row).map(_.getUTF8String(0).toString) === ref.get(k).map(_._1))
    }
    val restored = readSnapshot(writeSnapshot(map), 1, 1)
    assert(contents(restored, LongCodec, StringCodec) === ref)
    assert(contents(map.compact(), LongCodec, StringCodec) === ref)
  }

  private def checkAllSequences(
      numSets: Int,
      numOpsPerSet: Int,
      deltaChainThreshold: Int,
      readModifyWrite: Boolean = false): Unit = {
    /*
     * As in Spark's test: every key gets its own sequence of puts and removes, one operation
     * per step, so that all 2 ^ (numSets * numOpsPerSet) sequences are covered. After each set
     * of steps the map is copied and the next set goes to the copy, which checks that data
     * persists across copies and that a copy's writes never reach its parent. With a small
     * threshold the copies also compact. In addition, every set is checkpointed as a delta
     * (replayed onto a replica map) and as a snapshot, and both are compared as well.
     *
     * With `readModifyWrite`, each operation is done as StateUpdater does it: a get of the key
     * from one reused key buffer, then putInPlace or remove of that buffer, which checks the
     * lookup a write reuses from the get before it (see DeltaChainStateMap.get).
     */
    val numTotalOps = numSets * numOpsPerSet
    val numKeys = 1 << numTotalOps
    val keys = 0L until numKeys

    val refMap = mutable.HashMap[Long, (WideState, Long)]()
    var prevSetRefMap: Map[Long, (WideState, Long)] = null
    var stateMap = StateMap.empty(1, WideStateCodec.numFields, deltaChainThreshold)
    var prevSetStateMap: DeltaChainStateMap = null
    var replica = StateMap.empty(1, WideStateCodec.numFields, deltaChainThreshold)
    var compactions = 0
    val random = new Random(numSets * 100 + numOpsPerSet * 10 + deltaChainThreshold)
    var time = 1L
    val keyBuffer = UnsafeProjection.create(Array[DataType](LongType))
    def keyRead(keyId: Long, expected: Option[WideState]): UnsafeRow = {
      val key = keyBuffer(InternalRow(keyId))
      assert(Option(stateMap.get(key)).map(WideStateCodec.decode) === expected, s"key $keyId")
      key
    }

    for (setId <- 0 until numSets) {
      for (opInSetId <- 0 until numOpsPerSet) {
        val opId = setId * numOpsPerSet + opInSetId
        for (keyId <- keys) {
          time += 1
          // The opId-th bit of the key, from the left, says which operation it gets.
          ((keyId >> (numTotalOps - opId - 1)) & 1: @unchecked) match {
            case 0L =>
              val state = WideState.random(random)
              if (readModifyWrite) {
                val key = keyRead(keyId, refMap.get(keyId).map(_._1))
                stateMap.putInPlace(key, WideStateCodec(state), time)
              } else {
                stateMap.put(longKey(keyId), WideStateCodec(state), time)
              }
              refMap.put(keyId, (state, time))
            case 1L =>
              if (readModifyWrite) {
                stateMap.remove(keyRead(keyId, refMap.get(keyId).map(_._1)))
              } else {
                stateMap.remove(longKey(keyId))
              }
              refMap.remove(keyId)
          }
        }
        withClue(s"after operation $opId: ") {
          assertMap(stateMap, LongCodec, WideStateCodec, refMap.toMap, keys, time)
          if (prevSetStateMap != null) {
            withClue("parent of the map changed: ") {
              assertMap(prevSetStateMap, LongCodec, WideStateCodec, prevSetRefMap, keys, time)
            }
          }
        }
      }

      withClue(s"after set $setId: ") {
        replica = StateMapSerde.readDelta(
          new DataInputStream(new ByteArrayInputStream(writeDelta(stateMap))), replica)
        withClue("replica rebuilt from deltas: ") {
          assertMap(replica, LongCodec, WideStateCodec, refMap.toMap, keys, time)
        }
        withClue("compacted map: ") {
          val compacted = stateMap.compact()
          assert(compacted.deltaChainLength === 0)
          assertMap(compacted, LongCodec, WideStateCodec, refMap.toMap, keys, time)
        }
        withClue("map read from a snapshot: ") {
          val restored = readSnapshot(writeSnapshot(stateMap), 1, WideStateCodec.numFields)
          assertMap(restored, LongCodec, WideStateCodec, refMap.toMap, keys, time)
        }
      }

      prevSetStateMap = stateMap
      prevSetRefMap = refMap.toMap
      stateMap = stateMap.copy()
      if (stateMap.parentMap ne prevSetStateMap) compactions += 1
      assert(stateMap.deltaChainLength <= deltaChainThreshold)
      withClue(s"copy after set $setId: ") {
        assertMap(stateMap, LongCodec, WideStateCodec, prevSetRefMap, keys, time)
      }
    }
    assertMap(stateMap, LongCodec, WideStateCodec, refMap.toMap, keys, time)
    if (deltaChainThreshold < numSets) assert(compactions > 0)
  }

  private def deltaRecordCount(map: DeltaChainStateMap): Int = {
    val in = new DataInputStream(new ByteArrayInputStream(writeDelta(map)))
    (0 until 6).foreach(_ => in.readInt()) // magic, version, fields, parent and result sizes
    in.readInt()
  }
}

object StateMapSuite {
  import org.scalatest.Assertions._

  /** Encodes Scala values as UnsafeRows of one schema and back. */
  final class RowCodec[T](
      types: Seq[DataType], toRow: T => InternalRow, fromRow: UnsafeRow => T) {
    private val projection = UnsafeProjection.create(types.toArray)

    def numFields: Int = types.size

    /** A row of its own (projections reuse their buffer). */
    def apply(value: T): UnsafeRow = projection(toRow(value)).copy()

    def decode(row: UnsafeRow): T = fromRow(row)
  }

  private def utf8(s: String): UTF8String = if (s == null) null else UTF8String.fromString(s)

  private def string(row: UnsafeRow, i: Int): String =
    if (row.isNullAt(i)) null else row.getUTF8String(i).toString

  val LongCodec = new RowCodec[Long](Seq(LongType), v => InternalRow(v), _.getLong(0))

  val StringCodec = new RowCodec[String](Seq(StringType), s => InternalRow(utf8(s)), string(_, 0))

  val PairKeyCodec = new RowCodec[(Integer, String)](
    Seq(IntegerType, StringType),
    { case (i, s) => InternalRow(i, utf8(s)) },
    row => (if (row.isNullAt(0)) null else Integer.valueOf(row.getInt(0)), string(row, 1)))

  /** A state with a nullable string, a nullable long and another nullable string. */
  final case class WideState(name: String, count: java.lang.Long, note: String)

  object WideState {
    def random(random: Random): WideState = WideState(
      if (random.nextInt(4) == 0) null else "s" * random.nextInt(20) + random.nextInt(),
      if (random.nextInt(5) == 0) null else java.lang.Long.valueOf(random.nextLong()),
      if (random.nextInt(3) == 0) null else "n" * random.nextInt(3))
  }

  val WideStateCodec = new RowCodec[WideState](
    Seq(StringType, LongType, StringType),
    s => InternalRow(utf8(s.name), s.count, utf8(s.note)),
    row =>
      WideState(string(row, 0),
        if (row.isNullAt(1)) null else java.lang.Long.valueOf(row.getLong(1)), string(row, 2)))

  def longKey(k: Long): UnsafeRow = LongCodec(k)

  def longState(s: Long): UnsafeRow = LongCodec(s)

  def stringState(s: String): UnsafeRow = StringCodec(s)

  /** (key, state, update time) of each entry, for (BIGINT) -> (BIGINT) maps. */
  def longEntries(entries: Iterator[StateEntry]): Set[(Long, Long, Long)] = {
    val seq = entries.map(e => (e.key.getLong(0), e.state.getLong(0), e.updateTime)).toSeq
    assert(seq.map(_._1).distinct.size == seq.size, s"a key was returned twice: $seq")
    seq.toSet
  }

  def longContents(map: StateMap): Map[Long, (Long, Long)] = contents(map, LongCodec, LongCodec)

  /** The decoded contents of a map, checking that no key is returned twice. */
  def contents[K, S](map: StateMap, keys: RowCodec[K], states: RowCodec[S]): Map[K, (S, Long)] =
    decode(map.getAll(), keys, states)

  def decode[K, S](
      entries: Iterator[StateEntry], keys: RowCodec[K], states: RowCodec[S]): Map[K, (S, Long)] = {
    val seq = entries.map(e => keys.decode(e.key) -> (states.decode(e.state), e.updateTime)).toSeq
    val result = seq.toMap
    assert(result.size == seq.size, s"a key was returned twice: ${seq.map(_._1)}")
    result
  }

  /** Contents as bytes, for comparing maps of any schema; keys must not repeat. */
  def rawContents(map: StateMap): Map[Seq[Byte], (Seq[Byte], Long)] = {
    val seq = map.getAll().map { e =>
      e.key.getBytes.toSeq -> (if (e.state == null) null else e.state.getBytes.toSeq, e.updateTime)
    }.toSeq
    val result = seq.toMap
    assert(result.size == seq.size, "a key was returned twice")
    result
  }

  /**
   * Checks everything a map can be asked against a reference: all entries, get and contains
   * for every key of `universe` (present or not), size, and getByTime at thresholds from 0 to
   * `maxTime + 1`, every one while that is cheap, then a spread that includes the ends.
   */
  def assertMap[K, S](
      map: StateMap,
      keys: RowCodec[K],
      states: RowCodec[S],
      ref: Map[K, (S, Long)],
      universe: Iterable[K],
      maxTime: Long): Unit = {
    assert(contents(map, keys, states) === ref)
    assert(map.size === ref.size)
    for (key <- universe ++ ref.keys) {
      val row = map.get(keys(key))
      ref.get(key) match {
        case Some((state, _)) =>
          assert(row !== null, s"key $key is missing")
          assert(states.decode(row) === state, s"key $key")
          assert(map.contains(keys(key)))
        case None =>
          assert(row === null, s"key $key should be absent")
          assert(!map.contains(keys(key)))
      }
    }
    val step = math.max(1L, (maxTime + 2) / 97)
    val thresholds = ((0L to maxTime + 1 by step) ++ Seq(maxTime, maxTime + 1) ++
      ref.values.take(20).flatMap { case (_, t) => Seq(t, t + 1) }).distinct
    for (t <- thresholds) {
      val expected = ref.filter { case (_, (_, updateTime)) => updateTime < t }
      assert(decode(map.getByTime(t), keys, states) === expected, s"getByTime($t)")
    }
  }

  def writeSnapshot(map: StateMap): Array[Byte] = {
    val bytes = new ByteArrayOutputStream()
    StateMapSerde.writeSnapshot(map, new DataOutputStream(bytes))
    bytes.toByteArray
  }

  def writeDelta(map: DeltaChainStateMap): Array[Byte] = {
    val bytes = new ByteArrayOutputStream()
    StateMapSerde.writeDelta(map, new DataOutputStream(bytes))
    bytes.toByteArray
  }

  def readSnapshot(
      bytes: Array[Byte],
      keyNumFields: Int,
      stateNumFields: Int,
      deltaChainThreshold: Int = StateMap.DefaultDeltaChainThreshold): DeltaChainStateMap =
    StateMapSerde.readSnapshot(new DataInputStream(new ByteArrayInputStream(bytes)),
      keyNumFields, stateNumFields, deltaChainThreshold)

  def readDelta(bytes: Array[Byte], parent: DeltaChainStateMap): DeltaChainStateMap =
    StateMapSerde.readDelta(new DataInputStream(new ByteArrayInputStream(bytes)), parent)
}
