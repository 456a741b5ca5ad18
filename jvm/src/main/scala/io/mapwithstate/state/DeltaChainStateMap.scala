package io.mapwithstate.state

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.hash.Murmur3_x86_32

/**
 * The [[StateMap]] of mapWithState on the heap: a chain of [[RowHashMap]] layers, where each
 * layer holds the writes made after the map below it was copied, as in Spark's
 * `OpenHashMapBasedStateMap`.
 *
 * It is versioned the way micro-batches need: [[copy]] is cheap and returns a map that starts
 * out with this map's contents and takes every later write, while this map keeps the state as
 * of the previous batch (for a retried task, and for checkpointing only what a batch changed).
 * A map that has been copied is read-only.
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
 * (O(size), see [[ChainCompaction]]), and puts the new empty layer over that. The top layer
 * therefore always holds exactly the writes made since the last copy
 * ([[visitWrittenSinceCopy]]), which is what [[StateMapSerde.writeDelta]] persists.
 *
 * This class holds the chain's semantics: lookups down the chain, writes to the top layer,
 * copies and rebases. Its other jobs are classes of their own: reading a chain's live entries
 * ([[ChainScan]]), compacting it ([[ChainCompaction]]), reading ahead for a group of lookups
 * ([[ChainPrefetch]]), and remembering a lookup for the write after it ([[KeyLookupMemo]]).
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
    /** This map's own writes; a rebased node shares the layer of the node it stands for. */
    private[state] val layer: RowHashMap,
    /** Live keys of the whole chain. */
    private var liveKeys: Int)
  extends StateMap {
  import DeltaChainStateMap._
  import KeyLookupMemo.{InParent, UnknownInParent}

  /** A new empty map. */
  def this(keyNumFields: Int, stateNumFields: Int, deltaChainThreshold: Int) =
    this(keyNumFields, stateNumFields, deltaChainThreshold, null,
      DeltaChainStateMap.newLayer(DeltaChainStateMap.NewLayerEntries,
        DeltaChainStateMap.NewLayerEntries * 32L), 0)

  def this(keyNumFields: Int, stateNumFields: Int) =
    this(keyNumFields, stateNumFields, StateMap.DefaultDeltaChainThreshold)

  require(keyNumFields >= 0, s"keyNumFields must not be negative, got $keyNumFields")
  require(stateNumFields >= 0, s"stateNumFields must not be negative, got $stateNumFields")
  require(deltaChainThreshold >= 1,
    s"deltaChainThreshold must be at least 1, got $deltaChainThreshold")

  /** Number of layers below this one: 0 for a base layer. */
  val deltaChainLength: Int = if (parent == null) 0 else parent.deltaChainLength + 1

  /** What the last get found, for a write of its key right after it. */
  private val memo = new KeyLookupMemo
  private val prefetcher = new ChainPrefetch

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

  /** See [[ChainPrefetch]]. */
  override def prefetch(keyHashes: Array[Int], count: Int): Unit =
    prefetcher.prefetch(this, keyHashes, count)

  /**
   * Also remembers what the lookup found ([[KeyLookupMemo]]), so that a write of the same key
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
      memo.remember(base, offset, length, hash, probe, inParent = liveBelow, timeLayer, timeSlot)
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
    removeAt(memo.writeHash, memo.writeProbe,
      key.getBaseObject, key.getBaseOffset, key.getSizeInBytes, memo.writeInParent)
  }

  /**
   * Entries are produced top layer first, each one as it is reached, so the caller may remove
   * or re-put the key of the entry it was just given (as timeout handling does); other writes
   * during the scan may make it fail with a ConcurrentModificationException.
   */
  override def getByTime(threshUpdatedTime: Long): Iterator[StateEntry] =
    new ChainEntryIterator(this, new ChainScan(this, threshUpdatedTime, filterByTime = true))

  /** See [[getByTime]] for what may be written while iterating. */
  override def getAll(): Iterator[StateEntry] =
    new ChainEntryIterator(this, new ChainScan(this, 0L, filterByTime = false))

  /** The live entries straight from the layers' records: no row objects per entry. */
  override private[state] def visitEntries(visitor: StateRecordVisitor): Int = {
    val scan = new ChainScan(this, 0L, filterByTime = false)
    var visited = 0
    while (scan.advance()) {
      val layer = scan.layer
      val slot = scan.slot
      val keyOffset = layer.keyOffsetAt(slot)
      val keyLength = layer.keyLengthAt(slot)
      val page = layer.pageAt(slot)
      // A record's key and state bytes are adjacent in its layer's arena.
      visitor.live(page, keyOffset, keyLength, page, keyOffset + keyLength,
        layer.stateLengthAt(slot), layer.updateTimeAt(slot))
      visited += 1
    }
    visited
  }

  /**
   * Hands `visitor` the records of the writes made since this map's parent was copied (all
   * its entries, if it has no parent): the top layer's live keys, and tombstones for the keys
   * it removed that a lower layer has. Returns how many ([[writtenSinceCopyCount]]).
   */
  private[state] def visitWrittenSinceCopy(visitor: StateRecordVisitor): Int =
    layer.visitLiveAndTombstones(visitor)

  /** How many records [[visitWrittenSinceCopy]] hands over. */
  private[state] def writtenSinceCopyCount: Int = layer.liveOrTombstoneCount

  /** Whether a write since this map's parent was copied was of these key bytes. */
  private[state] def writtenSinceCopy(
      hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Boolean =
    layer.find(hash, keyBase, keyOffset, keyLength) >= 0

  /**
   * A map with this map's contents that takes all later writes; this map becomes read-only and
   * keeps its contents. O(1), unless the chain is due a compaction ([[shouldCompact]]).
   */
  def copy(): DeltaChainStateMap = {
    readOnly = true
    val base =
      if (shouldCompact) ChainCompaction.topLayerAlone(this).getOrElse(compact().freeze())
      else this
    val entries = nextLayerEntries
    val next = new DeltaChainStateMap(keyNumFields, stateNumFields, deltaChainThreshold, base,
      newLayer(entries, entries * 32L), base.size)
    // The copy has this map's contents, so this map's index is valid for it; this map, now
    // read-only, needs none (a retried batch copies it again and rebuilds one).
    next.index = index
    index = null
    next
  }

  /**
   * The keys a copy's new top layer is sized for: as many as each of the last two batches wrote
   * (the smaller count), so that a run of batches of about the same size (under full churn,
   * exactly the same) writes into a layer that needs no growing, rather than growing it by
   * doubling from a few dozen slots, a rehash each time. The smaller of two, not the last one
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
    if (memo.holds(base, offset, length)) memo.recalledTime
    else timeOfKeyBytes(hashOf(base, offset, length), base, offset, length)
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
    val (times, keys) = index.due(threshold,
      bytes =>
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

  /** A new single-layer map with the same contents, which this map does not share. */
  def compact(): DeltaChainStateMap = ChainCompaction.compact(this)

  /** See [[ChainCompaction.compactedChain]]. */
  def compactedChain(): DeltaChainStateMap = ChainCompaction.compactedChain(this)

  /** A read-only node with this map's layer (shared, not copied) and size, over `below`. */
  private[state] def withLayerOver(below: DeltaChainStateMap): DeltaChainStateMap =
    node(below, layer, liveKeys).freeze()

  /** A new node of this map's shape over `below`, with `layer` and `liveKeys`; writable. */
  private[state] def node(below: DeltaChainStateMap, layer: RowHashMap, liveKeys: Int)
      : DeltaChainStateMap =
    new DeltaChainStateMap(keyNumFields, stateNumFields, deltaChainThreshold, below, layer,
      liveKeys)

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
    memo.forget()
    putAt(hash, layer.probe(hash, keyBase, keyOffset, keyLength), keyBase, keyOffset, keyLength,
      stateBase, stateOffset, stateLength, updateTime, UnknownInParent, inPlace = false)
  }

  /** Removes a key; returns whether it had a state. */
  private[state] def removeBytes(
      hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Boolean = {
    checkWritable()
    memo.forget()
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
      putAt(memo.writeHash, memo.writeProbe, key.getBaseObject, key.getBaseOffset,
        key.getSizeInBytes, null, 0L, 0, updateTime, memo.writeInParent, inPlace)
    } else {
      putAt(memo.writeHash, memo.writeProbe, key.getBaseObject, key.getBaseOffset,
        key.getSizeInBytes, state.getBaseObject, state.getBaseOffset, state.getSizeInBytes,
        updateTime, memo.writeInParent, inPlace)
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

  /** Sets the memo's write fields for a write of `key` (see [[KeyLookupMemo.locate]]). */
  private def locate(key: UnsafeRow): Unit =
    memo.locate(key.getBaseObject, key.getBaseOffset, key.getSizeInBytes, layer)

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

  private[state] def freeze(): DeltaChainStateMap = {
    readOnly = true
    this
  }

  /** Entries (live, stale or tombstones) held by all the layers of this chain. */
  private[state] def chainEntries: Long = sumOverChain(_.usedSlotCount)

  /** Arena bytes the records of all the layers of this chain take up. */
  private[state] def chainRecordBytes: Long = sumOverChain(_.recordBytes)

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
      newLayer(expectedEntries, expectedRecordBytes), 0)

  /** A new empty layer sized for `expectedEntries` keys taking `expectedRecordBytes`. */
  private[state] def newLayer(expectedEntries: Int, expectedRecordBytes: Long): RowHashMap =
    new RowHashMap(
      RowHashMap.capacityFor(expectedEntries), RowHashMap.pageSizeFor(expectedRecordBytes))

  /** Expected keys of a fresh top layer: one batch's worth for a small partition. */
  private[state] val NewLayerEntries = 48

  /** The hash of a key's bytes; the same as `UnsafeRow.hashCode`. */
  private[state] def hashOf(base: AnyRef, offset: Long, length: Int): Int =
    Murmur3_x86_32.hashUnsafeWords(base, offset, length, 42)
}
