package io.mapwithstate.state

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{
  KeyStateEncoderSpec,
  StateStore,
  StateStoreCheckpointInfo,
  StateStoreId,
  StateStoreIterator,
  StateStoreMetrics,
  UnsafeRowPair
}
import org.apache.spark.sql.types.StructType

/**
 * One task's handle on the next version of a partition's state: a writable
 * [[DeltaChainStateMap]] layered over the committed `version`, which [[commit]] makes
 * `version + 1` and [[abort]] drops (the committed version underneath is untouched, so a
 * retried task starts from exactly the same state). Its commit's delta file is made durable
 * in place, or by `closes` when its task defers them. A store whose committed version is in
 * another state schema (`snapshotOnCommit`: its map holds every key, converted) commits a
 * snapshot instead, so that no version of the new schema rests on a file of the old one.
 *
 * In a checkpoint with checkpoint ids, the store was opened at the version whose id is
 * `baseId` (None: version 0, or a version named by its number alone) and commits under
 * `newId`, which [[getStateStoreCheckpointInfo]] reports for the batch's commit-log entry.
 *
 * The StateStore methods give the state rows without update times, for Spark's generic
 * tooling; the mapWithState operators work on [[stateMap]] directly ([[StateMapStore]]). Rows
 * put through the generic [[put]] get update time 0.
 */
class DeltaChainStateStore private[state] (
    provider: DeltaChainStateStoreProvider,
    override val id: StateStoreId,
    override val version: Long,
    override val stateMap: DeltaChainStateMap,
    private[state] val closes: Option[DeferredCloses],
    private[state] val baseId: Option[String] = None,
    private[state] val newId: Option[String] = None,
    private[state] val snapshotOnCommit: Boolean = false) extends StateMapStore {

  private sealed trait Status
  private case object Updating extends Status
  private case object Committed extends Status
  private case object Aborted extends Status
  private var status: Status = Updating
  private var committedVersion = -1L

  override def get(key: UnsafeRow, colFamilyName: String): UnsafeRow = stateMap.get(key)

  override def put(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit = {
    checkUpdating("put")
    stateMap.put(key, value, 0L)
  }

  override def remove(key: UnsafeRow, colFamilyName: String): Unit = {
    checkUpdating("remove")
    stateMap.remove(key)
  }

  override def iterator(colFamilyName: String): StateStoreIterator[UnsafeRowPair] = {
    val pair = new UnsafeRowPair()
    // A StateStore has a value row for every key: keys holding only a timer are left out.
    new StateStoreIterator(
      stateMap.getAll().filter(_.state != null).map(e => pair.withRows(e.key, e.state)))
  }

  override def commit(): Long = {
    checkUpdating("commit")
    committedVersion = provider.commit(this)
    status = Committed
    committedVersion
  }

  override def abort(): Unit = if (status != Committed) status = Aborted

  override def release(): Unit = ()

  override def hasCommitted: Boolean = status == Committed

  override def metrics: StateStoreMetrics =
    StateStoreMetrics(stateMap.size.toLong, stateMap.memoryUsedBytes, Map.empty, Map.empty)

  override def getStateStoreCheckpointInfo(): StateStoreCheckpointInfo =
    StateStoreCheckpointInfo(id.partitionId, version + 1, newId, baseId)

  override def allColumnFamilyNames: Set[String] = Set(StateStore.DEFAULT_COL_FAMILY_NAME)

  private def checkUpdating(operation: String): Unit = status match {
    case Updating =>
    case other => throw new IllegalStateException(
        s"cannot $operation version ${version + 1} of $id: the store is " +
          other.toString.toLowerCase)
  }

  private def unsupported(operation: String): Nothing =
    throw new UnsupportedOperationException(
      s"$operation is not supported by mapWithState's state store")

  override def valuesIterator(key: UnsafeRow, colFamilyName: String): Iterator[UnsafeRow] =
    Option(get(key, colFamilyName)).iterator

  override def prefixScan(prefixKey: UnsafeRow, colFamilyName: String)
      : StateStoreIterator[UnsafeRowPair] = unsupported("prefixScan")

  override def prefixScanWithMultiValues(prefixKey: UnsafeRow, colFamilyName: String)
      : StateStoreIterator[UnsafeRowPair] = unsupported("prefixScanWithMultiValues")

  override def iteratorWithMultiValues(colFamilyName: String)
      : StateStoreIterator[UnsafeRowPair] = unsupported("iteratorWithMultiValues")

  override def removeColFamilyIfExists(colFamilyName: String): Boolean =
    unsupported("removeColFamilyIfExists")

  override def createColFamilyIfAbsent(
      colFamilyName: String,
      keySchema: StructType,
      valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec,
      useMultipleValuesPerKey: Boolean,
      isInternal: Boolean): Unit = unsupported("createColFamilyIfAbsent")

  override def putList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit =
    unsupported("putList")

  override def merge(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit =
    unsupported("merge")

  override def mergeList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit =
    unsupported("mergeList")

  override def toString: String = s"DeltaChainStateStore[$id, version $version, $status]"
}
