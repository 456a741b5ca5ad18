package io.mapwithstate.state

/**
 * What a writer that copies a [[StateMap]] out as bytes receives: each record's key and state
 * bytes where they lie, one call per record, with no row object made for it. A map hands its
 * records this way ([[StateMap.visitEntries]], and a delta chain's top layer through
 * [[DeltaChainStateMap.visitWrittenSinceCopy]]) so that the file format ([[StateMapSerde]])
 * does not depend on how a map lays its records out, nor a map on the format.
 *
 * Bytes are Unsafe addresses (a base object and an offset, as `UnsafeRow` has them), valid
 * during the call only.
 */
private[state] trait StateRecordVisitor {

  /**
   * A live key: its bytes, then its state's (`stateLength` 0 for a key that holds only a
   * timer, and then `stateBase` is not read), and its time.
   */
  def live(
      keyBase: AnyRef, keyOffset: Long, keyLength: Int,
      stateBase: AnyRef, stateOffset: Long, stateLength: Int,
      updateTime: Long): Unit

  /** A key removed since the map's parent was copied, which the parent has. */
  def removed(keyBase: AnyRef, keyOffset: Long, keyLength: Int): Unit
}
