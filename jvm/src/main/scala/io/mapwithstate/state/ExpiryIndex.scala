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
 * from them with one pass the first time a loaded map is asked for expiring keys at a threshold
 * some key may be due at (past the map's `earliestTime`; before that no index is kept at all); a
 * copy of the map takes the index over, so a stream pays that pass once per load, not once per
 * batch.
 *
 * Memory per entry: 8 bytes of time and a 4-byte reference in the heap arrays, plus the key's
 * own byte array (16 bytes of header and the key bytes, rounded up to 8).
 *
 * The heap arrays are chunked: up to [[ExpiryIndex.ChunkEntries]] entries one pair of arrays
 * doubles as usual; beyond, the index adds chunks of that size and never copies. A doubling of
 * a 250k-entry index was a 6 MB copy into arrays large enough for G1 to allocate them outside
 * its regions (humongous), each such allocation starting a collection cycle: one slow batch in
 * a stream every time a large state's index crossed a power of two.
 */
private[state] final class ExpiryIndex {
  import ExpiryIndex._

  // Chunk i holds entries [i * ChunkEntries, (i + 1) * ChunkEntries); only chunk 0 may be
  // shorter, while it is the only one.
  private var timeChunks = Array(new Array[Long](InitialCapacity))
  private var keyChunks = Array(new Array[Array[Byte]](InitialCapacity))
  private var capacity = InitialCapacity
  private var count = 0
  private var keyArrayBytes = 0L

  @inline private def time(i: Int): Long = timeChunks(i >>> ChunkBits)(i & ChunkMask)

  @inline private def key(i: Int): Array[Byte] = keyChunks(i >>> ChunkBits)(i & ChunkMask)

  @inline private def set(i: Int, time: Long, key: Array[Byte]): Unit = {
    timeChunks(i >>> ChunkBits)(i & ChunkMask) = time
    keyChunks(i >>> ChunkBits)(i & ChunkMask) = key
  }

  /** Room for one more entry: chunk 0 doubles up to a chunk's size, then chunks are added. */
  private def grow(): Unit = {
    if (capacity < ChunkEntries) {
      val larger = math.min(capacity * 2, ChunkEntries)
      timeChunks(0) = java.util.Arrays.copyOf(timeChunks(0), larger)
      keyChunks(0) = java.util.Arrays.copyOf(keyChunks(0), larger)
      capacity = larger
    } else {
      timeChunks = java.util.Arrays.copyOf(timeChunks, timeChunks.length + 1)
      keyChunks = java.util.Arrays.copyOf(keyChunks, keyChunks.length + 1)
      timeChunks(timeChunks.length - 1) = new Array[Long](ChunkEntries)
      keyChunks(keyChunks.length - 1) = new Array[Array[Byte]](ChunkEntries)
      capacity += ChunkEntries
    }
  }

  /** Entries held, stale ones included. */
  def size: Int = count

  /** Approximate heap bytes held by the index. */
  def footprintBytes: Long = capacity * 12L + keyArrayBytes

  /**
   * Adds an entry for a key (its bytes are copied) with this time; keys without one are left
   * out.
   */
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
    while (count > 0 && time(0) < threshold) {
      val dueTime = time(0)
      val dueKey = key(0)
      pop()
      if (currentTime(dueKey) == dueTime && seen.add(ByteBuffer.wrap(dueKey))) {
        dueTimes += dueTime
        dueKeys += dueKey
      }
    }
    val result = (dueTimes.result(), dueKeys.result())
    var i = 0
    while (i < result._1.length) { push(result._1(i), result._2(i)); i += 1 }
    result
  }

  private def push(newTime: Long, newKey: Array[Byte]): Unit = {
    if (count == capacity) grow()
    keyArrayBytes += ExpiryIndex.arrayBytes(newKey)
    var i = count
    count += 1
    while (i > 0 && time((i - 1) >>> 1) > newTime) {
      val parent = (i - 1) >>> 1
      set(i, time(parent), key(parent))
      i = parent
    }
    set(i, newTime, newKey)
  }

  private def pop(): Unit = {
    keyArrayBytes -= ExpiryIndex.arrayBytes(key(0))
    count -= 1
    val lastTime = time(count)
    val lastKey = key(count)
    set(count, 0L, null)
    if (count == 0) return
    var i = 0
    var done = false
    while (!done) {
      val left = 2 * i + 1
      if (left >= count) {
        done = true
      } else {
        val child = if (left + 1 < count && time(left + 1) < time(left)) left + 1 else left
        if (time(child) < lastTime) {
          set(i, time(child), key(child))
          i = child
        } else {
          done = true
        }
      }
    }
    set(i, lastTime, lastKey)
  }
}

private[state] object ExpiryIndex {
  val InitialCapacity = 64

  /** Entries per chunk: 256 KB of times and 128 KB of references, well under a G1 region. */
  private[state] val ChunkBits = 15
  private[state] val ChunkEntries: Int = 1 << ChunkBits
  private val ChunkMask = ChunkEntries - 1

  /** A byte array's heap size: a 16-byte header, then its bytes rounded up to 8. */
  def arrayBytes(a: Array[Byte]): Long = 16L + ((a.length + 7) & ~7)
}
