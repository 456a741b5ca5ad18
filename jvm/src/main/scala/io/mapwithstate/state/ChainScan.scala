package io.mapwithstate.state

import java.util.ConcurrentModificationException

/**
 * A walk over the live entries of a chain, top layer first. An entry of a lower layer is
 * visible only if no layer above holds its key (live or removed), which is checked with the
 * hash stored in the slot, so a scan hashes nothing and allocates nothing per entry.
 *
 * The layer just below the top is checked against the top layer itself. Deeper layers are
 * checked against one table of the keys of every layer above them ([[upperKeys]], filled as
 * the scan leaves each layer): a scan of a long chain over a large base would otherwise pay a
 * lookup in every upper layer for each base entry, which would be most of the time of a
 * snapshot of a large partition under a long chain. The table holds
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
    map = map.parentMap
    current = -1
    if (map != null) {
      expectedLayout = map.layer.layoutVersion
      layersAbove += 1
      if (layersAbove == 2) {
        // Sized for every layer but the base: all of them may end up above the scan.
        var entries = 0L
        var bytes = 0L
        var upper = top
        while (upper.parentMap != null) {
          entries += upper.layer.usedSlotCount
          bytes += upper.layer.recordBytes
          upper = upper.parentMap
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
 * Turns a [[ChainScan]] into entries. Each entry is built as soon as the scan reaches it, so
 * that the views it holds point at the bytes the key had at that moment.
 */
private[state] final class ChainEntryIterator(map: DeltaChainStateMap, scan: ChainScan)
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
