package io.mapwithstate.state

import java.util.ConcurrentModificationException

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.array.ByteArrayMethods
import org.apache.spark.unsafe.hash.Murmur3_x86_32

/**
 * The [[StateMap]] of mapWithState: a chain of [[RowHashMap]] layers, where each layer holds the
 * writes made after the map below it was copied, as in Spark's `OpenHashMapBasedStateMap`.
 *
 * A copy is O(1): it freezes this map and stacks an empty layer on top of it, so one batch costs
 * memory for the keys it touched, not for the whole state, and the state of the previous batch
 * stays intact. A lookup walks down from the top layer and the first layer that holds the key
 * decides. A remove writes a tombstone only when a lower layer has the key; otherwise the key
 * is simply dropped, which keeps both the chain and its serialized deltas free of tombstones for
 * keys that were added and removed within one batch.
 *
 * Since every lookup and scan pays for each layer, a copy of a map whose chain has reached
 * `deltaChainThreshold` layers above its base first compacts the chain into a single base layer
 * (O(size)), and puts the new empty layer over that. The top layer therefore always holds
 * exactly the writes made since the last copy, which is what [[StateMapSerde.writeDelta]]
 * persists.
 *
 * A key that holds only a timer (see [[StateMap]]) is a live record with no state bytes.
 *
 * Keys are compared by their bytes, so keys must be produced by the same UnsafeProjection (as
 * Spark's state stores also require). Not thread-safe.
 */
final class DeltaChainStateMap private (
    override val keyNumFields: Int,
    override val stateNumFields: Int,
    val deltaChainThreshold: Int,
    private val parent: DeltaChainStateMap,
    expectedEntries: Int,
    expectedRecordBytes: Long,
    sharedLayer: RowHashMap)
  extends StateMap {
  import DeltaChainStateMap._

  /** A new empty map. */
  def this(keyNumFields: Int, stateNumFields: Int, deltaChainThreshold: Int) =
    this(keyNumFields, stateNumFields, deltaChainThreshold, null,
      DeltaChainStateMap.NewLayerEntries, DeltaChainStateMap.NewLayerEntries * 32L, null)

  def this(keyNumFields: Int, stateNumFields: Int) =
    this(keyNumFields, stateNumFields, StateMap.DefaultDeltaChainThreshold)

  require(keyNumFields >= 0, s"keyNumFields must not be negative, got $keyNumFields")
  require(stateNumFields >= 0, s"stateNumFields must not be negative, got $stateNumFields")
  require(deltaChainThreshold >= 1,
    s"deltaChainThreshold must be at least 1, got $deltaChainThreshold")

  /** This map's own writes; a [[rebased]] node shares the layer of the node it stands for. */
  private[state] val layer =
    if (sharedLayer != null) sharedLayer
    else new RowHashMap(
      RowHashMap.capacityFor(expectedEntries), RowHashMap.pageSizeFor(expectedRecordBytes))

  /** Number of layers below this one: 0 for a base layer. */
  val deltaChainLength: Int = if (parent == null) 0 else parent.deltaChainLength + 1

  private var liveKeys: Int = if (parent == null) 0 else parent.size
  // Scratch of [[prefetch]]: the group's slot words, the keys still to read ahead for (their
  // indexes in the group), and a sum of what it read.
  private var prefetchWords = new Array[Long](0)
  private var prefetchKeys = new Array[Int](0)
  private var prefetched = 0L

  /** Set once this map has been copied: its layer is then shared and must not change. */
  private var readOnly = false

  /**
   * The keys by time, for [[expiring]]: built on first need (a threshold past
   * [[earliestTime]]), kept up to date by every put while the map is writable, handed over to
   * the copy, and dropped when stale entries pile up.
   */
  private var index: ExpiryIndex = null

  override def size: Int = liveKeys

  /**
   * Whether the next [[copy]] compacts the chain: when it has reached the threshold, as Spark's
   * map does, or earlier when its layers hold more than twice the live keys. Under full churn
   * every layer holds every key, and a chain of 20 would hold 20 copies of the state; compacting
   * once the chain doubles the live state bounds memory to about three times the state, at an
   * amortized cost of one pass over the keys written since the last compaction.
   */
  def shouldCompact: Boolean =
    deltaChainLength >= deltaChainThreshold || (deltaChainLength > 0 && overEarlyLimit(0L))

  /**
   * Whether one more layer the size of this map's top one would make the copy after it compact
   * early: a committed map for which this holds is compacted in the background a batch ahead
   * (see `DeltaChainStateStoreProvider`), so that neither that copy nor the next pays for it
   * in a task. Under full churn the chain reaches the early limit every two or three batches.
   */
  def compactsEarlyNext: Boolean = deltaChainLength > 0 && overEarlyLimit(layer.usedSlotCount)

  private def overEarlyLimit(moreEntries: Long): Boolean =
    chainEntries + moreEntries > 2L * size + DeltaChainStateMap.MinEntriesToCompactEarly

  override def prefetches: Boolean = true

  /**
   * Reads, for each key of a group, the slot word its probe starts at in every layer, then the
   * record that word points at: two cache misses per key over a large layer, which issued one
   * record at a time wait one after the other, and issued for the group back to back (two
   * tight loops of independent loads) wait together. A key whose slot word in a layer carries
   * its hash's tag is most likely there, where its lookup will stop, so the layers below are
   * not read for it: under full churn the chain is often two full layers over the base, and
   * reading the base too was two wasted misses per key. What is read goes into a field, so
   * that the compiler keeps the loads.
   */
  override def prefetch(keyHashes: Array[Int], count: Int): Unit = {
    if (prefetchWords.length < count) {
      prefetchWords = new Array[Long](count)
      prefetchKeys = new Array[Int](count)
    }
    var read = prefetched
    var left = count
    var i = 0
    while (i < count) {
      prefetchKeys(i) = i
      i += 1
    }
    var map = this
    while (map != null && left > 0) {
      val layer = map.layer
      i = 0
      while (i < left) {
        prefetchWords(i) = layer.probeStartWord(keyHashes(prefetchKeys(i)))
        i += 1
      }
      // Reads the records, and keeps, in order, the keys that the layers below may hold.
      var kept = 0
      i = 0
      while (i < left) {
        val word = prefetchWords(i)
        read += layer.recordWord(word)
        val key = prefetchKeys(i)
        if (!layer.mayHold(word, keyHashes(key))) {
          prefetchKeys(kept) = key
          kept += 1
        }
        i += 1
      }
      left = kept
      map = map.parent
    }
    prefetched = read
  }

  /**
   * Also remembers what the lookup found (see [[recalled]]), so that a write of the same key
   * right after it, as in a read-modify-write of one record, costs no second lookup.
   */
  override def get(key: UnsafeRow): UnsafeRow = {
    checkKey(key)
    lookup(key, hashOf(key.getBaseObject, key.getBaseOffset, key.getSizeInBytes))
  }

  override def get(key: UnsafeRow, keyHash: Int): UnsafeRow = {
    checkKey(key)
    lookup(key, keyHash)
  }

  private def lookup(key: UnsafeRow, hash: Int): UnsafeRow = {
    val base = key.getBaseObject
    val offset = key.getBaseOffset
    val length = key.getSizeInBytes
    val probe = layer.probe(hash, base, offset, length)
    var result: UnsafeRow = null
    // Whether a lower layer has the key live: with a state, or with only a timer (no row).
    var liveBelow = false
    // Where the key's time is; read only if a timer call asks for it (getTime), since the
    // slot arrays' update times are one more cache miss per record otherwise.
    var timeLayer: RowHashMap = null
    var timeSlot = -1
    if (probe >= 0) {
      if (layer.isLive(probe)) {
        result = stateView(layer, probe)
        timeLayer = layer
        timeSlot = probe
      }
    } else {
      var map = parent
      while (map != null) {
        val slot = map.layer.find(hash, base, offset, length)
        if (slot >= 0) {
          if (map.layer.isLive(slot)) {
            result = stateView(map.layer, slot)
            timeLayer = map.layer
            timeSlot = slot
            liveBelow = true
          }
          map = null
        } else {
          map = map.parent
        }
      }
    }
    if (!readOnly) {
      remember(base, offset, length, hash, probe, inParent = liveBelow, timeLayer, timeSlot)
    }
    result
  }

  override def contains(key: UnsafeRow): Boolean = {
    checkKey(key)
    containsKeyBytes(
      hashOf(key.getBaseObject, key.getBaseOffset, key.getSizeInBytes),
      key.getBaseObject, key.getBaseOffset, key.getSizeInBytes)
  }

  override def put(key: UnsafeRow, state: UnsafeRow, updateTime: Long): Unit =
    write(key, state, updateTime, inPlace = false)

  /** Overwrites in place only the top layer's records: lower layers are read-only. */
  override def putInPlace(key: UnsafeRow, state: UnsafeRow, updateTime: Long): Unit =
    write(key, state, updateTime, inPlace = true)

  override def remove(key: UnsafeRow): Unit = {
    checkKey(key)
    checkWritable()
    locate(key)
    removeAt(lookupHash, lookupProbe,
      key.getBaseObject, key.getBaseOffset, key.getSizeInBytes, lookupInParent)
  }

  /**
   * Entries are produced top layer first, each one as it is reached, so the caller may remove
   * or re-put the key of the entry it was just given (as timeout handling does); other writes
   * during the scan may make it fail with a ConcurrentModificationException.
   */
  override def getByTime(threshUpdatedTime: Long): Iterator[StateEntry] =
    new EntryIterator(this, new ChainScan(this, threshUpdatedTime, filterByTime = true))

  /** See [[getByTime]] for what may be written while iterating. */
  override def getAll(): Iterator[StateEntry] =
    new EntryIterator(this, new ChainScan(this, 0L, filterByTime = false))

  /** A scan of the live entries by layer and slot, for writers that copy records' bytes. */
  private[state] def liveEntries(): ChainScan = new ChainScan(this, 0L, filterByTime = false)

  override def copy(): DeltaChainStateMap = {
    readOnly = true
    val base = if (shouldCompact) topLayerAlone.getOrElse(compact().freeze()) else this
    val entries = nextLayerEntries
    val next = new DeltaChainStateMap(keyNumFields, stateNumFields, deltaChainThreshold, base,
      entries, entries * 32L, null)
    // The copy has this map's contents, so this map's index is valid for it; this map, now
    // read-only, needs none (a retried batch copies it again and rebuilds one).
    next.index = index
    index = null
    next
  }

  /**
   * The keys a copy's new top layer is sized for: as many as each of the last two batches wrote
   * (the smaller count), so that a run of batches of about the same size (under full churn,
   * exactly the same) writes into a layer that needs no growing — in S2 (50k keys per partition
   * and batch) growing a layer by doubling from a few dozen slots was ~11 rehashes per batch, 4%
   * of the stateful tasks' CPU time (async-profiler). The smaller of two, not the last one
   * alone: a layer stays in the chain until it is compacted, and one large batch (a backfill, a
   * first version) must not leave the small batches after it layers sized for it.
   */
  private def nextLayerEntries: Int =
    if (parent == null) NewLayerEntries
    else math.max(NewLayerEntries, math.min(layer.usedSlotCount, parent.layer.usedSlotCount))

  /** The time the last [[get]] found when it was of this key (a timer call's get, then this). */
  override def getTime(key: UnsafeRow): Long = {
    checkKey(key)
    val base = key.getBaseObject
    val offset = key.getBaseOffset
    val length = key.getSizeInBytes
    if (recalled(base, offset, length)) {
      if (recalledTimeLayer == null) StateMap.NoTime
      else recalledTimeLayer.updateTimeAt(recalledTimeSlot)
    } else timeOfKeyBytes(hashOf(base, offset, length), base, offset, length)
  }

  /**
   * Nothing, when `threshold` is not past [[earliestTime]]: with a timeout far longer than a
   * batch interval, as is usual, no batch finds keys due, so none pays for an index. Otherwise
   * through the expiry index on a writable map (built on first need, then kept up to date by
   * every put), while a read-only map scans.
   */
  override def expiring(threshold: Long): Iterator[StateEntry] = {
    if (threshold <= earliestTime) return Iterator.empty
    if (readOnly) return super.expiring(threshold)
    if (index == null) index = buildIndex()
    val (times, keys) = index.due(threshold, bytes =>
      timeOfKeyBytes(hashOf(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length),
        bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length))
    // States are looked up as each entry is reached: the caller may have changed the keys
    // given before it, never this one. A due key may hold only a timer (a null state).
    Iterator.range(0, keys.length).flatMap { i =>
      val key = new UnsafeRow(keyNumFields)
      key.pointTo(keys(i), Platform.BYTE_ARRAY_OFFSET, keys(i).length)
      val state = get(key)
      if (state != null || contains(key)) Some(StateEntry(key, state, times(i))) else None
    }
  }

  /**
   * A lower bound of the times of this map's keys: the earliest of its layers' (see
   * [[RowHashMap.earliestTime]]), `Long.MaxValue` when no key has a time. No key is due before
   * it, so [[expiring]] needs neither its index nor a scan. An index, in turn, costs a copied
   * key and a heap entry per put (and a rebuild every two or three batches under full churn),
   * which is why it is built only once a threshold passes this bound rather than on the first
   * [[prepareExpiry]].
   */
  def earliestTime: Long = {
    var earliest = Long.MaxValue
    var map = this
    while (map != null) {
      earliest = math.min(earliest, map.layer.earliestTime)
      map = map.parent
    }
    earliest
  }

  /** Builds the expiry index now, if this writable map has none (for tests and benchmarks). */
  private[state] def buildExpiryIndex(): Unit = if (!readOnly && index == null) index = buildIndex()

  /** Heap bytes of the expiry index, when this map has one (see [[memoryUsedBytes]]). */
  def expiryIndexBytes: Long = if (index == null) 0L else index.footprintBytes

  /** One pass over the chain: every live key with a time. */
  private def buildIndex(): ExpiryIndex = {
    val built = new ExpiryIndex
    val scan = new ChainScan(this, 0L, filterByTime = false)
    while (scan.advance()) {
      val layer = scan.layer
      val slot = scan.slot
      built.add(layer.updateTimeAt(slot), layer.pageAt(slot), layer.keyOffsetAt(slot),
        layer.keyLengthAt(slot))
    }
    built
  }

  /** The time of a live key, or [[StateMap.NoTime]] if it has no state. */
  private[state] def timeOfKeyBytes(
      hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Long = {
    var map = this
    while (map != null) {
      val slot = map.layer.find(hash, keyBase, keyOffset, keyLength)
      if (slot >= 0) {
        return if (map.layer.isLive(slot)) map.layer.updateTimeAt(slot) else StateMap.NoTime
      }
      map = map.parent
    }
    StateMap.NoTime
  }

  /**
   * Calls `f` with each live or tombstone slot of this chain's layers, top layer first, down to
   * `stop` (not included; null: the whole chain), but only for keys that `target` — which `f`
   * fills — does not have yet: the first layer holding a key decides. That costs one lookup per
   * slot, where checking each entry against every layer above it (as a scan does) would cost
   * one per layer. Removed keys that no lower layer had need no marker, and are not given.
   */
  private def foreachNewestEntry(stop: DeltaChainStateMap, target: RowHashMap)(
      f: NewestEntry): Unit = {
    var map = this
    while (map ne stop) {
      val from = map.layer
      var slot = 0
      while (slot < from.slotCapacity) {
        val live = from.isLive(slot)
        if ((live || from.isTombstone(slot)) && ((map eq this) || target.find(from.hashAt(slot),
            from.pageAt(slot), from.keyOffsetAt(slot), from.keyLengthAt(slot)) < 0)) {
          f(from, slot, live)
        }
        slot += 1
      }
      map = map.parent
    }
  }

  /** A new single-layer map with the same contents, which this map does not share. */
  def compact(): DeltaChainStateMap = {
    val compacted = new DeltaChainStateMap(
      keyNumFields, stateNumFields, deltaChainThreshold, null, size, chainRecordBytes, null)
    val target = compacted.layer
    var tombstones = 0
    // Tombstones are copied too, to hide their keys from the layers below, and dropped at the
    // end (a base layer needs none).
    foreachNewestEntry(null, target) { (from, slot, live) =>
      val page = from.pageAt(slot)
      if (live) {
        target.insertLive(from.hashAt(slot), page, from.keyOffsetAt(slot), from.keyLengthAt(slot),
          page, from.stateOffsetAt(slot), from.stateLengthAt(slot),
          from.updateTimeAt(slot), shadowsParent = false)
        compacted.liveKeys += 1
      } else {
        target.insertTombstone(from.hashAt(slot), page, from.keyOffsetAt(slot),
          from.keyLengthAt(slot))
        tombstones += 1
      }
    }
    if (tombstones > 0) target.dropAllRemovedKeys()
    if (compacted.liveKeys != size) {
      throw new IllegalStateException(
        s"compacting a state map of $size keys gave ${compacted.liveKeys}:\n$toDebugString")
    }
    compacted
  }

  /**
   * A read-only compaction of this chain, to stand in for its contents below newer layers (see
   * [[rebased]]); safe to run on another thread once this map is committed and no longer
   * written, as it reads only the layers. When the layers above the base hold at most half as
   * many entries as the base (a large state with small batches), only they are merged, into
   * one layer over the same base, which the result shares: O(their entries) instead of
   * O(state). In S1 (1M keys, batches of 10k) a full compaction was a pass over every key
   * every ~15 batches, on the background thread but on one of the two cores the batches ran
   * on: the slowest batches of a run (a chain of 20 layers of a few thousand keys each, with
   * no compaction at all, had none of those spikes). When the top layer alone holds every live
   * key, as under full churn, that layer on its own (see [[topLayerAlone]]). Otherwise (the
   * upper layers rewrite much of the state) a new single-layer base, as [[compact]] makes.
   */
  def compactedChain(): DeltaChainStateMap = topLayerAlone.getOrElse {
    // The lowest layer with entries stands for the base when every layer below it is empty: a
    // query's first version is a layer over an empty one (version 0), and treating that as
    // the base made the query's first compaction copy every key.
    var bottom = this
    var map = this
    while (map != null) {
      if (map.layer.usedSlotCount > 0) bottom = map
      map = map.parent
    }
    val baseEntries = bottom.layer.usedSlotCount.toLong
    val upperEntries = chainEntries - baseEntries
    if (deltaChainLength - bottom.deltaChainLength >= 2 && 2L * upperEntries <= baseEntries) {
      mergedAbove(bottom, upperEntries.toInt).freeze()
    } else {
      compact().freeze()
    }
  }

  /**
   * This map's top layer on its own, as a read-only base, when that layer holds every live key
   * of the chain and no removed key: the layers below are then wholly shadowed, and the layer
   * itself is the compacted chain, with no record copied. Under full churn (every key written
   * each batch) every layer is such a layer, and compacting copied the whole state every time
   * the chain doubled it: in S2 (200k keys, each written once per batch) the background
   * compactions took as much CPU as 7% of the stateful tasks' (async-profiler), on the two
   * cores the batches ran on; with this, 0.2%. The layer is shared, as a
   * [[rebased]] node shares its layer; both are read-only from then on. Checking is one pass
   * over the layer's slot words, against a pass over every key for a compaction.
   */
  private def topLayerAlone: Option[DeltaChainStateMap] = {
    if (parent == null || layer.usedSlotCount != liveKeys || !layer.allUsedSlotsLive) None
    else Some(withLayerOver(null))
  }

  /** A read-only node with this map's layer (shared, not copied) and size, over `below`. */
  private def withLayerOver(below: DeltaChainStateMap): DeltaChainStateMap = {
    val node = new DeltaChainStateMap(
      keyNumFields, stateNumFields, deltaChainThreshold, below, 0, 0L, layer)
    node.liveKeys = liveKeys
    node.freeze()
  }

  /**
   * A node over `bottom` (this chain's base, or its lowest layer with entries when the ones
   * below are empty) with the contents of this chain in one layer:
   * the layers above `bottom` merged top first, as [[compact]] merges the whole chain. A key
   * the base has live keeps its shadow flag, and its removal stays a tombstone; a removal of a
   * key the base does not have hides nothing once the layers above are merged, and is dropped.
   */
  private def mergedAbove(bottom: DeltaChainStateMap, upperEntries: Int): DeltaChainStateMap = {
    val merged = new DeltaChainStateMap(keyNumFields, stateNumFields, deltaChainThreshold, bottom,
      upperEntries, chainRecordBytes - bottom.layer.recordBytes, null)
    merged.liveKeys = bottom.size
    val target = merged.layer
    val base = bottom.layer
    foreachNewestEntry(bottom, target) { (from, slot, live) =>
      val hash = from.hashAt(slot)
      val page = from.pageAt(slot)
      val keyOffset = from.keyOffsetAt(slot)
      val keyLength = from.keyLengthAt(slot)
      val baseSlot = base.find(hash, page, keyOffset, keyLength)
      val inBase = baseSlot >= 0 && base.isLive(baseSlot)
      if (live) {
        target.insertLive(hash, page, keyOffset, keyLength,
          page, from.stateOffsetAt(slot), from.stateLengthAt(slot),
          from.updateTimeAt(slot), shadowsParent = inBase)
        if (!inBase) merged.liveKeys += 1
      } else {
        // Inserted either way, to hide the key from the upper layers below this one.
        target.insertTombstone(hash, page, keyOffset, keyLength, shadowsParent = inBase)
        if (inBase) merged.liveKeys -= 1
      }
    }
    target.dropRemovedNonTombstones()
    if (merged.liveKeys != size) {
      throw new IllegalStateException(
        s"merging the upper layers of a state map of $size keys gave ${merged.liveKeys}:\n" +
          toDebugString)
    }
    merged
  }

  /**
   * This chain with `from` and everything below it replaced by `base`, which must hold exactly
   * `from`'s contents (its [[compactedChain]]), or None when `from` is not in this chain. The
   * layers above `from` are shared, not copied: a new node per layer, O(chain length). Their
   * tombstones and shadow flags stay right, since `base` has the same live keys as `from`. The
   * new top node takes over this map's expiry index and writability; this map becomes
   * read-only, so that the two never diverge.
   */
  def rebased(from: DeltaChainStateMap, base: DeltaChainStateMap): Option[DeltaChainStateMap] = {
    require(base.size == from.size && (base.parent == null || from.chainHolds(base.parent)),
      s"a rebase needs a compacted chain with ${from.size} keys, over a layer of the chain " +
        s"it replaces, got $base")
    rebasedChain(from, base).map { top =>
      if (top ne base) top.readOnly = readOnly
      top.index = index
      index = null
      readOnly = true
      top
    }
  }

  /** Whether `node` is this map or one of the layers below it. */
  private def chainHolds(node: DeltaChainStateMap): Boolean = {
    var map = this
    while (map != null && (map ne node)) map = map.parent
    map != null
  }

  private def rebasedChain(
      from: DeltaChainStateMap, base: DeltaChainStateMap): Option[DeltaChainStateMap] = {
    if (this eq from) Some(base)
    else if (parent == null) None
    else parent.rebasedChain(from, base).map(withLayerOver)
  }

  /**
   * Heap bytes held by the layers of this chain (slot arrays and record pages). Layers are
   * shared with the maps this one was copied from, so the figures of a map and its copy overlap.
   */
  override def memoryUsedBytes: Long = sumOverChain(_.footprintBytes) + expiryIndexBytes

  override def toDebugString: String = {
    val layers = Iterator.iterate(this)(_.parent).takeWhile(_ != null).map { map =>
      s"  layer ${map.deltaChainLength}: ${map.layer.usedSlotCount} of " +
        s"${map.layer.slotCapacity} slots used, ${map.layer.footprintBytes} bytes"
    }
    (s"DeltaChainStateMap($size keys, chain length $deltaChainLength)" +: layers.toSeq)
      .mkString("\n")
  }

  override def toString: String =
    s"DeltaChainStateMap($size keys, chain length $deltaChainLength)"

  private[state] def parentMap: DeltaChainStateMap = parent

  private[state] def putBytes(
      hash: Int,
      keyBase: AnyRef, keyOffset: Long, keyLength: Int,
      stateBase: AnyRef, stateOffset: Long, stateLength: Int,
      updateTime: Long): Unit = {
    checkWritable()
    forget()
    putAt(hash, layer.probe(hash, keyBase, keyOffset, keyLength), keyBase, keyOffset, keyLength,
      stateBase, stateOffset, stateLength, updateTime, UnknownInParent, inPlace = false)
  }

  /** Removes a key; returns whether it had a state. */
  private[state] def removeBytes(
      hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Boolean = {
    checkWritable()
    forget()
    removeAt(hash, layer.probe(hash, keyBase, keyOffset, keyLength),
      keyBase, keyOffset, keyLength, UnknownInParent)
  }

  private def write(key: UnsafeRow, state: UnsafeRow, updateTime: Long, inPlace: Boolean)
    : Unit = {
    checkKey(key)
    if (state == null) {
      // A key holding only a timer: a record with no state bytes, which no state row can be
      // (a row of one field or more takes at least 16 bytes).
      require(updateTime != StateMap.NoTime, "a key without a state must hold a timer")
    } else if (state.numFields != stateNumFields) {
      throw new IllegalArgumentException(
        s"state row has ${state.numFields} fields, this state map holds $stateNumFields")
    }
    checkWritable()
    locate(key)
    if (state == null) {
      putAt(lookupHash, lookupProbe, key.getBaseObject, key.getBaseOffset, key.getSizeInBytes,
        null, 0L, 0, updateTime, lookupInParent, inPlace)
    } else {
      putAt(lookupHash, lookupProbe, key.getBaseObject, key.getBaseOffset, key.getSizeInBytes,
        state.getBaseObject, state.getBaseOffset, state.getSizeInBytes, updateTime,
        lookupInParent, inPlace)
    }
  }

  /**
   * Puts a key whose top-layer [[RowHashMap.probe]] gave `probe`. `inParent` tells whether a
   * lower layer has the key live, when a lookup has already found that out.
   */
  private def putAt(
      hash: Int, probe: Int,
      keyBase: AnyRef, keyOffset: Long, keyLength: Int,
      stateBase: AnyRef, stateOffset: Long, stateLength: Int,
      updateTime: Long, inParent: Int, inPlace: Boolean): Unit = {
    if (probe >= 0) {
      if (!layer.isLive(probe)) liveKeys += 1
      if (inPlace) layer.overwriteLive(probe, stateBase, stateOffset, stateLength, updateTime)
      else layer.updateLive(probe, stateBase, stateOffset, stateLength, updateTime)
    } else {
      val shadows = isInParent(inParent, hash, keyBase, keyOffset, keyLength)
      if (!shadows) liveKeys += 1
      layer.insertLive(hash, keyBase, keyOffset, keyLength,
        stateBase, stateOffset, stateLength, updateTime, shadowsParent = shadows,
        emptySlot = -1 - probe)
    }
    if (index != null) {
      index.add(updateTime, keyBase, keyOffset, keyLength)
      // Each stale entry came with a write since the index was built or last dropped, so a
      // rebuild when they outnumber the live keys costs O(1) per write, amortized.
      if (index.size > 2L * liveKeys + MinIndexEntriesToRebuild) index = null
    }
  }

  /** Removes a key whose top-layer probe gave `probe` (see [[putAt]]). */
  private def removeAt(
      hash: Int, probe: Int,
      keyBase: AnyRef, keyOffset: Long, keyLength: Int, inParent: Int): Boolean = {
    if (probe >= 0) {
      if (!layer.isLive(probe)) return false
      layer.markRemoved(probe)
    } else {
      if (!isInParent(inParent, hash, keyBase, keyOffset, keyLength)) return false
      layer.insertTombstone(hash, keyBase, keyOffset, keyLength, emptySlot = -1 - probe)
    }
    liveKeys -= 1
    true
  }

  private def isInParent(
      inParent: Int, hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Boolean =
    if (inParent == UnknownInParent) {
      parent != null && parent.containsKeyBytes(hash, keyBase, keyOffset, keyLength)
    } else {
      inParent == InParent
    }

  // What the last get found, valid until the next write: its key's bytes (copied, since
  // callers reuse their key buffers), hash, top-layer probe result, whether a lower layer
  // has the key live, and where its time is (for a timer call's getTime right after its
  // get: the layer and slot, or null). Lower layers are read-only, so only a write can make
  // it stale.
  private var recalledKey = new Array[Byte](16)
  private var recalledKeyLength = -1
  private var recalledHash = 0
  private var recalledProbe = 0
  private var recalledInParent = false
  private var recalledTimeLayer: RowHashMap = null
  private var recalledTimeSlot = -1

  // Where the key of the write under way is, from [[locate]].
  private var lookupHash = 0
  private var lookupProbe = 0
  private var lookupInParent = UnknownInParent

  private def remember(
      base: AnyRef, offset: Long, length: Int, hash: Int, probe: Int, inParent: Boolean,
      timeLayer: RowHashMap, timeSlot: Int): Unit = {
    if (recalledKey.length < length) {
      recalledKey = new Array[Byte](math.max(length, 2 * recalledKey.length))
    }
    RowHashMap.copyBytes(base, offset, recalledKey, Platform.BYTE_ARRAY_OFFSET, length)
    recalledKeyLength = length
    recalledHash = hash
    recalledProbe = probe
    recalledInParent = inParent
    recalledTimeLayer = timeLayer
    recalledTimeSlot = timeSlot
  }

  private def forget(): Unit = recalledKeyLength = -1

  /** Whether the last get was of these key bytes, with no write since. */
  private def recalled(base: AnyRef, offset: Long, length: Int): Boolean =
    recalledKeyLength == length &&
      ByteArrayMethods.arrayEquals(recalledKey, Platform.BYTE_ARRAY_OFFSET, base, offset, length)

  /** Sets the lookup fields for a write of `key`, then forgets the last get: a write follows. */
  private def locate(key: UnsafeRow): Unit = {
    val base = key.getBaseObject
    val offset = key.getBaseOffset
    val length = key.getSizeInBytes
    if (recalled(base, offset, length)) {
      lookupHash = recalledHash
      lookupProbe = recalledProbe
      lookupInParent = if (recalledInParent) InParent else NotInParent
    } else {
      lookupHash = hashOf(base, offset, length)
      lookupProbe = layer.probe(lookupHash, base, offset, length)
      lookupInParent = UnknownInParent
    }
    forget()
  }

  private[state] def containsKeyBytes(
      hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Boolean = {
    var map = this
    while (map != null) {
      val slot = map.layer.find(hash, keyBase, keyOffset, keyLength)
      if (slot >= 0) return map.layer.isLive(slot)
      map = map.parent
    }
    false
  }

  private[state] def keyView(from: RowHashMap, slot: Int): UnsafeRow = {
    val row = new UnsafeRow(keyNumFields)
    row.pointTo(from.pageAt(slot), from.keyOffsetAt(slot), from.keyLengthAt(slot))
    row
  }

  /** The state of a live slot, or null for a key that holds only a timer (no state bytes). */
  private[state] def stateView(from: RowHashMap, slot: Int): UnsafeRow = {
    if (from.stateLengthAt(slot) == 0) return null
    val row = new UnsafeRow(stateNumFields)
    row.pointTo(from.pageAt(slot), from.stateOffsetAt(slot), from.stateLengthAt(slot))
    row
  }

  private def freeze(): DeltaChainStateMap = {
    readOnly = true
    this
  }

  /** Entries (live, stale or tombstones) held by all the layers of this chain. */
  private def chainEntries: Long = sumOverChain(_.usedSlotCount)

  private def chainRecordBytes: Long = sumOverChain(_.recordBytes)

  private def sumOverChain(f: RowHashMap => Long): Long = {
    var total = 0L
    var map = this
    while (map != null) {
      total += f(map.layer)
      map = map.parent
    }
    total
  }

  private def checkWritable(): Unit = {
    if (readOnly) {
      throw new IllegalStateException(
        "this state map has been copied and is read-only: write to its copy instead")
    }
  }

  private def checkKey(key: UnsafeRow): Unit = {
    if (key.numFields != keyNumFields) {
      throw new IllegalArgumentException(
        s"key row has ${key.numFields} fields, this state map's keys have $keyNumFields")
    }
  }
}

object DeltaChainStateMap {

  /**
   * What [[DeltaChainStateMap.foreachNewestEntry]] calls per entry: a trait of its own rather
   * than a `Function3`, whose generic `apply` would box the slot and the flag of every entry
   * of a compaction.
   */
  private trait NewestEntry {
    def apply(from: RowHashMap, slot: Int, live: Boolean): Unit
  }


  /** An expiry index is rebuilt once it holds this many entries more than twice the live keys. */
  private val MinIndexEntriesToRebuild = 1 << 12

  /** Small maps keep Spark's rule alone: their chains cost little, whatever their churn. */
  val MinEntriesToCompactEarly: Int = 1 << 16

  /** A new empty base map sized for `expectedEntries` keys taking `expectedRecordBytes`. */
  private[state] def presized(
      keyNumFields: Int,
      stateNumFields: Int,
      deltaChainThreshold: Int,
      expectedEntries: Int,
      expectedRecordBytes: Long): DeltaChainStateMap =
    new DeltaChainStateMap(keyNumFields, stateNumFields, deltaChainThreshold, null,
      expectedEntries, expectedRecordBytes, null)

  // Whether a lower layer has a key live: not looked up yet, or what the lookup found.
  private val UnknownInParent = -1
  private val NotInParent = 0
  private val InParent = 1

  /** Expected keys of a fresh top layer: one batch's worth for a small partition. */
  private val NewLayerEntries = 48

  /** The hash of a key's bytes; the same as `UnsafeRow.hashCode`. */
  private[state] def hashOf(base: AnyRef, offset: Long, length: Int): Int =
    Murmur3_x86_32.hashUnsafeWords(base, offset, length, 42)

  /**
   * A walk over the live entries of a chain, top layer first. An entry of a lower layer is
   * visible only if no layer above holds its key (live or removed), which is checked with the
   * hash stored in the slot, so a scan hashes nothing and allocates nothing per entry.
   *
   * The layer just below the top is checked against the top layer itself. Deeper layers are
   * checked against one table of the keys of every layer above them ([[upperKeys]], filled as
   * the scan leaves each layer): a scan of a long chain over a large base would otherwise pay a
   * lookup in every upper layer for each base entry, which made a snapshot of a 250k-key
   * partition under a 10-layer chain spend most of its time in those lookups. The table holds
   * only the upper layers' keys, usually small beside the base, and is dropped with the scan.
   * The caller may still put or remove the key it was just given: that key is in the layer
   * being scanned, which joins the table before any layer below it is scanned.
   */
  private[state] final class ChainScan(
      top: DeltaChainStateMap, threshUpdatedTime: Long, filterByTime: Boolean) {
    private var map = top
    private var current = -1
    private var expectedLayout = top.layer.layoutVersion
    /** Layers above the one being scanned. */
    private var layersAbove = 0
    /** The keys of every layer above the one being scanned, once there are two or more. */
    private var upperKeys: RowHashMap = null

    def layer: RowHashMap = map.layer

    def slot: Int = current

    /** Moves to the next visible entry; false once there is none. */
    def advance(): Boolean = {
      while (map != null) {
        val scanned = map.layer
        if (scanned.layoutVersion != expectedLayout) {
          throw new ConcurrentModificationException(
            "state map layer was rebuilt while being iterated: only the key just returned " +
              "may be put or removed during an iteration")
        }
        current += 1
        while (current < scanned.slotCapacity) {
          if (scanned.isLive(current) &&
              (!filterByTime || scanned.updateTimeAt(current) < threshUpdatedTime) &&
              !hiddenByUpperLayer(scanned, current)) {
            return true
          }
          current += 1
        }
        descend()
      }
      false
    }

    private def descend(): Unit = {
      val left = map
      map = map.parent
      current = -1
      if (map != null) {
        expectedLayout = map.layer.layoutVersion
        layersAbove += 1
        if (layersAbove == 2) {
          // Sized for every layer but the base: all of them may end up above the scan.
          var entries = 0L
          var bytes = 0L
          var upper = top
          while (upper.parent != null) {
            entries += upper.layer.usedSlotCount
            bytes += upper.layer.recordBytes
            upper = upper.parent
          }
          upperKeys = new RowHashMap(RowHashMap.capacityFor(math.min(entries, 1L << 29).toInt),
            RowHashMap.pageSizeFor(bytes))
          addKeys(top.layer)
          addKeys(left.layer)
        } else if (layersAbove > 2) {
          addKeys(left.layer)
        }
      }
    }

    private def addKeys(from: RowHashMap): Unit = {
      var slot = 0
      while (slot < from.slotCapacity) {
        if (from.isLive(slot) || from.isRemoved(slot)) {
          val hash = from.hashAt(slot)
          val page = from.pageAt(slot)
          val keyOffset = from.keyOffsetAt(slot)
          val keyLength = from.keyLengthAt(slot)
          val probe = upperKeys.probe(hash, page, keyOffset, keyLength)
          if (probe < 0) upperKeys.insertTombstone(hash, page, keyOffset, keyLength, -1 - probe)
        }
        slot += 1
      }
    }

    private def hiddenByUpperLayer(scanned: RowHashMap, slot: Int): Boolean = {
      if (layersAbove == 0) return false
      val above = if (upperKeys != null) upperKeys else top.layer
      above.find(scanned.hashAt(slot), scanned.pageAt(slot), scanned.keyOffsetAt(slot),
        scanned.keyLengthAt(slot)) >= 0
    }
  }

  /**
   * Turns a scan into entries. Each entry is built as soon as the scan reaches it, so that the
   * views it holds point at the bytes the key had at that moment.
   */
  private final class EntryIterator(map: DeltaChainStateMap, scan: ChainScan)
    extends Iterator[StateEntry] {

    private var pending: StateEntry = null
    private var exhausted = false

    override def hasNext: Boolean = {
      if (pending == null && !exhausted) {
        if (scan.advance()) {
          val layer = scan.layer
          val slot = scan.slot
          pending = StateEntry(
            map.keyView(layer, slot), map.stateView(layer, slot), layer.updateTimeAt(slot))
        } else {
          exhausted = true
        }
      }
      pending != null
    }

    override def next(): StateEntry = {
      if (!hasNext) throw new NoSuchElementException("no more state map entries")
      val entry = pending
      pending = null
      entry
    }
  }
}
