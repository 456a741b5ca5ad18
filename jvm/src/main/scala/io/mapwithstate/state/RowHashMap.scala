package io.mapwithstate.state

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.array.ByteArrayMethods

/**
 * One layer of a [[DeltaChainStateMap]]: an open-addressing hash table from key bytes to
 * (state bytes, update time), where a key may also be marked removed.
 *
 * It owns the memory layout that lets a state map hold tens of millions of small states. There
 * is no object per entry: a slot is an index into three parallel primitive arrays (the key's
 * hash, the packed arena address of its record, its update time), and the record itself, a
 * `[keyLength][stateLength][key bytes][state bytes]` run of bytes, lives in a [[RowArena]].
 * Collisions are resolved by linear probing, which keeps probes within a cache line or two.
 *
 * Slots are never moved except by a rebuild (growth, or dropping removed keys), which is why a
 * remove only flags its slot: iterators that scan slots may then remove or re-put the key they
 * were just given. A rebuild while a scan is under way is detected through [[layoutVersion]].
 *
 * A removed slot keeps its key so that a later put of the same key reuses it, and so that
 * [[DeltaChainStateMap]] can tell apart a tombstone (the key is visible in a parent layer and
 * must stay hidden, so it is kept and serialized) from a key that never existed below (its slot
 * is dropped at the next rebuild).
 *
 * Not thread-safe.
 */
private[state] final class RowHashMap(initialCapacity: Int, initialPageSize: Int) {
  import RowHashMap._

  private var capacity = tableSizeFor(initialCapacity)
  private var mask = capacity - 1
  private val tableSeed = nextTableSeed()
  private var homeSeed = homeSeedFor(tableSeed, capacity)
  private var growThreshold = (capacity * LoadFactor).toInt
  private var hashes = new Array[Int](capacity)
  private var addresses = new Array[Long](capacity)
  private var updateTimes = new Array[Long](capacity)
  private var arena = new RowArena(initialPageSize)

  private var usedSlots = 0

  /** Removed slots whose key no parent layer has: they can go at the next rebuild. */
  private var droppableSlots = 0

  /** Arena bytes that the records of the current slots need; the rest is garbage. */
  private var retainedBytes = 0L
  private var rebuilds = 0

  /** The earliest time any live record was written with: see [[earliestTime]]. */
  private var earliest = Long.MaxValue

  /** Changes whenever slots move, so that a scan over slot indexes can tell it was disturbed. */
  def layoutVersion: Int = rebuilds

  def slotCapacity: Int = capacity

  /**
   * The mean distance, in slots, from a used slot back to its key's home slot: how long probes
   * run. About 1–2 at this load factor when keys land as in random order; a table filled in
   * its own probe order shows thousands.
   */
  private[state] def meanProbeDistance: Double = {
    var total = 0L
    var slot = 0
    while (slot < capacity) {
      if (addresses(slot) != EmptySlot) total += (slot - home(hashes(slot))) & mask
      slot += 1
    }
    if (usedSlots == 0) 0.0 else total.toDouble / usedSlots
  }

  /** Slots holding a key, live or removed. */
  def usedSlotCount: Int = usedSlots

  /** Slots a delta must carry: live keys, and tombstones that hide a parent's key. */
  def liveOrTombstoneCount: Int = usedSlots - droppableSlots

  /** Whether every used slot holds a live key (none removed): O(slots), one sequential read. */
  def allUsedSlotsLive: Boolean = {
    var live = 0
    var slot = 0
    while (slot < capacity) {
      if (addresses(slot) > 0) live += 1
      slot += 1
    }
    live == usedSlots
  }

  /** Arena bytes that the current slots' records take up (garbage excluded). */
  def recordBytes: Long = retainedBytes

  /**
   * A lower bound of the times of this table's live keys: the earliest time a live record was
   * ever written with ([[StateMap.NoTime]] aside), `Long.MaxValue` if none was. Records
   * overwritten or removed since still count, so it only ever moves down (a growth keeps it);
   * a compaction copies the live keys into a new table, whose bound is theirs again.
   */
  def earliestTime: Long = earliest

  @inline private def noteTime(time: Long): Unit =
    if (time != StateMap.NoTime && time < earliest) earliest = time

  /** Approximate heap bytes held: the slot arrays plus the arena's pages. */
  def footprintBytes: Long = capacity.toLong * BytesPerSlot + arena.footprintBytes

  /**
   * The slot where the probe for a key of `hash` starts: the hash mixed again with this
   * table's seed (Murmur3's finalizer), then its low bits. A file's records, a compaction's, a
   * rebuild's and a rewrite's come in some table's slot order; were two tables to place keys
   * alike, that order would be the new table's own probe order, linear probing's quadratic
   * case: into a smaller table the keys sweep its slots once per factor of two between the
   * capacities, each sweep over the runs the last one left (loading a partition of millions of
   * keys from its files took many minutes), and into a table of the same capacity two such
   * streams (a repartition's or a conversion's merge of two partitions or two layers) pile
   * twice the table's density onto the same stretch of slots. So each table has a seed of its
   * own, changed with its capacity ([[homeSeedFor]]): any other table's order is a random order
   * here. A rebuild at the same capacity keeps the seed and runs in one pass.
   */
  @inline private def home(hash: Int): Int = homeSlot(hash, homeSeed, mask)

  /**
   * The slot word where a probe for `hash` starts. Reading these words for a group of keys
   * before probing for any of them has their cache misses overlap (see [[recordWord]]).
   */
  def probeStartWord(hash: Int): Long = addresses(home(hash))

  /**
   * The first word of the record a slot word (from [[probeStartWord]]) points at, or 0 for an
   * empty slot: reading it brings that record's key, and usually its state, into the cache.
   */
  def recordWord(slotWord: Long): Long =
    if (slotWord == EmptySlot) 0L
    else Platform.getLong(arena.page(slotWord), arena.unsafeOffset(slotWord))

  /**
   * Whether a slot word (from [[probeStartWord]]) may hold the key of `hash`: it is used and
   * carries the hash's tag. Where it does, a lookup of the key most likely ends at this table.
   */
  def mayHold(slotWord: Long, hash: Int): Boolean = slotWord != EmptySlot && tagged(slotWord, hash)

  /** Whether a used slot word carries the tag of `hash` (see [[TagBits]]). */
  @inline private def tagged(slotWord: Long, hash: Int): Boolean =
    (slotWord & TagBits) == (hash & TagBits)

  /** The slot holding the given key bytes, or -1. */
  def find(hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Int = {
    val slot = probe(hash, keyBase, keyOffset, keyLength)
    if (slot >= 0) slot else -1
  }

  /**
   * The slot holding the given key bytes, or, if there is none, `-1 - s` for the empty slot `s`
   * where the probe ended: where [[insertLive]] puts the key unless a write moves slots first.
   * Handing that slot to the insert saves probing the table a second time.
   */
  def probe(hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Int = {
    var slot = home(hash)
    while (true) {
      val address = addresses(slot)
      if (address == EmptySlot) return -1 - slot
      // The tag (see [[TagBits]]) spares reading the hashes array, one more cache miss.
      if (tagged(address, hash) &&
        keyEquals(address, keyBase, keyOffset, keyLength)) {
        return slot
      }
      slot = (slot + 1) & mask
    }
    -1 // unreachable: the table always has an empty slot
  }

  /** The slot holds a live state (the removed flag is the sign bit, an empty slot is 0). */
  def isLive(slot: Int): Boolean = addresses(slot) > 0

  def isRemoved(slot: Int): Boolean = addresses(slot) < 0

  /** Whether the key was visible in a parent layer when this slot was created. */
  def shadowsParent(slot: Int): Boolean = (addresses(slot) & ShadowsParentFlag) != 0

  /** A removed slot that hides a parent's key: it must be kept and written to deltas. */
  def isTombstone(slot: Int): Boolean = isRemoved(slot) && shadowsParent(slot)

  def hashAt(slot: Int): Int = hashes(slot)

  def updateTimeAt(slot: Int): Long = updateTimes(slot)

  /** The byte[] holding the slot's key and state, for `UnsafeRow.pointTo` and comparisons. */
  def pageAt(slot: Int): Array[Byte] = arena.page(addresses(slot))

  def keyOffsetAt(slot: Int): Long = arena.unsafeOffset(addresses(slot)) + RecordHeaderSize

  def keyLengthAt(slot: Int): Int =
    Platform.getInt(pageAt(slot), arena.unsafeOffset(addresses(slot)))

  /** Only meaningful for a live slot: removed slots may have dropped their state bytes. */
  def stateOffsetAt(slot: Int): Long = keyOffsetAt(slot) + keyLengthAt(slot)

  def stateLengthAt(slot: Int): Int =
    Platform.getInt(pageAt(slot), arena.unsafeOffset(addresses(slot)) + 4)

  /**
   * Adds a live key that the caller has checked is not in this table. `emptySlot` is the
   * empty slot a [[probe]] for it ended at since the last write, or -1 if unknown.
   */
  def insertLive(
      hash: Int,
      keyBase: AnyRef, keyOffset: Long, keyLength: Int,
      stateBase: AnyRef, stateOffset: Long, stateLength: Int,
      updateTime: Long,
      shadowsParent: Boolean,
      emptySlot: Int = -1): Unit = {
    val slot = makeRoomForOneMore(emptySlot)
    val address = appendRecord(keyBase, keyOffset, keyLength, stateBase, stateOffset, stateLength)
    occupyEmptySlot(slot, hash, flagged(address, removed = false, shadowsParent), updateTime)
    noteTime(updateTime)
  }

  /**
   * Adds a tombstone for a key that the caller has checked is not in this table; without
   * `shadowsParent`, a removed key that hides nothing below this table, kept only until
   * [[dropRemovedNonTombstones]] (or the next rebuild).
   */
  def insertTombstone(
      hash: Int, keyBase: AnyRef, keyOffset: Long, keyLength: Int, emptySlot: Int = -1,
      shadowsParent: Boolean = true): Unit = {
    val slot = makeRoomForOneMore(emptySlot)
    val address = appendRecord(keyBase, keyOffset, keyLength, null, 0L, 0)
    occupyEmptySlot(slot, hash, flagged(address, removed = true, shadowsParent), 0L)
  }

  /** Rebuilds the table without the removed keys that are not tombstones, if it has any. */
  def dropRemovedNonTombstones(): Unit =
    if (droppableSlots > 0) rebuild(capacity, dropTombstones = false)

  /**
   * Rebuilds the table without any removed keys, tombstones included: for a table that has
   * become a base layer, with no parent whose keys tombstones would hide.
   */
  def dropAllRemovedKeys(): Unit = rebuild(capacity, dropTombstones = true)

  /** Gives a used slot (live or removed) a new live state, keeping its key. */
  def updateLive(
      slot: Int,
      stateBase: AnyRef, stateOffset: Long, stateLength: Int,
      updateTime: Long): Unit = {
    val old = addresses(slot)
    if (old < 0 && (old & ShadowsParentFlag) == 0) droppableSlots -= 1
    retainedBytes -= retainedSize(old)
    // Append rather than overwrite: views handed out earlier still point at the old bytes.
    val keyPage = arena.page(old)
    val keyOffset = arena.unsafeOffset(old) + RecordHeaderSize
    val keyLength = Platform.getInt(keyPage, arena.unsafeOffset(old))
    val address =
      appendRecord(keyPage, keyOffset, keyLength, stateBase, stateOffset, stateLength)
    addresses(slot) =
      flagged(address, removed = false, (old & ShadowsParentFlag) != 0) | (old & TagBits)
    updateTimes(slot) = updateTime
    noteTime(updateTime)
    vacuumIfWasteful()
  }

  /**
   * Like [[updateLive]], but a live slot whose state has the new state's length gets the new
   * bytes written over the old ones. That saves appending a record and, later, vacuuming the
   * old one away; the price is that a view of the old state now shows the new one, which only
   * callers that are done with the old state may pay (see [[StateMap.putInPlace]]).
   */
  def overwriteLive(
      slot: Int,
      stateBase: AnyRef, stateOffset: Long, stateLength: Int,
      updateTime: Long): Unit = {
    val address = addresses(slot)
    if (address > 0) {
      val page = arena.page(address)
      val recordOffset = arena.unsafeOffset(address)
      if (Platform.getInt(page, recordOffset + 4) == stateLength) {
        val target = recordOffset + RecordHeaderSize + Platform.getInt(page, recordOffset)
        // A key put again with the very state the map handed out (a refresh of its update
        // time) needs no copy.
        if (!((stateBase eq page) && stateOffset == target)) {
          copyBytes(stateBase, stateOffset, page, target, stateLength)
        }
        updateTimes(slot) = updateTime
        noteTime(updateTime)
        return
      }
    }
    updateLive(slot, stateBase, stateOffset, stateLength, updateTime)
  }

  /** Flags a live slot as removed; its state bytes become garbage. */
  def markRemoved(slot: Int): Unit = {
    val old = addresses(slot)
    require(old > 0, s"slot $slot is not live")
    retainedBytes -= retainedSize(old)
    val removed = old | RemovedFlag
    addresses(slot) = removed
    retainedBytes += retainedSize(removed)
    if ((old & ShadowsParentFlag) == 0) droppableSlots += 1
    vacuumIfWasteful()
  }

  /**
   * Hands `visitor` this layer's live keys and tombstones, the records a delta carries, in
   * slot order; returns how many. Slots are in hash order and records in the order they were
   * written, so each record is a cache miss: the lengths of a run of slots are read first,
   * loads that do not wait on each other (the processor overlaps their misses), then the run's
   * records are handed over.
   */
  def visitLiveAndTombstones(visitor: StateRecordVisitor): Int = {
    val slots = new Array[Int](VisitRun)
    val keyLengths = new Array[Int](VisitRun)
    val stateLengths = new Array[Int](VisitRun)
    var visited = 0
    var slot = 0
    while (slot < capacity) {
      var run = 0
      while (run < VisitRun && slot < capacity) {
        val live = isLive(slot)
        if (live || isTombstone(slot)) {
          slots(run) = slot
          keyLengths(run) = keyLengthAt(slot)
          stateLengths(run) = if (live) stateLengthAt(slot) else TombstoneStateLength
          run += 1
        }
        slot += 1
      }
      var i = 0
      while (i < run) {
        val s = slots(i)
        val page = pageAt(s)
        val keyOffset = keyOffsetAt(s)
        val keyLength = keyLengths(i)
        val stateLength = stateLengths(i)
        if (stateLength != TombstoneStateLength) {
          // A record's key and state bytes are adjacent in the arena.
          visitor.live(page, keyOffset, keyLength, page, keyOffset + keyLength, stateLength,
            updateTimeAt(s))
        } else {
          visitor.removed(page, keyOffset, keyLength)
        }
        i += 1
      }
      visited += run
    }
    visited
  }

  private def keyEquals(
      address: Long, keyBase: AnyRef, keyOffset: Long, keyLength: Int): Boolean = {
    val page = arena.page(address)
    val recordOffset = arena.unsafeOffset(address)
    Platform.getInt(page, recordOffset) == keyLength &&
    ByteArrayMethods.arrayEquals(
      page, recordOffset + RecordHeaderSize, keyBase, keyOffset, keyLength)
  }

  private def appendRecord(
      keyBase: AnyRef, keyOffset: Long, keyLength: Int,
      stateBase: AnyRef, stateOffset: Long, stateLength: Int): Long = {
    val size = RecordHeaderSize + keyLength + stateLength
    val address = arena.allocate(size)
    writeRecord(arena, address, keyBase, keyOffset, keyLength, stateBase, stateOffset, stateLength)
    retainedBytes += size
    address
  }

  /**
   * Rebuilds first if one more slot would make the table too full. Returns `emptySlot`, or -1
   * if a rebuild has moved the slots and the new key's must be probed for again.
   */
  private def makeRoomForOneMore(emptySlot: Int): Int = {
    if (usedSlots + 1 > growThreshold) {
      val kept = usedSlots - droppableSlots
      // Only dropping removed keys would leave the table too full to be worth it: grow too.
      rebuild(if (kept + 1 > growThreshold / 2) capacity * 2 else capacity, dropTombstones = false)
      -1
    } else {
      emptySlot
    }
  }

  /**
   * Places a record appended after [[makeRoomForOneMore]] (a rebuild may replace the arena) in
   * `emptySlot`, or in the first empty slot of its probe sequence if that is -1.
   */
  private def occupyEmptySlot(
      emptySlot: Int, hash: Int, flaggedAddress: Long, updateTime: Long): Unit = {
    var slot = emptySlot
    if (slot < 0) {
      slot = home(hash)
      while (addresses(slot) != EmptySlot) slot = (slot + 1) & mask
    }
    hashes(slot) = hash
    addresses(slot) = flaggedAddress | (hash & TagBits)
    updateTimes(slot) = updateTime
    usedSlots += 1
    if (flaggedAddress < 0 && (flaggedAddress & ShadowsParentFlag) == 0) droppableSlots += 1
  }

  /**
   * Re-places every slot worth keeping into fresh arrays of `newCapacity` slots. Records are
   * copied into a new arena only if enough of the old one is garbage to pay for the copy.
   */
  private def rebuild(newCapacity: Int, dropTombstones: Boolean): Unit = {
    if (newCapacity > MaxCapacity) {
      throw new IllegalStateException(s"state map layer cannot grow beyond $MaxCapacity slots")
    }
    val oldHashes = hashes
    val oldAddresses = addresses
    val oldUpdateTimes = updateTimes
    val oldArena = arena
    val moveRecords = (oldArena.allocatedBytes - retainedBytes) * 4 > oldArena.allocatedBytes

    capacity = newCapacity
    mask = newCapacity - 1
    homeSeed = homeSeedFor(tableSeed, newCapacity)
    growThreshold = (newCapacity * LoadFactor).toInt
    hashes = new Array[Int](newCapacity)
    addresses = new Array[Long](newCapacity)
    updateTimes = new Array[Long](newCapacity)
    if (moveRecords) arena = new RowArena(pageSizeFor(retainedBytes))

    var oldSlot = 0
    while (oldSlot < oldAddresses.length) {
      val address = oldAddresses(oldSlot)
      if (address != EmptySlot) {
        val droppable = address < 0 && (dropTombstones || (address & ShadowsParentFlag) == 0)
        if (droppable) {
          retainedBytes -= retainedSize(address, oldArena)
          usedSlots -= 1
        } else {
          val newAddress = if (moveRecords) moveRecord(oldArena, address) else address
          var slot = home(oldHashes(oldSlot))
          while (addresses(slot) != EmptySlot) slot = (slot + 1) & mask
          hashes(slot) = oldHashes(oldSlot)
          addresses(slot) = newAddress
          updateTimes(slot) = oldUpdateTimes(oldSlot)
        }
      }
      oldSlot += 1
    }
    droppableSlots = 0
    rebuilds += 1
  }

  /**
   * Copies the live records into a new arena once more than half of the arena is garbage (from
   * repeated overwrites of the same keys). Slots keep their positions, so a scan in progress is
   * not disturbed; only the addresses change.
   */
  private def vacuumIfWasteful(): Unit = {
    val garbage = arena.allocatedBytes - retainedBytes
    if (garbage > MinGarbageToVacuum && garbage * 2 > arena.allocatedBytes) {
      val oldArena = arena
      arena = new RowArena(pageSizeFor(retainedBytes))
      var slot = 0
      while (slot < capacity) {
        val address = addresses(slot)
        if (address != EmptySlot) addresses(slot) = moveRecord(oldArena, address)
        slot += 1
      }
    }
  }

  /** Copies one record into the current arena and returns its new flagged, tagged address. */
  private def moveRecord(from: RowArena, flaggedAddress: Long): Long = {
    val page = from.page(flaggedAddress)
    val recordOffset = from.unsafeOffset(flaggedAddress)
    val keyLength = Platform.getInt(page, recordOffset)
    val keyOffset = recordOffset + RecordHeaderSize
    // A removed key's state is never read again: keep only the key.
    val stateLength = if (flaggedAddress < 0) 0 else Platform.getInt(page, recordOffset + 4)
    val newAddress = arena.allocate(RecordHeaderSize + keyLength + stateLength)
    writeRecord(arena, newAddress, page, keyOffset, keyLength,
      page, keyOffset + keyLength, stateLength)
    newAddress | (flaggedAddress & (FlagBits | TagBits))
  }

  private def retainedSize(flaggedAddress: Long): Long = retainedSize(flaggedAddress, arena)

  private def retainedSize(flaggedAddress: Long, in: RowArena): Long = {
    val page = in.page(flaggedAddress)
    val recordOffset = in.unsafeOffset(flaggedAddress)
    val keyLength = Platform.getInt(page, recordOffset)
    if (flaggedAddress < 0) {
      RecordHeaderSize + keyLength
    } else {
      RecordHeaderSize + keyLength + Platform.getInt(page, recordOffset + 4)
    }
  }
}

private[state] object RowHashMap {

  private val EmptySlot = 0L
  private val RemovedFlag = Long.MinValue
  private val ShadowsParentFlag = 1L << 62
  private val FlagBits = RemovedFlag | ShadowsParentFlag

  /**
   * A slot's address word also carries the top 13 bits of its key's hash, in bits 19..31,
   * which arena addresses leave free (see [[RowArena.AddressBits]]): a probe compares them
   * before it compares key bytes, without a second array's cache miss. The full hash stays in
   * its own array for rebuilds.
   */
  private val TagBits = 0xfff80000L

  /** Tables made so far: each table's seed is drawn from it ([[nextTableSeed]]). */
  private val tablesMade = new java.util.concurrent.atomic.AtomicInteger()

  /** A new table's own seed: consecutive tables' seeds differ in many bits (an odd multiplier). */
  private[state] def nextTableSeed(): Int = tablesMade.incrementAndGet() * 0x632be5ab

  /** The seed of a table's home slots ([[RowHashMap.home]]): its own, and one per capacity. */
  private[state] def homeSeedFor(tableSeed: Int, capacity: Int): Int =
    tableSeed ^ (Integer.numberOfTrailingZeros(capacity) + 1) * 0x9e3779b9

  /**
   * The home slot of `hash` in a table of `mask + 1` slots whose seed is `seed` (see
   * [[RowHashMap.home]]): the seeded hash through Murmur3's finalizer, then its low bits.
   */
  @inline private[state] def homeSlot(hash: Int, seed: Int, mask: Int): Int = {
    var h = hash ^ seed
    h ^= h >>> 16
    h *= 0x85ebca6b
    h ^= h >>> 13
    h *= 0xc2b2ae35
    h ^= h >>> 16
    h & mask
  }
  private val RecordHeaderSize = 8

  /** One hash int, one address long and one update-time long per slot. */
  val BytesPerSlot: Int = 4 + 8 + 8

  /** Slots whose records [[visitLiveAndTombstones]] locates before handing any over. */
  private val VisitRun = 32

  /** A removed slot's state length in [[visitLiveAndTombstones]]'s run. */
  private val TombstoneStateLength = -1

  private val LoadFactor = 0.75
  private val MaxCapacity = 1 << 30
  private val MinGarbageToVacuum = 1L << 20

  /** Slot count (a power of two) that holds `entries` keys without growing. */
  def capacityFor(entries: Int): Int = tableSizeFor(math.ceil(entries / LoadFactor).toInt + 1)

  /** A first page size for an arena expected to hold about `bytes` bytes. */
  def pageSizeFor(bytes: Long): Int =
    math.max(MinPageSize, math.min(RowArena.MaxPageSize.toLong, bytes).toInt)

  private val MinPageSize = 1024

  private def tableSizeFor(n: Int): Int = {
    val atLeast = math.max(n, 4)
    if (atLeast >= MaxCapacity) MaxCapacity else Integer.highestOneBit(atLeast - 1) << 1
  }

  private def flagged(address: Long, removed: Boolean, shadowsParent: Boolean): Long = {
    var result = address
    if (removed) result |= RemovedFlag
    if (shadowsParent) result |= ShadowsParentFlag
    result
  }

  private def writeRecord(
      arena: RowArena, address: Long,
      keyBase: AnyRef, keyOffset: Long, keyLength: Int,
      stateBase: AnyRef, stateOffset: Long, stateLength: Int): Unit = {
    val page = arena.page(address)
    val recordOffset = arena.unsafeOffset(address)
    Platform.putInt(page, recordOffset, keyLength)
    Platform.putInt(page, recordOffset + 4, stateLength)
    copyBytes(keyBase, keyOffset, page, recordOffset + RecordHeaderSize, keyLength)
    if (stateLength > 0) {
      copyBytes(stateBase, stateOffset,
        page, recordOffset + RecordHeaderSize + keyLength, stateLength)
    }
  }

  /**
   * `Platform.copyMemory`, but word by word for the small whole-word runs that UnsafeRows of
   * a few fixed-size fields are: that beats the call into Unsafe's bulk copy at these sizes.
   */
  private[state] def copyBytes(
      srcBase: AnyRef, srcOffset: Long, dstBase: AnyRef, dstOffset: Long, length: Int): Unit = {
    if (length <= SmallCopyBytes && (length & 7) == 0) {
      var i = 0
      while (i < length) {
        Platform.putLong(dstBase, dstOffset + i, Platform.getLong(srcBase, srcOffset + i))
        i += 8
      }
    } else {
      Platform.copyMemory(srcBase, srcOffset, dstBase, dstOffset, length)
    }
  }

  private val SmallCopyBytes = 64
}
