package io.mapwithstate.state

import io.mapwithstate.{MapWithStateConf, MapWithStateException}
import org.apache.hadoop.conf.Configuration
import org.apache.spark.SparkEnv
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperatorStateInfo
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  StateStore,
  StateStoreConf,
  StateStoreProviderId
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.StructType

/**
 * A state store whose partition state the mapWithState operators can work on directly: the
 * writable [[StateMap]] of the version being made. The StateStore API has no update times and
 * no timeouts, so the operators go through this map rather than `get`/`put`. The heap delta
 * chains serve one this way; Spark's RocksDB store is wrapped instead ([[StoreBackedStateMap]]).
 */
trait StateMapStore extends StateStore {

  /** The state of this store's next version: the committed version's, taking this task's writes. */
  def stateMap: StateMap
}

/**
 * Where the mapWithState operators keep a partition's state: the state store provider a
 * streaming query opens (with its store options and SQL settings), the map the operators work
 * on in one of its stores, and the map a batch replay builds in a task. Each backend opens its
 * own stores in a streaming query's tasks ([[openStore]]), where its provider keeps them on an
 * executor. The operators name a backend, never a concrete store class: [[StateBackend.of]]
 * picks it from the spec's `backend` name.
 */
sealed trait StateBackend extends Serializable {

  /** The name a StateSpec gives: `memory` or `rocksdb`; recorded in a query's checkpoint. */
  def name: String

  /** The StateStoreProvider class a streaming query's state comes from. */
  def providerClassName: String

  /** Options for that provider (StateStoreConf extra options). */
  def storeOptions: Map[String, String]

  /** Whether the provider's stores are opened with column families (for an index of the map). */
  def usesColumnFamilies: Boolean = false

  /** SQL settings for that provider, set in the query's own copy of the session conf. */
  def storeSqlConfs: Map[String, String] = Map.empty

  /** The store's value row for a state of `stateType`. */
  def storeValueSchema(stateType: StructType): StructType = stateType

  /** The state type whose store value row is `valueSchema`: [[storeValueSchema]] undone. */
  def stateTypeOf(valueSchema: StructType): StructType = valueSchema

  /**
   * The store of state partition `id` for one task of the micro-batch `info` says, at the
   * version before it, with the key schema and the state type; opened from the provider this
   * executor keeps loaded, or loaded from the checkpoint. `storeConf` is a copy of the
   * session's naming [[providerClassName]], with [[storeOptions]] and [[storeSqlConfs]]. A
   * store that writes a file on commit makes it durable before its commit returns, or, given
   * `closes`, hands that to them (the task waits for them before its output counts). Given
   * a `conversion` (the version was written in another state type: the first micro-batch
   * after a restart with a changed state schema), the store's state has every key converted
   * to `stateType`, and its commit writes every key in it.
   */
  def openStore(
      id: StateStoreProviderId,
      info: StatefulOperatorStateInfo,
      keySchema: StructType,
      stateType: StructType,
      storeConf: StateStoreConf,
      hadoopConf: Configuration,
      closes: Option[DeferredCloses],
      conversion: Option[StoredStateConversion] = None): StateStore

  /**
   * Runs the maintenance of `id`'s provider on this executor and unloads it, as a task does
   * when the store conf says to unload after each commit (`unloadOnCommit`).
   */
  def unloadStore(id: StateStoreProviderId): Unit

  /** The map the operators work on in `store`, a store of [[providerClassName]]. */
  def stateMapOf(store: StateStore, keySchema: StructType, stateType: StructType): StateMap

  /** A new, empty, writable map for one task of a batch replay, gone when the task ends. */
  def newBatchMap(keySchema: StructType, stateType: StructType): StateMap

  /** The most heap one partition's map may hold, for a map on the heap; run in the tasks. */
  def heapLimitBytes: Option[Long]

  /** Whether its maps read keys faster in the order of their bytes (a sorted store's). */
  def readsFasterInKeyOrder: Boolean = false
}

object StateBackend {

  val MemoryName = "memory"
  val RocksDBName = "rocksdb"
  val Names: Seq[String] = Seq(MemoryName, RocksDBName)

  /** The backend `name` (checked by the request builder) with the session's settings. */
  def of(name: String, conf: SQLConf): StateBackend = name match {
    case MemoryName =>
      Memory(MapWithStateConf.snapshotInterval(conf), MapWithStateConf.maxPartitionBytes(conf),
        MapWithStateConf.snapshotDeltaRatio(conf))
    case RocksDBName => RocksDB.fromConf(conf)
    case other => throw unknown(other)
  }

  /** `name` if it names a backend; otherwise an error naming the choices. */
  def checkName(name: String): String = if (Names.contains(name)) name else throw unknown(name)

  /** The unique id of partition `id`'s checkpoint at the version `info` starts from, if any. */
  private def checkpointId(info: StatefulOperatorStateInfo, id: StateStoreProviderId)
      : Option[String] = info.stateStoreCkptIds.map(_(id.storeId.partitionId).head)

  private def unknown(name: String): MapWithStateException = MapWithStateException(
    io.mapwithstate.ErrorCondition.InvalidArgument,
    s"backend must be one of ${Names.mkString("'", "', '", "'")}, got '$name'")

  /**
   * The delta-chain map on the heap ([[DeltaChainStateMap]]), made durable by
   * [[DeltaChainStateStoreProvider]]: a delta file per version and a snapshot every
   * `snapshotInterval` versions (for a large state, once the deltas since the last one hold
   * `snapshotDeltaRatio` of it). Each partition's map is held to `maxPartitionBytes` of heap
   * ([[HeapBudget]]; unset, the executor's default).
   */
  final case class Memory(
      snapshotInterval: Int,
      maxPartitionBytes: Option[Long] = None,
      snapshotDeltaRatio: Double = DeltaChainStateStoreProvider.DefaultSnapshotDeltaRatio)
    extends StateBackend {
    require(snapshotInterval > 0, s"snapshot interval must be positive: $snapshotInterval")

    override def name: String = MemoryName

    override def providerClassName: String = classOf[DeltaChainStateStoreProvider].getName

    override def storeOptions: Map[String, String] =
      Map(DeltaChainStateStoreProvider.SnapshotIntervalOption -> snapshotInterval.toString,
        DeltaChainStateStoreProvider.SnapshotDeltaRatioOption -> snapshotDeltaRatio.toString)

    /** The executor's provider of `id` from [[ExecutorStateProviders]], made there if new. */
    override def openStore(
        id: StateStoreProviderId,
        info: StatefulOperatorStateInfo,
        keySchema: StructType,
        stateType: StructType,
        storeConf: StateStoreConf,
        hadoopConf: Configuration,
        closes: Option[DeferredCloses],
        conversion: Option[StoredStateConversion]): StateStore = {
      val provider = ExecutorStateProviders.get(id, SparkEnv.get, StoreCoordinator.ofExecutor,
        storeConf.maintenanceInterval) {
        val made = new DeltaChainStateStoreProvider
        made.init(id.storeId, keySchema, storeValueSchema(stateType),
          NoPrefixKeyStateEncoderSpec(keySchema), useColumnFamilies = false, storeConf,
          hadoopConf, useMultipleValuesPerKey = false, stateSchemaProvider = None)
        made
      }
      conversion match {
        case Some(c) =>
          provider.getConvertedStore(info.storeVersion, checkpointId(info, id), closes, c)
        case None => provider.getStore(info.storeVersion, checkpointId(info, id), closes)
      }
    }

    override def unloadStore(id: StateStoreProviderId): Unit =
      ExecutorStateProviders.doMaintenanceAndUnload(id)

    override def stateMapOf(store: StateStore, keySchema: StructType, stateType: StructType)
        : StateMap = store match {
      case s: StateMapStore => s.stateMap
      case other => throw new IllegalStateException(
          "map_with_state needs a store that serves its state map, but got " +
            other.getClass.getName)
    }

    override def newBatchMap(keySchema: StructType, stateType: StructType): StateMap =
      StateMap.empty(keySchema.length, stateType.length)

    override def heapLimitBytes: Option[Long] =
      Some(maxPartitionBytes.getOrElse(HeapBudget.defaultLimitBytes))
  }

  /**
   * Spark's RocksDB state store (`RocksDBStateStoreProvider`) on each executor's local disk,
   * with the settings of [[RocksDB.Defaults]] unless the session says otherwise; the
   * operators work on it through a [[StoreBackedStateMap]]. A batch replay keeps each task's
   * state in a [[TaskLocalRocksDB]].
   *
   * @param sqlConfs Spark's RocksDB settings (`spark.sql.streaming.stateStore.rocksdb.*`)
   */
  final case class RocksDB(sqlConfs: Map[String, String]) extends StateBackend {

    override def name: String = RocksDBName

    override def providerClassName: String = RocksDB.ProviderClass

    override def storeOptions: Map[String, String] = Map.empty

    override def storeSqlConfs: Map[String, String] = sqlConfs

    /** The map's expiry index is a column family of the store ([[StoreExpiryIndex]]). */
    override def usesColumnFamilies: Boolean = true

    override def storeValueSchema(stateType: StructType): StructType =
      StoreBackedStateMap.valueSchema(stateType)

    override def stateTypeOf(valueSchema: StructType): StructType =
      StructType(valueSchema.fields.filterNot(_.name == StoreBackedStateMap.UpdateTimeColumn))

    /**
     * Spark's `StateStore.get`, which keeps the executor's providers loaded; its commits
     * upload their own files, so `closes` has nothing to take. A conversion rewrites every
     * value in the store before the operator sees it ([[StoreBackedStateMap.convertStored]]).
     */
    override def openStore(
        id: StateStoreProviderId,
        info: StatefulOperatorStateInfo,
        keySchema: StructType,
        stateType: StructType,
        storeConf: StateStoreConf,
        hadoopConf: Configuration,
        closes: Option[DeferredCloses],
        conversion: Option[StoredStateConversion]): StateStore = {
      val store = StateStore.get(id, keySchema, storeValueSchema(stateType),
        NoPrefixKeyStateEncoderSpec(keySchema), info.storeVersion, checkpointId(info, id),
        info.stateSchemaMetadata, usesColumnFamilies, storeConf, hadoopConf,
        useMultipleValuesPerKey = false)
      conversion.foreach { c =>
        val map = new StoreBackedStateMap(store, keySchema, stateType)
        map.convertStored(c)
        map.flush()
      }
      store
    }

    override def unloadStore(id: StateStoreProviderId): Unit =
      StateStore.doMaintenanceAndUnload(id)

    override def stateMapOf(store: StateStore, keySchema: StructType, stateType: StructType)
        : StateMap = new StoreBackedStateMap(store, keySchema, stateType)

    override def newBatchMap(keySchema: StructType, stateType: StructType): StateMap =
      TaskLocalRocksDB.open(keySchema, stateType, sqlConfs)

    override def heapLimitBytes: Option[Long] = None

    override def readsFasterInKeyOrder: Boolean = true
  }

  object RocksDB {
    val ConfPrefix = "spark.sql.streaming.stateStore.rocksdb."

    /** Whether a commit uploads the version's changes (a changelog) rather than a snapshot. */
    val ChangelogCheckpointing = s"${ConfPrefix}changelogCheckpointing.enabled"

    /** Spark's provider, named: it is `private[sql]`, so made by name as Spark makes it. */
    val ProviderClass = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

    /**
     * Unless the session sets them: changelog checkpointing (a commit uploads the version's
     * changes, not a snapshot); no counting by Spark's store (`trackTotalNumberOfRows`: a read
     * before every write; the map counts, see [[StoreKeyCount]]); and Spark's default, per
     * instance memory (`boundedMemoryUsage` false: each instance's write buffers and block
     * cache, its files' index and filter blocks held beside them, ~1.3 bytes a key). Bounded
     * memory at its default 500 MB makes a large state's reads slow down sharply (the files'
     * filter blocks then share one cache split in 64 shards, and a large file's filter does not
     * stay; see bench/README.md).
     */
    val Defaults: Map[String, String] = Map(
      ChangelogCheckpointing -> "true",
      s"${ConfPrefix}trackTotalNumberOfRows" -> "false",
      s"${ConfPrefix}boundedMemoryUsage" -> "false")

    /** The session's RocksDB settings over [[Defaults]]. */
    def fromConf(conf: SQLConf): RocksDB =
      RocksDB(Defaults ++ conf.getAllConfs.filter(_._1.startsWith(ConfPrefix)))
  }
}
