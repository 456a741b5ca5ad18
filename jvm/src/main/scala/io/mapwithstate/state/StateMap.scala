package io.mapwithstate.state

import org.apache.spark.sql.catalyst.expressions.UnsafeRow

/**
 * The keyed state of one mapWithState partition: for each key (an UnsafeRow of the grouping
 * columns) its state (an UnsafeRow of the state schema) and the time it was last updated, which
 * is what timeouts are measured from.
 *
 * With `timeout_at` timers the time is the key's timer, and a key may hold a timer without a
 * state, as Spark's GroupState allows (a function that removes the state but sets a timeout,
 * or sets one before any state): [[get]] gives null for such a key, [[getTime]] its timer, and
 * entries carry a null state. They are keys of the map all the same: [[contains]], [[size]],
 * scans and the checkpoint files include them, as Spark's store keeps their rows (and counts
 * them in `numTotalStateRows`).
 *
 * A map is the state of one version being made: the version before it stays with the store
 * (a versioned map, [[DeltaChainStateMap]], keeps it through copies; a store-backed one,
 * [[StoreBackedStateMap]], in the store's own versions).
 *
 * Rows passed in are copied, so callers may reuse their projection buffers. Rows handed out are
 * read-only views of the map's bytes; copy one before writing to it. They stay valid however
 * the map changes later, with one exception: [[putInPlace]] of a key may overwrite the bytes
 * that views of that key's state (the one it had just before) point at.
 *
 * Not thread-safe.
 */
abstract class StateMap {

  /** Number of fields of every key row. */
  def keyNumFields: Int

  /** Number of fields of every state row. */
  def stateNumFields: Int

  /** The state of a key, or null if it has none (it is not in the map, or holds only a timer). */
  def get(key: UnsafeRow): UnsafeRow

  /**
   * [[get]] for a caller that already has the key's hash (`UnsafeRow.hashCode`, as it gave it
   * to [[prefetch]]): a map that hashes keys itself need not hash this one again.
   */
  def get(key: UnsafeRow, keyHash: Int): UnsafeRow = get(key)

  /** Whether the map holds the key: with a state, or with only a timer. */
  def contains(key: UnsafeRow): Boolean

  /**
   * Adds or replaces the state of a key. A null `state` keeps the key with only its time, which
   * must then be a timer (not [[StateMap.NoTime]]): a key with neither is removed instead.
   */
  def put(key: UnsafeRow, state: UnsafeRow, updateTime: Long): Unit

  /**
   * [[put]] for a caller that is done with the key's current state: the map may write the new
   * state over the old one's bytes, so a row handed out for the key's current state may show
   * the new state afterwards. Rows of other keys, and of earlier versions' states, are not
   * affected. A read-modify-write of one key (get, compute, putInPlace) saves a new record and
   * the later reclamation of the old one this way; `state` may be the row `get` returned.
   */
  def putInPlace(key: UnsafeRow, state: UnsafeRow, updateTime: Long): Unit =
    put(key, state, updateTime)

  def remove(key: UnsafeRow): Unit

  /**
   * Whether [[prefetch]] does anything: whether lookups of a large map wait on memory that
   * reading it ahead, several keys at a time, can bring in together.
   */
  def prefetches: Boolean = false

  /**
   * Reads ahead what lookups of these keys will touch, given their hashes (`UnsafeRow.hashCode`
   * of each key): a hint, with no effect on the contents.
   */
  def prefetch(keyHashes: Array[Int], count: Int): Unit = ()

  /** Every key whose state was last updated strictly before `threshUpdatedTime`. */
  def getByTime(threshUpdatedTime: Long): Iterator[StateEntry]

  def getAll(): Iterator[StateEntry]

  /**
   * The time of a key (its update time, or with timers its timer), or [[StateMap.NoTime]] if
   * it has no state or no time.
   */
  def getTime(key: UnsafeRow): Long

  /**
   * Every key whose time is strictly before `threshold`, leaving out keys whose time is
   * [[StateMap.NoTime]] (keys without a timer): the keys a batch times out. The same keys as
   * [[getByTime]], but a map may find them through an index rather than a scan. The keys are
   * collected when this is called, so the caller may put or remove each key it is given; a key
   * put again with a time before `threshold` is not given a second time.
   */
  def expiring(threshold: Long): Iterator[StateEntry] =
    expiringByScan(threshold)

  /**
   * Tells the map that [[expiring]] will be asked for (the operator has timeouts or timers): a
   * map whose index is kept in its store starts keeping it ([[StoreBackedStateMap]]). Maps
   * without an index, or that build theirs only once a key can be due
   * ([[DeltaChainStateMap]]), ignore it.
   */
  def prepareExpiry(): Unit = ()

  private def expiringByScan(threshold: Long): Iterator[StateEntry] =
    getByTime(threshold).filter(_.updateTime != StateMap.NoTime).map { e =>
      StateEntry(e.key.copy(), if (e.state == null) null else e.state.copy(), e.updateTime)
    }.toArray.iterator

  /** Number of keys held: with a state, or with only a timer. */
  def size: Int

  /**
   * Writes into the store what the map keeps aside while a version is written (the key count
   * of [[StoreBackedStateMap]]); an operator calls it before committing the store.
   */
  def flush(): Unit = ()

  /** Bytes of heap this map holds (its own layers and those it shares with earlier versions). */
  def memoryUsedBytes: Long

  /**
   * Hands `visitor` every key with its state and time, as [[getAll]] gives them; returns how
   * many. A map that holds its records as bytes hands them over where they lie.
   */
  private[state] def visitEntries(visitor: StateRecordVisitor): Int = {
    val entries = getAll()
    var visited = 0
    while (entries.hasNext) {
      val entry = entries.next()
      val key = entry.key
      val state = entry.state
      if (state == null) {
        visitor.live(key.getBaseObject, key.getBaseOffset, key.getSizeInBytes,
          null, 0L, 0, entry.updateTime)
      } else {
        visitor.live(key.getBaseObject, key.getBaseOffset, key.getSizeInBytes,
          state.getBaseObject, state.getBaseOffset, state.getSizeInBytes, entry.updateTime)
      }
      visited += 1
    }
    visited
  }

  def toDebugString: String = toString
}

/**
 * One key of a [[StateMap]] with its state and update time (with `timeout_at` timers, the
 * key's timer instead: the map holds one time per key, whose meaning the operator's timeout
 * policy gives; [[StateMap.NoTime]] means none). The state is null for a key that holds only a
 * timer. The rows are views of the map's bytes (see [[StateMap]]); equality compares their bytes.
 */
final case class StateEntry(key: UnsafeRow, state: UnsafeRow, updateTime: Long)

object StateMap {

  /** How many layers a map's delta chain may grow to before a copy compacts it. */
  val DefaultDeltaChainThreshold: Int = 20

  /** The time of a key that has none: a key without a timer. */
  val NoTime: Long = Long.MinValue

  /**
   * Timers are kept within this many microseconds of the epoch (about 146,000 years either
   * way; a later or earlier `timeout_at` is clamped to it). TIMESTAMP values Spark makes from
   * dates stay far inside; the room outside lets a store without a slot of its own for "no
   * state" mark such keys in the time itself (see [[StoreBackedStateMap]]).
   */
  val MaxTimerMagnitude: Long = (1L << 62) - 1

  /** A `timeout_at` value as the map keeps it (see [[MaxTimerMagnitude]]). */
  def clampTimer(timer: Long): Long =
    if (timer == NoTime) NoTime
    else math.max(-MaxTimerMagnitude, math.min(MaxTimerMagnitude, timer))

  /** A new, empty, writable state map. */
  def empty(
      keyNumFields: Int,
      stateNumFields: Int,
      deltaChainThreshold: Int = DefaultDeltaChainThreshold): DeltaChainStateMap =
    new DeltaChainStateMap(keyNumFields, stateNumFields, deltaChainThreshold)
}
