package io.mapwithstate.state

import org.apache.spark.sql.execution.streaming.state.StateStore

/**
 * A state store whose partition state the mapWithState operators can work on directly: the
 * writable [[StateMap]] of the version being made. The StateStore API has no update times and
 * no timeouts, so the operators go through this map rather than `get`/`put`; any backend that
 * can serve a StateMap (the heap delta chains today) plugs in here.
 */
trait StateMapStore extends StateStore {

  /** The state of this store's next version: the committed version's, taking this task's writes. */
  def stateMap: StateMap
}

/**
 * Where the mapWithState operators keep a partition's state: the state store provider a
 * streaming query opens (with its store options), and the map a batch replay builds in a task.
 * The operators name a backend, never a concrete store class, so that another backend (RocksDB)
 * is one more case here.
 */
sealed trait StateBackend extends Serializable {

  /** The StateStoreProvider class a streaming query's state comes from; its stores are StateMapStores. */
  def providerClassName: String

  /** Options for that provider (StateStoreConf extra options). */
  def storeOptions: Map[String, String]

  /** A new, empty, writable map for one task of a batch replay. */
  def newBatchMap(keyNumFields: Int, stateNumFields: Int): StateMap
}

object StateBackend {

  /**
   * The delta-chain map on the heap ([[DeltaChainStateMap]]), made durable by
   * [[DeltaChainStateStoreProvider]]: a delta file per version and a snapshot every
   * `snapshotInterval` versions.
   */
  final case class Memory(snapshotInterval: Int) extends StateBackend {
    require(snapshotInterval > 0, s"snapshot interval must be positive: $snapshotInterval")

    override def providerClassName: String = classOf[DeltaChainStateStoreProvider].getName

    override def storeOptions: Map[String, String] =
      Map(DeltaChainStateStoreProvider.SnapshotIntervalOption -> snapshotInterval.toString)

    override def newBatchMap(keyNumFields: Int, stateNumFields: Int): StateMap =
      StateMap.empty(keyNumFields, stateNumFields)
  }
}
