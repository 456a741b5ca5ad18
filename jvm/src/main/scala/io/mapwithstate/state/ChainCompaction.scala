package io.mapwithstate.state

/**
 * The compactions of a [[DeltaChainStateMap]]'s chain: functions from a chain to a map with the
 * same contents in fewer layers, which read the chain's layers and never change them, so that
 * they may run on another thread once the chain is committed and no longer written.
 *
 *  - [[compact]]: every layer merged into one new base layer, O(state);
 *  - [[topLayerAlone]]: the top layer on its own, shared, when it holds every live key and no
 *    removed one, as under full churn (every key written each batch), with no record copied;
 *  - [[compactedChain]]: the cheapest of these and of merging only the layers above a large
 *    base ([[mergedAbove]]), for a committed chain's background compaction.
 */
private[state] object ChainCompaction {

  /**
   * What [[foreachNewestEntry]] calls per entry: a trait of its own rather than a `Function3`,
   * whose generic `apply` would box the slot and the flag of every entry of a compaction.
   */
  private trait NewestEntry {
    def apply(from: RowHashMap, slot: Int, live: Boolean): Unit
  }

  /** A new single-layer map with `chain`'s contents, which `chain` does not share; writable. */
  def compact(chain: DeltaChainStateMap): DeltaChainStateMap = {
    val target = DeltaChainStateMap.newLayer(chain.size, chain.chainRecordBytes)
    var live = 0
    var tombstones = 0
    // Tombstones are copied too, to hide their keys from the layers below, and dropped at the
    // end (a base layer needs none).
    foreachNewestEntry(chain, null, target) { (from, slot, isLive) =>
      val page = from.pageAt(slot)
      if (isLive) {
        target.insertLive(from.hashAt(slot), page, from.keyOffsetAt(slot), from.keyLengthAt(slot),
          page, from.stateOffsetAt(slot), from.stateLengthAt(slot),
          from.updateTimeAt(slot), shadowsParent = false)
        live += 1
      } else {
        target.insertTombstone(from.hashAt(slot), page, from.keyOffsetAt(slot),
          from.keyLengthAt(slot))
        tombstones += 1
      }
    }
    if (tombstones > 0) target.dropAllRemovedKeys()
    if (live != chain.size) {
      throw new IllegalStateException(
        s"compacting a state map of ${chain.size} keys gave $live:\n${chain.toDebugString}")
    }
    chain.node(null, target, live)
  }

  /**
   * A read-only compaction of `chain`, to stand in for its contents below newer layers (see
   * [[DeltaChainStateMap.rebased]]). When the layers above the base hold at most half as many
   * entries as the base (a large state with small batches), only they are merged, into one
   * layer over the same base, which the result shares: O(their entries) instead of O(state),
   * so that a large state does not pay a pass over every key every few batches. When the top
   * layer alone holds every live key, as under full churn, that layer on its own
   * ([[topLayerAlone]]). Otherwise (the upper layers rewrite much of the state) a new
   * single-layer base, as [[compact]] makes.
   */
  def compactedChain(chain: DeltaChainStateMap): DeltaChainStateMap =
    topLayerAlone(chain).getOrElse {
      // The lowest layer with entries stands for the base when every layer below it is empty:
      // a query's first version is a layer over an empty one (version 0), and treating that as
      // the base made the query's first compaction copy every key.
      var bottom = chain
      var map = chain
      while (map != null) {
        if (map.layer.usedSlotCount > 0) bottom = map
        map = map.parentMap
      }
      val baseEntries = bottom.layer.usedSlotCount.toLong
      val upperEntries = chain.chainEntries - baseEntries
      if (chain.deltaChainLength - bottom.deltaChainLength >= 2 &&
        2L * upperEntries <= baseEntries) {
        mergedAbove(chain, bottom, upperEntries.toInt).freeze()
      } else {
        compact(chain).freeze()
      }
    }

  /**
   * `chain`'s top layer on its own, as a read-only base, when that layer holds every live key
   * of the chain and no removed key: the layers below are then wholly shadowed, and the layer
   * itself is the compacted chain, with no record copied. Under full churn every layer is such
   * a layer, and compacting would otherwise copy the whole state every time the chain doubled
   * it. The layer is shared, as a rebased node shares its layer; both are read-only from then
   * on. Checking is one pass over the layer's slot words, against a pass over every key for a
   * compaction.
   */
  def topLayerAlone(chain: DeltaChainStateMap): Option[DeltaChainStateMap] = {
    val layer = chain.layer
    if (chain.parentMap == null || layer.usedSlotCount != chain.size ||
      !layer.allUsedSlotsLive) {
      None
    } else {
      Some(chain.withLayerOver(null))
    }
  }

  /**
   * A node over `bottom` (`chain`'s base, or its lowest layer with entries when the ones below
   * are empty) with the contents of `chain` in one layer: the layers above `bottom` merged top
   * first, as [[compact]] merges the whole chain. A key the base has live keeps its shadow
   * flag, and its removal stays a tombstone; a removal of a key the base does not have hides
   * nothing once the layers above are merged, and is dropped.
   */
  private def mergedAbove(
      chain: DeltaChainStateMap,
      bottom: DeltaChainStateMap,
      upperEntries: Int): DeltaChainStateMap = {
    val target = DeltaChainStateMap.newLayer(upperEntries,
      chain.chainRecordBytes - bottom.layer.recordBytes)
    var live = bottom.size
    val base = bottom.layer
    foreachNewestEntry(chain, bottom, target) { (from, slot, isLive) =>
      val hash = from.hashAt(slot)
      val page = from.pageAt(slot)
      val keyOffset = from.keyOffsetAt(slot)
      val keyLength = from.keyLengthAt(slot)
      val baseSlot = base.find(hash, page, keyOffset, keyLength)
      val inBase = baseSlot >= 0 && base.isLive(baseSlot)
      if (isLive) {
        target.insertLive(hash, page, keyOffset, keyLength,
          page, from.stateOffsetAt(slot), from.stateLengthAt(slot),
          from.updateTimeAt(slot), shadowsParent = inBase)
        if (!inBase) live += 1
      } else {
        // Inserted either way, to hide the key from the upper layers below this one.
        target.insertTombstone(hash, page, keyOffset, keyLength, shadowsParent = inBase)
        if (inBase) live -= 1
      }
    }
    target.dropRemovedNonTombstones()
    if (live != chain.size) {
      throw new IllegalStateException(
        s"merging the upper layers of a state map of ${chain.size} keys gave $live:\n" +
          chain.toDebugString)
    }
    chain.node(bottom, target, live)
  }

  /**
   * Calls `f` with each live or tombstone slot of `chain`'s layers, top layer first, down to
   * `stop` (not included; null: the whole chain), but only for keys that `target` — which `f`
   * fills — does not have yet: the first layer holding a key decides. That costs one lookup
   * per slot, where checking each entry against every layer above it (as a scan does) would
   * cost one per layer. Removed keys that no lower layer had need no marker, and are not given.
   */
  private def foreachNewestEntry(
      chain: DeltaChainStateMap,
      stop: DeltaChainStateMap,
      target: RowHashMap)(f: NewestEntry): Unit = {
    var map = chain
    while (map ne stop) {
      val from = map.layer
      var slot = 0
      while (slot < from.slotCapacity) {
        val live = from.isLive(slot)
        if ((live || from.isTombstone(slot)) && ((map eq chain) || target.find(from.hashAt(slot),
            from.pageAt(slot), from.keyOffsetAt(slot), from.keyLengthAt(slot)) < 0)) {
          f(from, slot, live)
        }
        slot += 1
      }
      map = map.parentMap
    }
  }
}
