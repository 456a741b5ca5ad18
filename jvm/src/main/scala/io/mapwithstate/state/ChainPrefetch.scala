package io.mapwithstate.state

/**
 * Reads ahead, for a group of keys, what their lookups in a [[DeltaChainStateMap]] will touch:
 * for each key the slot word its probe starts at in every layer, then the record that word
 * points at. Those are two cache misses per key over a large layer, which issued one record
 * at a time wait one after the other, and issued for the group back to back (two tight loops
 * of independent loads) wait together. A key whose slot word in a layer carries its hash's
 * tag is most likely there, where its lookup will stop, so the layers below are not read for
 * it: under full churn the chain is often two full layers over the base, and reading the base
 * too would be two wasted misses per key.
 *
 * It owns the scratch of one map's prefetches (grown to the largest group), and what it read
 * goes into a field, so that the compiler keeps the loads.
 */
private[state] final class ChainPrefetch {

  /** The group's slot words in the layer being read. */
  private var words = new Array[Long](0)

  /** The keys (indexes in the group) still to read ahead for. */
  private var keys = new Array[Int](0)

  /** A sum of what was read. */
  private var read = 0L

  /** Reads ahead for the first `count` of `keyHashes` in `top`'s chain. */
  def prefetch(top: DeltaChainStateMap, keyHashes: Array[Int], count: Int): Unit = {
    if (words.length < count) {
      words = new Array[Long](count)
      keys = new Array[Int](count)
    }
    var sum = read
    var left = count
    var i = 0
    while (i < count) {
      keys(i) = i
      i += 1
    }
    var map = top
    while (map != null && left > 0) {
      val layer = map.layer
      i = 0
      while (i < left) {
        words(i) = layer.probeStartWord(keyHashes(keys(i)))
        i += 1
      }
      // Reads the records, and keeps, in order, the keys that the layers below may hold.
      var kept = 0
      i = 0
      while (i < left) {
        val word = words(i)
        sum += layer.recordWord(word)
        val key = keys(i)
        if (!layer.mayHold(word, keyHashes(key))) {
          keys(kept) = key
          kept += 1
        }
        i += 1
      }
      left = kept
      map = map.parentMap
    }
    read = sum
  }
}
