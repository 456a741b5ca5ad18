package io.mapwithstate.state

import org.apache.spark.sql.catalyst.expressions.{
  GenericInternalRow,
  JoinedRow,
  SpecificInternalRow,
  UnsafeRow
}
import org.apache.spark.sql.execution.streaming.state.StateStore
import org.apache.spark.sql.types.{LongType, StructType}

/**
 * A [[StateMap]] over a Spark [[StateStore]] (Spark's RocksDB store: state on the executor's
 * local disk, see [[StateBackend.RocksDB]]). The StateStore API has one value row per key and
 * no update times, so the store's value is the state's fields followed by the update time, a
 * BIGINT ([[StoreBackedStateMap.valueSchema]]); this map splits and joins them.
 *
 * Reads go to the store on every call: nothing is cached on the heap, which is the point of
 * the backend, but for the last key read (a record's get, then its put, reads the key once).
 * Once told the operator has timeouts ([[prepareExpiry]]), the map keeps a
 * [[StoreExpiryIndex]] in a column family of the same store — an entry at or before each
 * key's time, written when a key gets a time or an earlier one — and [[expiring]] (idle
 * timeouts and `timeout_at` timers, whose time takes the update time's place) reads only the
 * entries that fall due; without it, [[expiring]] scans.
 * The map counts its keys itself ([[StoreKeyCount]], written by [[flush]] before a commit)
 * rather than have Spark's store read every key again before writing it.
 * Rows handed out are copies, so they stay valid however the store changes. The store takes
 * this map's writes directly; versions are the store's (a commit or abort by the operator).
 *
 * A key that holds only a timer (see [[StateMap]]) is a value of null state fields whose time
 * is the timer with bit 62 flipped ([[StoreBackedStateMap.encodeTime]]). The value schema has
 * no column to spare for it, and adding one would make every existing RocksDB checkpoint's
 * schema incompatible; a timer within [[StateMap.MaxTimerMagnitude]] has its two top bits
 * equal, so a flipped one (and no other time) has them differ.
 *
 * @param store     the store of the version being made, or a task-local one, opened with
 *                  column families (the index's)
 * @param keySchema the state's key columns
 * @param stateType the state's fields (the store's value without its last column)
 */
final class StoreBackedStateMap(
    store: StateStore,
    keySchema: StructType,
    stateType: StructType) extends StateMap {

  override val keyNumFields: Int = keySchema.length
  override val stateNumFields: Int = stateType.length

  private val toState = FieldProjections.of(stateType.map(_.dataType))
  private val toValue =
    FieldProjections.of(StoreBackedStateMap.valueSchema(stateType).map(_.dataType))
  private val time = new SpecificInternalRow(Seq(LongType))
  private val joined = new JoinedRow()

  /** The state fields of a key that holds only a timer. */
  private val noState = new GenericInternalRow(stateType.length)

  private val index = new StoreExpiryIndex(store, keySchema)

  /** Whether this map keeps the index ([[prepareExpiry]] was called). */
  private var indexed = false

  /** Whether a write without the index has marked it incomplete yet. */
  private var indexDropped = false

  private val count = new StoreKeyCount(store)
  private val storedCount = count.stored

  /** The keys of the version the store was opened at; counted once where it has no count. */
  private val committedKeys: Long = storedCount.getOrElse {
    val all = store.iterator()
    try all.size.toLong
    finally all.close()
  }

  /** Keys this version added less those it removed. */
  private var addedKeys = 0L

  // The last key read or written, whether the store has it then, and its time (NoTime: none,
  // or no state): what a write needs to count the key and move its index entry, without
  // reading the key again.
  private var lastKey: UnsafeRow = null
  private var lastExists = false
  private var lastTime: Long = StateMap.NoTime

  private def remember(key: UnsafeRow, exists: Boolean, t: Long): Unit = {
    if (lastKey == null) lastKey = key.copy() else lastKey.copyFrom(key)
    lastExists = exists
    lastTime = t
  }

  private def read(key: UnsafeRow): UnsafeRow = {
    val value = store.get(key)
    remember(key, value != null,
      if (value == null) StateMap.NoTime else StoreBackedStateMap.decodeTime(storedTime(value)))
    value
  }

  /** Makes `key` the last key (a read, unless it already is). */
  private def recall(key: UnsafeRow): Unit = if (lastKey == null || lastKey != key) read(key)

  override def get(key: UnsafeRow): UnsafeRow = {
    val value = read(key)
    if (value == null || hasNoState(value)) null else toState(value).copy()
  }

  override def contains(key: UnsafeRow): Boolean = read(key) != null

  override def getTime(key: UnsafeRow): Long = { recall(key); lastTime }

  override def put(key: UnsafeRow, state: UnsafeRow, updateTime: Long): Unit = {
    val kept = StateMap.clampTimer(updateTime)
    if (state == null) require(kept != StateMap.NoTime, "a key without a state must hold a timer")
    recall(key)
    if (!lastExists) addedKeys += 1
    if (indexed) {
      // The index needs an entry at this time or earlier ([[StoreExpiryIndex]]): a key's
      // entry stays when its time moves later (an idle timeout's update time always does).
      val before = if (lastExists) lastTime else StateMap.NoTime
      if (kept != StateMap.NoTime && (before == StateMap.NoTime || kept < before)) {
        index.add(kept, key)
      }
    } else dropIndex()
    if (state == null) {
      time.setLong(0, StoreBackedStateMap.encodeTime(kept))
      store.put(key, toValue(joined(noState, time)))
    } else {
      time.setLong(0, kept)
      store.put(key, toValue(joined(state, time)))
    }
    remember(key, exists = true, kept)
  }

  override def remove(key: UnsafeRow): Unit = {
    recall(key)
    if (lastExists) addedKeys -= 1
    if (!indexed) dropIndex() // an indexed key's entry goes when it falls due
    store.remove(key)
    remember(key, exists = false, StateMap.NoTime)
  }

  /**
   * Rewrites every value of the store, which the version it was opened at holds in an older
   * state type (`conversion.storedStateType`, a restart with a changed state schema), as a
   * value of this map's state type: each key keeps its time, a key holding only a timer keeps
   * it, and a key whose conversion gives no state is removed. Reads the stored bytes as rows
   * of the older type; called before anything else reads or writes the map.
   */
  def convertStored(conversion: StoredStateConversion): Unit = {
    val storedFields = conversion.storedStateType.length
    val stored = new UnsafeRow(storedFields + 1)
    val storedState = FieldProjections.of(conversion.storedStateType.map(_.dataType))
    val convert = conversion.converter()
    val all = store.iterator()
    try all.foreach { pair =>
        val value = pair.value
        stored.pointTo(value.getBaseObject, value.getBaseOffset, value.getSizeInBytes)
        val storedTime = stored.getLong(storedFields)
        val key = pair.key.copy()
        val state =
          if (StoreBackedStateMap.marksNoState(storedTime)) noState
          else convert(key, storedState(stored))
        if (state == null) {
          store.remove(key)
          addedKeys -= 1
        } else {
          time.setLong(0, storedTime)
          store.put(key, toValue(joined(state, time)))
        }
      }
    finally all.close()
    lastKey = null
  }

  /** The keys of the version being written: the committed count, plus this version's. */
  def keyCount: Long = committedKeys + addedKeys

  /** Writes the key count into the version (when it changed, or the store had none). */
  override def flush(): Unit =
    if (addedKeys != 0 || storedCount.isEmpty) count.write(keyCount)

  /** A write the index does not follow makes it incomplete (once per version). */
  private def dropIndex(): Unit = if (!indexDropped) {
    indexDropped = true
    index.markIncomplete()
  }

  /**
   * Keeps the index from now on; an incomplete one (a new store, or one written without it)
   * is rebuilt first with one scan of the state — nothing to scan in a new store.
   */
  override def prepareExpiry(): Unit = if (!indexed) {
    if (!index.isComplete) index.rebuild(entries())
    indexed = true
  }

  /**
   * The keys whose time is before `threshold`, found from the index's entries before it: each
   * entry's key is read, and an entry that is not at the key's time (the key moved later, lost
   * its time or is gone) is moved to the key's time or dropped, so the next round reads it
   * only when it is due. A key with several entries is returned once.
   */
  override def expiring(threshold: Long): Iterator[StateEntry] =
    if (!indexed) super.expiring(threshold)
    else {
      val seen = new java.util.HashSet[UnsafeRow]()
      index.due(threshold).iterator.flatMap { case (key, indexedAt) =>
        val value = store.get(key)
        val t =
          if (value == null) StateMap.NoTime else StoreBackedStateMap.decodeTime(storedTime(value))
        if (t != indexedAt) {
          index.remove(indexedAt, key)
          index.add(t, key)
        }
        if (t == StateMap.NoTime || t >= threshold || !seen.add(key)) None
        else Some(StateEntry(key, if (hasNoState(value)) null else toState(value).copy(), t))
      }
    }

  override def getByTime(threshUpdatedTime: Long): Iterator[StateEntry] =
    entries().filter(_.updateTime < threshUpdatedTime)

  override def getAll(): Iterator[StateEntry] = entries()

  private lazy val storedEntry = new StoreBackedStateMap.StoredEntries(stateType)

  /** Every entry, copied out of the store's iterator (which reuses its rows). */
  private def entries(): Iterator[StateEntry] =
    store.iterator().map(pair => storedEntry(pair.key, pair.value))

  private def storedTime(value: UnsafeRow): Long = value.getLong(stateNumFields)

  private def hasNoState(value: UnsafeRow): Boolean =
    StoreBackedStateMap.marksNoState(storedTime(value))

  override def size: Int = keyCount.toInt

  /**
   * Nothing on the heap: the store's native memory (bounded by Spark's RocksDB settings) is in
   * its metrics once a version is committed, which the streaming operator reports.
   */
  override def memoryUsedBytes: Long = 0L

  override def toString: String = s"StoreBackedStateMap[$store]"
}

object StoreBackedStateMap {

  /** The store's value column holding the update time, after the state's fields. */
  val UpdateTimeColumn = "__mapwithstate_update_time"

  /** The store's value: the state's fields, then the update time (micros). */
  def valueSchema(stateType: StructType): StructType =
    stateType.add(UpdateTimeColumn, LongType, nullable = false)

  private val NoStateBit = 1L << 62

  /** The stored time of a key holding only `timer` (clamped, not [[StateMap.NoTime]]). */
  def encodeTime(timer: Long): Long = timer ^ NoStateBit

  /** Whether a stored time is that of a key holding only a timer: its two top bits differ. */
  def marksNoState(stored: Long): Boolean =
    stored != StateMap.NoTime && ((stored ^ (stored << 1)) < 0)

  /** The key's time (its timer, or update time) from a stored time. */
  def decodeTime(stored: Long): Long = if (marksNoState(stored)) stored ^ NoStateBit else stored

  /**
   * The entries of a store's key and value rows, for a state of `stateType`: the state (null
   * for a key holding only a timer) and the key's time, both copied out of the rows (a store's
   * iterator reuses them). What the map reads, and what the state reader reads of a store it
   * opens read-only or of a changelog.
   */
  final class StoredEntries(stateType: StructType) {
    private val stateFields = stateType.length
    private val toState = FieldProjections.of(stateType.map(_.dataType))

    def apply(key: UnsafeRow, value: UnsafeRow): StateEntry = {
      val stored = value.getLong(stateFields)
      val state = if (marksNoState(stored)) null else toState(value).copy()
      StateEntry(key.copy(), state, decodeTime(stored))
    }
  }
}
