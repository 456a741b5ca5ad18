package io.mapwithstate.state

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state.{NoPrefixKeyStateEncoderSpec, StateStore}
import org.apache.spark.sql.types.{DataType, IntegerType, LongType, StructType}

/**
 * The number of keys in a [[StoreBackedStateMap]]'s store, kept in a column family of the same
 * store and committed with the version it counts.
 *
 * Spark's RocksDB store counts its keys only with `trackTotalNumberOfRows`, which reads every
 * key before writing it, to know whether the write adds a key: a record's get, then that read
 * again before its put, and again before each write of the expiry index — a batch that
 * updates a key read RocksDB three to four times for one read of its own. The map already
 * reads a key before writing it, so it counts instead and the backend turns Spark's tracking
 * off ([[StateBackend.RocksDB.Defaults]]). The operators report this count as the state's rows.
 *
 * A store written before the count existed (or with it not kept) has no entry: the first task
 * to need the count counts the keys once by a scan, and commits the result.
 *
 * @param store a store opened with column families
 */
private[state] final class StoreKeyCount(store: StateStore) {
  import StoreKeyCount._

  // Registered in every task, as the expiry index is: the family's encoders live in the
  // provider that registers them.
  store.createColFamilyIfAbsent(ColumnFamily, KeySchema, ValueSchema,
    NoPrefixKeyStateEncoderSpec(KeySchema), false, true)

  private val toValue = FieldProjections.of(Seq(LongType))

  /** The committed count of the version this store was opened at, if the store has one. */
  def stored: Option[Long] = Option(store.get(Key, ColumnFamily)).map(_.getLong(0))

  /** Records `count` as this version's count (committed with it). */
  def write(count: Long): Unit = store.put(Key, toValue(InternalRow(count)), ColumnFamily)
}

private[state] object StoreKeyCount {

  /** The store's column family of the count (internal: not counted among the state's rows). */
  val ColumnFamily = "$mapwithstate_count"

  private val KeySchema = new StructType().add("__mapwithstate_count_key", IntegerType)
  private val ValueSchema = new StructType().add("__mapwithstate_key_count", LongType)

  private val Key: UnsafeRow =
    UnsafeProjection.create(Array[DataType](IntegerType)).apply(InternalRow(0)).copy()
}
