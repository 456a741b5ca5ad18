package io.mapwithstate.state

import java.nio.ByteBuffer

import org.apache.spark.unsafe.Platform

/**
 * The expiry index of a writable [[DeltaChainStateMap]]: its keys ordered by their time (the
 * update time for idle timeouts, the timer for `timeout_at`), so that a batch finds the keys
 * that expire in O(expired · log n) instead of scanning the whole state, as Spark's
 * FlatMapGroupsWithStateExec does on every batch and DStream's mapWithState on every
 * checkpoint.
 *
 * It is a binary min-heap of (time, key bytes) with lazy deletion: every put of a key adds an
 * entry and nothing is ever removed on a write, so an entry may be stale (its key since
 * removed, or put again with another time). [[due]] checks each entry it pops against the map
 * and drops the stale ones. Stale entries are bounded by the map, which drops its index when
 * they outnumber the live keys and rebuilds it on the next lookup (an O(state) pass amortized
 * over at least as many writes).
 *
 * The index is not checkpointed: the map files hold every key's time, and the index is rebuilt
 * from them with one pass the first time a loaded map is asked for expiring keys; a copy of the
 * map takes the index over, so a stream pays that pass once per load, not once per batch.
 *
 * Memory per entry: 8 bytes of time and a 4-byte reference in the heap arrays, plus the key's
 * own byte array (16 bytes of header and the key bytes, rounded up to 8).
 */
private[state] final class ExpiryIndex {
  private var times = new Array[Long](ExpiryIndex.InitialCapacity)
  private var keys = new Array[Array[Byte]](ExpiryIndex.InitialCapacity)
  private var count = 0
  private var keyArrayBytes = 0L

  /** Entries held, stale ones included. */
  def size: Int = count

  /** Approximate heap bytes held by the index. */
  def footprintBytes: Long = times.length * 12L + keyArrayBytes

  /** Adds an entry for a key (its bytes are copied) with this time; keys without one are left out. */
  def add(time: Long, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Unit = {
    if (time == StateMap.NoTime) return
    val bytes = new Array[Byte](keyLength)
    Platform.copyMemory(keyBase, keyOffset, bytes, Platform.BYTE_ARRAY_OFFSET, keyLength)
    push(time, bytes)
  }

  /**
   * The keys whose entries have a time strictly before `threshold` and still match the map
   * (`currentTime` gives a key's time in the map, or [[StateMap.NoTime]]), each once, in time
   * order. Stale entries popped on the way are dropped; the due ones are kept in the index,
   * so that asking twice gives the same keys.
   */
  def due(threshold: Long, currentTime: Array[Byte] => Long): (Array[Long], Array[Array[Byte]]) = {
    val dueTimes = Array.newBuilder[Long]
    val dueKeys = Array.newBuilder[Array[Byte]]
    val seen = new java.util.HashSet[ByteBuffer]()
    while (count > 0 && times(0) < threshold) {
      val time = times(0)
      val key = keys(0)
      pop()
      if (currentTime(key) == time && seen.add(ByteBuffer.wrap(key))) {
        dueTimes += time
        dueKeys += key
      }
    }
    val result = (dueTimes.result(), dueKeys.result())
    var i = 0
    while (i < result._1.length) { push(result._1(i), result._2(i)); i += 1 }
    result
  }

  private def push(time: Long, key: Array[Byte]): Unit = {
    if (count == times.length) {
      times = java.util.Arrays.copyOf(times, count * 2)
      keys = java.util.Arrays.copyOf(keys, count * 2)
    }
    keyArrayBytes += ExpiryIndex.arrayBytes(key)
    var i = count
    count += 1
    while (i > 0 && times((i - 1) >>> 1) > time) {
      val parent = (i - 1) >>> 1
      times(i) = times(parent)
      keys(i) = keys(parent)
      i = parent
    }
    times(i) = time
    keys(i) = key
  }

  private def pop(): Unit = {
    keyArrayBytes -= ExpiryIndex.arrayBytes(keys(0))
    count -= 1
    val time = times(count)
    val key = keys(count)
    keys(count) = null
    if (count == 0) return
    var i = 0
    var done = false
    while (!done) {
      val left = 2 * i + 1
      if (left >= count) {
        done = true
      } else {
        val child = if (left + 1 < count && times(left + 1) < times(left)) left + 1 else left
        if (times(child) < time) {
          times(i) = times(child)
          keys(i) = keys(child)
          i = child
        } else {
          done = true
        }
      }
    }
    times(i) = time
    keys(i) = key
  }
}

private[state] object ExpiryIndex {
  val InitialCapacity = 64

  /** A byte array's heap size: a 16-byte header, then its bytes rounded up to 8. */
  def arrayBytes(a: Array[Byte]): Long = 16L + ((a.length + 7) & ~7)
}
