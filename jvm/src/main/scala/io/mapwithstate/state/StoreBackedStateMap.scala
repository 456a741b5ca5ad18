package io.mapwithstate.state

import org.apache.spark.sql.catalyst.expressions.{BoundReference, JoinedRow, SpecificInternalRow, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state.StateStore
import org.apache.spark.sql.types.{LongType, StructType}

/**
 * A [[StateMap]] over a Spark [[StateStore]] (Spark's RocksDB store: state on the executor's
 * local disk, see [[StateBackend.RocksDB]]). The StateStore API has one value row per key and
 * no update times, so the store's value is the state's fields followed by the update time, a
 * BIGINT ([[StoreBackedStateMap.valueSchema]]); this map splits and joins them.
 *
 * Reads go to the store on every call: nothing is cached on the heap, which is the point of
 * the backend. [[getByTime]] and so [[expiring]] (idle timeouts and `timeout_at` timers, whose
 * time takes the update time's place) are a full scan of the store: no timer index yet.
 * Rows handed out are copies, so they stay valid however the store changes. The store takes
 * this map's writes directly; versions are the store's (a commit or abort by the operator), so
 * [[copy]] is not supported: the operators never call it.
 *
 * @param store     the store of the version being made, or a task-local one
 * @param stateType the state's fields (the store's value without its last column)
 */
final class StoreBackedStateMap(
    store: StateStore,
    override val keyNumFields: Int,
    stateType: StructType) extends StateMap {

  override val stateNumFields: Int = stateType.length

  private val toState = UnsafeProjection.create(stateType.fields.toSeq.zipWithIndex.map {
    case (f, i) => BoundReference(i, f.dataType, nullable = true)
  })
  private val toValue = UnsafeProjection.create(
    StoreBackedStateMap.valueSchema(stateType).fields.toSeq.zipWithIndex.map {
      case (f, i) => BoundReference(i, f.dataType, nullable = true)
    })
  private val time = new SpecificInternalRow(Seq(LongType))
  private val joined = new JoinedRow()

  override def get(key: UnsafeRow): UnsafeRow = {
    val value = store.get(key)
    if (value == null) null else toState(value).copy()
  }

  override def contains(key: UnsafeRow): Boolean = store.get(key) != null

  override def put(key: UnsafeRow, state: UnsafeRow, updateTime: Long): Unit = {
    time.setLong(0, updateTime)
    store.put(key, toValue(joined(state, time)))
  }

  override def remove(key: UnsafeRow): Unit = store.remove(key)

  override def getByTime(threshUpdatedTime: Long): Iterator[StateEntry] =
    entries().filter(_.updateTime < threshUpdatedTime)

  override def getAll(): Iterator[StateEntry] = entries()

  override def getTime(key: UnsafeRow): Long = {
    val value = store.get(key)
    if (value == null) StateMap.NoTime else value.getLong(stateNumFields)
  }

  /** Every entry, copied out of the store's iterator (which reuses its rows). */
  private def entries(): Iterator[StateEntry] = store.iterator().map { pair =>
    StateEntry(pair.key.copy(), toState(pair.value).copy(), pair.value.getLong(stateNumFields))
  }

  /**
   * Counted by a scan: Spark's RocksDB store reports its key count only in the metrics of a
   * committed version (the operators report those), not while a version is being written.
   */
  override def size: Int = {
    val all = store.iterator()
    try all.size finally all.close()
  }

  /**
   * Nothing on the heap: the store's native memory (bounded by Spark's RocksDB settings) is in
   * its metrics once a version is committed, which the streaming operator reports.
   */
  override def memoryUsedBytes: Long = 0L

  override def copy(): StateMap = throw new UnsupportedOperationException(
    "a state map over a StateStore has the store's versions; it cannot be copied")

  override def toString: String = s"StoreBackedStateMap[$store]"
}

object StoreBackedStateMap {

  /** The store's value column holding the update time, after the state's fields. */
  val UpdateTimeColumn = "__mapwithstate_update_time"

  /** The store's value: the state's fields, then the update time (micros). */
  def valueSchema(stateType: StructType): StructType =
    stateType.add(UpdateTimeColumn, LongType, nullable = false)
}
