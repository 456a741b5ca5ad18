package io.mapwithstate.state

import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  StateStoreConf,
  StateStoreId,
  StateStoreProvider
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.StructType

/**
 * Spark's real RocksDB state store provider for the suites, opened as the RocksDB backend
 * opens it (its default settings, column families on) on a checkpoint directory; a provider
 * opened again on the same directory reads the committed versions back, as after a restart.
 */
object RocksDBTestStores {

  def withProvider[T](root: String, keySchema: StructType, stateType: StructType)(
      f: StateStoreProvider => T): T = {
    val conf = new SQLConf
    StateBackend.RocksDB.Defaults.foreach { case (key, v) => conf.setConfString(key, v) }
    val provider = StateStoreProvider.create(StateBackend.RocksDB.ProviderClass)
    provider.init(StateStoreId(root, 0L, 0), keySchema, StoreBackedStateMap.valueSchema(stateType),
      NoPrefixKeyStateEncoderSpec(keySchema), StateBackend.RocksDB(Map.empty).usesColumnFamilies,
      new StateStoreConf(conf), TaskLocalRocksDB.hadoopConf(), false, None)
    try f(provider)
    finally provider.close()
  }
}
