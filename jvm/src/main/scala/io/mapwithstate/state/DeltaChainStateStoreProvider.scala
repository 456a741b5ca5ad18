package io.mapwithstate.state

import org.apache.hadoop.conf.Configuration
import org.apache.spark.internal.Logging
import org.apache.spark.sql.execution.streaming.state.{KeyStateEncoderSpec, StateSchemaProvider, StateStore, StateStoreConf, StateStoreId, StateStoreProvider}
import org.apache.spark.sql.types.StructType

/**
 * The state store of a streaming mapWithState: one partition's state, versioned per
 * micro-batch, held in memory as a [[DeltaChainStateMap]] and made durable in the query's
 * checkpoint.
 *
 * Why not Spark's HDFS-backed provider: it copies the whole map for every new version, so a
 * batch costs O(state). Here a new version is a new delta layer over the previous one
 * ([[StateMap.copy]]), so a batch costs O(records in the batch), and the committed version
 * before it stays intact for a retried task. A commit writes just that layer as the version's
 * delta file, and every `snapshotInterval` versions also a snapshot of the whole state (as
 * DStreams checkpoint their state every few batches), so that loading a version after a
 * restart reads the newest snapshot at or below it plus the deltas after it. Maintenance
 * deletes the files no retained version needs.
 *
 * Only the mapWithState operator uses this provider (it sets it in its own copy of the SQL
 * conf, see [[StateBackend.Memory]]); the operators reach the map through
 * [[StateMapStore.stateMap]], as the StateStore API has no notion of update times or timeouts.
 */
class DeltaChainStateStoreProvider extends StateStoreProvider with Logging {
  import DeltaChainStateStoreProvider._

  private var storeId: StateStoreId = _
  private var keyNumFields = 0
  private var stateNumFields = 0
  private var snapshotInterval = DefaultSnapshotInterval
  private var minVersionsToRetain = 100
  private var deltaChainThreshold = StateMap.DefaultDeltaChainThreshold
  @volatile private var files: StateCheckpointFiles = _

  /**
   * Committed versions kept in memory, newest last. They share layers, so keeping the previous
   * version costs only its top layer; it is kept for a task that retries the newest batch.
   */
  private val loaded = new java.util.TreeMap[java.lang.Long, DeltaChainStateMap]()

  override def init(
      stateStoreId: StateStoreId,
      keySchema: StructType,
      valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec,
      useColumnFamilies: Boolean,
      storeConf: StateStoreConf,
      hadoopConf: Configuration,
      useMultipleValuesPerKey: Boolean,
      stateSchemaProvider: Option[StateSchemaProvider]): Unit = {
    if (useColumnFamilies || useMultipleValuesPerKey) {
      throw new UnsupportedOperationException(
        s"${getClass.getSimpleName} holds one value per key in one column family")
    }
    storeId = stateStoreId
    keyNumFields = keySchema.length
    stateNumFields = valueSchema.length
    snapshotInterval = storeConf.extraOptions.get(SnapshotIntervalOption)
      .map(_.toInt).getOrElse(DefaultSnapshotInterval)
    deltaChainThreshold = storeConf.extraOptions.get(DeltaChainThresholdOption)
      .map(_.toInt).getOrElse(StateMap.DefaultDeltaChainThreshold)
    minVersionsToRetain = storeConf.minVersionsToRetain
    require(snapshotInterval > 0, s"snapshot interval must be positive: $snapshotInterval")
    files = new StateCheckpointFiles(stateStoreId.storeCheckpointLocation(), hadoopConf)
  }

  override def stateStoreId: StateStoreId = storeId

  override def getStore(
      version: Long,
      uniqueId: Option[String],
      forceSnapshotOnCommit: Boolean,
      loadEmpty: Boolean): StateStore = {
    if (uniqueId.isDefined) {
      throw new UnsupportedOperationException(
        "mapWithState state does not support state store checkpoint IDs " +
          "(spark.sql.streaming.stateStore.checkpointFormatVersion must be 1)")
    }
    if (version < 0) throw new IllegalArgumentException(s"negative state version $version")
    val base = if (loadEmpty) emptyMap() else load(version)
    new DeltaChainStateStore(this, storeId, version, base.copy())
  }

  /**
   * The committed state at `version`: from memory, or from the checkpoint files (on top of the
   * newest version in memory below it, when that is newer than any snapshot).
   */
  private[state] def load(version: Long): DeltaChainStateMap = synchronized {
    if (version == 0) return emptyMap()
    val inMemory = loaded.get(version)
    if (inMemory != null) return inMemory

    val memoryBase = Option(loaded.floorEntry(version)).map(e => (e.getKey.longValue, e.getValue))
    val map = StateVersionLoader.load(files, version, keyNumFields, stateNumFields,
      deltaChainThreshold, memoryBase)
    remember(version, map)
    map
  }

  /** Makes `store`'s map the committed state at `store.version + 1`, durably. */
  private[state] def commit(store: DeltaChainStateStore): Long = {
    val newVersion = store.version + 1
    val map = store.stateMap
    files.write(files.deltaFile(newVersion))(out => StateMapSerde.writeDelta(map, out))
    if (newVersion % snapshotInterval == 0) {
      files.write(files.snapshotFile(newVersion))(out => StateMapSerde.writeSnapshot(map, out))
    }
    synchronized(remember(newVersion, map))
    newVersion
  }

  private def remember(version: Long, map: DeltaChainStateMap): Unit = {
    loaded.put(version, map)
    while (loaded.size > VersionsInMemory) loaded.pollFirstEntry()
  }

  private def emptyMap(): DeltaChainStateMap =
    StateMap.empty(keyNumFields, stateNumFields, deltaChainThreshold)

  /**
   * Deletes the files that no version among the newest `minVersionsToRetain` needs: every file
   * older than the newest snapshot at or below the oldest retained version (that snapshot and
   * the deltas after it still rebuild every retained version).
   */
  override def doMaintenance(): Unit = {
    val fs = files
    if (fs == null) return
    val listing = fs.list()
    val oldestRetained = listing.latest - minVersionsToRetain + 1
    listing.snapshots.filter(_ <= oldestRetained).lastOption.foreach { base =>
      listing.deltas.filter(_ <= base).foreach(v => fs.delete(fs.deltaFile(v)))
      listing.snapshots.filter(_ < base).foreach(v => fs.delete(fs.snapshotFile(v)))
    }
  }

  override def close(): Unit = synchronized(loaded.clear())

  override def toString: String = s"DeltaChainStateStoreProvider[$storeId]"
}

object DeltaChainStateStoreProvider {
  /** Store option (StateStoreConf extra option): snapshot every n versions. */
  val SnapshotIntervalOption = "mapwithstate.snapshotInterval"

  /** Store option: the delta chain length at which a new version compacts the chain. */
  val DeltaChainThresholdOption = "mapwithstate.deltaChainThreshold"

  /** As DStreams checkpoint a mapWithState's state every 10 batches. */
  val DefaultSnapshotInterval = 10

  /** The newest committed version and the one before it, for a retried batch. */
  private val VersionsInMemory = 2
}
