package io.mapwithstate.state

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.array.ByteArrayMethods

/**
 * What a writable [[DeltaChainStateMap]]'s last lookup of a key found, so that a write of the
 * same key right after it, as in a read-modify-write of one record (get, compute, put), costs
 * no second lookup, and a timer call's `getTime` right after its get reads the time where the
 * get found it.
 *
 * It holds the last get's key bytes (copied, since callers reuse their key buffers), hash,
 * top-layer probe result, whether a lower layer has the key live, and where its time is (a
 * layer and slot, or none), valid until the next write: lower layers are read-only, so only a
 * write can make it stale. And, from [[locate]], where the key of the write under way is.
 */
private[state] final class KeyLookupMemo {
  import KeyLookupMemo._

  private var key = new Array[Byte](16)

  /** The remembered key's length; -1: nothing remembered. */
  private var keyLength = -1
  private var hash = 0
  private var probe = 0
  private var inParent = false
  private var timeLayer: RowHashMap = null
  private var timeSlot = -1

  /** The write under way's key hash, from [[locate]]. */
  var writeHash = 0

  /** The write under way's top-layer probe result, from [[locate]]. */
  var writeProbe = 0

  /** Whether a lower layer has the write under way's key live, or [[UnknownInParent]]. */
  var writeInParent: Int = UnknownInParent

  /** Remembers what a get of these key bytes found. */
  def remember(
      base: AnyRef, offset: Long, length: Int, hash: Int, probe: Int, inParent: Boolean,
      timeLayer: RowHashMap, timeSlot: Int): Unit = {
    if (key.length < length) key = new Array[Byte](math.max(length, 2 * key.length))
    RowHashMap.copyBytes(base, offset, key, Platform.BYTE_ARRAY_OFFSET, length)
    keyLength = length
    this.hash = hash
    this.probe = probe
    this.inParent = inParent
    this.timeLayer = timeLayer
    this.timeSlot = timeSlot
  }

  /** Forgets the last get: a write follows, or bytes were written without a lookup. */
  def forget(): Unit = keyLength = -1

  /** Whether the last get was of these key bytes, with no write since. */
  def holds(base: AnyRef, offset: Long, length: Int): Boolean =
    keyLength == length &&
    ByteArrayMethods.arrayEquals(key, Platform.BYTE_ARRAY_OFFSET, base, offset, length)

  /** The time the last get found, when [[holds]] is true: [[StateMap.NoTime]] if none. */
  def recalledTime: Long =
    if (timeLayer == null) StateMap.NoTime else timeLayer.updateTimeAt(timeSlot)

  /**
   * Sets the write fields for a write of these key bytes into `top` (a chain's top layer),
   * from the last get when it was of them, then forgets it: a write follows.
   */
  def locate(base: AnyRef, offset: Long, length: Int, top: RowHashMap): Unit = {
    if (holds(base, offset, length)) {
      writeHash = hash
      writeProbe = probe
      writeInParent = if (inParent) InParent else NotInParent
    } else {
      writeHash = DeltaChainStateMap.hashOf(base, offset, length)
      writeProbe = top.probe(writeHash, base, offset, length)
      writeInParent = UnknownInParent
    }
    forget()
  }
}

private[state] object KeyLookupMemo {
  // Whether a lower layer has a key live: not looked up yet, or what the lookup found.
  val UnknownInParent = -1
  val NotInParent = 0
  val InParent = 1
}
