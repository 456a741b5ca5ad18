package io.mapwithstate.state

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  BoundReference,
  JoinedRow,
  SpecificInternalRow,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.execution.streaming.state.{RangeKeyScanStateEncoderSpec, StateStore}
import org.apache.spark.sql.types.{DataType, LongType, NullType, StructField, StructType}

/**
 * The expiry index of a [[StoreBackedStateMap]]: the keys that have a time (an update time for
 * idle timeouts, a `timeout_at` timer) ordered by it, kept in a column family of the same
 * state store, so that a batch finds its expiring keys by reading the front of the index
 * rather than scanning the state. It is Spark's own layout for transformWithState's timers
 * (`TimerStateImpl`'s timestamp-to-key column family): the index key is the time followed by
 * the state key's fields, under Spark's range-scan encoding of the time (big-endian, sign
 * flipped), so RocksDB's byte order is time order; the value is empty.
 *
 * The map keeps, in the same store version as the state (a commit checkpoints both together,
 * an abort rolls both back), an entry for every key with a time at that time or earlier: a
 * write that moves a key's time later (every update under an idle timeout) or removes the key
 * leaves its entry, and one that gives a key a time or an earlier one adds an entry. Writing
 * the index for a key's every update would cost two RocksDB writes a record (the old entry's
 * delete, the new one's put), doubling the cost of a large state's batches. An entry that
 * falls due is checked against the key (see [[StoreBackedStateMap.expiring]]), then moved to
 * the key's time or dropped: a key is read again at most once per time it falls due, and an
 * entry outlives its key at most until its time passes.
 *
 * An index is only kept while the operator has timeouts; a first entry at [[StateMap.NoTime]]
 * (a time no key is indexed at) says "complete": a version written without
 * the index being kept drops it, and the next task that needs the index rebuilds it with one
 * scan ([[rebuild]]). So a query that gains a timeout on a restart, or loses one and gains it
 * back, never misses a key.
 *
 * @param store     a store opened with column families
 * @param keySchema the state's key columns
 */
private[state] final class StoreExpiryIndex(store: StateStore, keySchema: StructType) {
  import StoreExpiryIndex._

  // The key's fields nullable: the "complete" mark's are null, whatever the key's columns say.
  private val indexKeySchema = StructType(StructField("__mapwithstate_time", LongType,
    nullable = false) +: keySchema.fields.map(_.copy(nullable = true)))
  private val toIndexKey = FieldProjections.create(indexKeySchema.fields.toSeq.zipWithIndex.map {
    case (f, i) => BoundReference(i, f.dataType, nullable = f.nullable)
  })
  // Only a batch that reads due keys needs it.
  private lazy val toStateKey = FieldProjections.of(keySchema.map(_.dataType), from = 1)
  private val time = new SpecificInternalRow(Seq(LongType))
  private val joined = new JoinedRow()
  private val completeMarker: UnsafeRow = {
    time.setLong(0, StateMap.NoTime)
    toIndexKey(joined(time, new SpecificInternalRow(keySchema.map(_.dataType)))).copy()
  }

  // Registered in every task: Spark's store keeps the column family's id in its checkpoint,
  // but the family's encoders only in the provider that registers them.
  store.createColFamilyIfAbsent(ColumnFamily, indexKeySchema, ValueSchema,
    RangeKeyScanStateEncoderSpec(indexKeySchema, Seq(0)), false, true)

  /** Whether the index holds every key with a time (it was kept by every version since built). */
  def isComplete: Boolean = store.get(completeMarker, ColumnFamily) != null

  /** Marks the index as not kept from now on: the next task needing it rebuilds it. */
  def markIncomplete(): Unit = store.remove(completeMarker, ColumnFamily)

  /** Empties the index and refills it from `entries` (a full scan of the state), complete. */
  def rebuild(entries: Iterator[StateEntry]): Unit = {
    val stale = store.iterator(ColumnFamily)
    val staleKeys =
      try stale.map(_.key.copy()).toArray
      finally stale.close()
    staleKeys.foreach(store.remove(_, ColumnFamily))
    entries.foreach(e => add(e.updateTime, e.key))
    store.put(completeMarker, EmptyValue, ColumnFamily)
  }

  /** Indexes `key` at `t` (nothing for [[StateMap.NoTime]]). */
  def add(t: Long, key: UnsafeRow): Unit =
    if (t != StateMap.NoTime) store.put(indexKey(t, key), EmptyValue, ColumnFamily)

  /** Drops the entry of `key` at `t` (nothing for [[StateMap.NoTime]]). */
  def remove(t: Long, key: UnsafeRow): Unit =
    if (t != StateMap.NoTime) store.remove(indexKey(t, key), ColumnFamily)

  /**
   * The keys indexed at a time strictly before `threshold`, in time order, with their times:
   * read from the front of the index, stopping at the first later entry, so the cost is the
   * keys returned. Copies, collected before returning: the caller may then write the store.
   */
  def due(threshold: Long): Array[(UnsafeRow, Long)] = {
    val out = ArrayBuffer.empty[(UnsafeRow, Long)]
    val entries = store.iterator(ColumnFamily)
    try {
      var more = true
      while (more && entries.hasNext) {
        val entry = entries.next().key
        val t = entry.getLong(0)
        if (t >= threshold) more = false
        else if (t != StateMap.NoTime) out += ((toStateKey(entry).copy(), t))
      }
    } finally entries.close()
    out.toArray
  }

  private def indexKey(t: Long, key: UnsafeRow): UnsafeRow = {
    time.setLong(0, t)
    toIndexKey(joined(time, key))
  }
}

private[state] object StoreExpiryIndex {

  /** The store's column family of the index (internal: not counted among the state's rows). */
  val ColumnFamily = "$mapwithstate_expiry"

  private val ValueSchema = new StructType().add("__empty", NullType)

  private val EmptyValue: UnsafeRow =
    UnsafeProjection.create(Array[DataType](NullType)).apply(InternalRow(null)).copy()
}
