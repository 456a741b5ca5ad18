package io.mapwithstate.state

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  StateStoreConf,
  StateStoreId,
  StateStoreProvider,
  StateStoreProviderId
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.StructType

/**
 * One state partition of a map_with_state operator as `repartition_state` reads and writes it,
 * on an executor: every key of a committed version with its state and its one time (update
 * time or timer, as [[StateEntry]] has them; a key holding only a timer has no state), read
 * from a partition of the old layout, and a new version of a partition of the new layout made
 * of such records without loading any version before it.
 *
 * Each backend keeps its own files, so each reads and writes its own way:
 *  - the heap backend loads the version as a query would ([[CommitLineage]]) and writes
 *    the new version as a snapshot file alone (a version with a snapshot needs no delta);
 *  - RocksDB opens Spark's provider on the partition, reads the version through a
 *    [[StoreBackedStateMap]], and writes the new one into an empty store at the version
 *    before it (Spark's `loadEmpty`, as its own repartitioning does), committed as a snapshot,
 *    with the expiry index and key count the map keeps.
 *
 * In a checkpoint with checkpoint ids (Spark's state checkpoint format v2, `checkpointIds`) a
 * version is read by the id its commit-log entry records, and the version written is named
 * by a new id, which [[PartitionStateRewrite.Written]] returns for the repartition's own
 * commit-log entry: the restarted query opens each new partition by it.
 *
 * Records cross the shuffle between the two as bytes ([[PartitionStateRewrite.Record]]).
 */
sealed trait PartitionStateRewrite extends Serializable {

  /** The operator's key columns and the state's fields (without a backend's own columns). */
  def keySchema: StructType
  def stateType: StructType

  /** Whether the checkpoint names its versions by checkpoint ids (format v2). */
  def checkpointIds: Boolean

  /**
   * The records of `version` of partition `partition` under `operatorDir`, the one with
   * checkpoint id `id` in a checkpoint with ids; resources are released when the task ends.
   */
  def read(operatorDir: String, partition: Int, version: Long, id: Option[String])
      : Iterator[PartitionStateRewrite.Record]

  /** Writes `records` as `version` of partition `partition`. */
  def write(operatorDir: String, partition: Int, version: Long,
      records: Iterator[PartitionStateRewrite.Record]): PartitionStateRewrite.Written
}

object PartitionStateRewrite {

  /** A key's bytes, its state's (null: the key holds only a timer) and its time. */
  final case class Record(key: Array[Byte], state: Array[Byte], time: Long)

  /** A version written: how many keys it holds, and its checkpoint id in a checkpoint with ids. */
  final case class Written(keys: Long, id: Option[String])

  private def record(entry: StateEntry): Record =
    Record(entry.key.getBytes, Option(entry.state).map(_.getBytes).orNull, entry.updateTime)

  private def row(bytes: Array[Byte], numFields: Int): UnsafeRow =
    if (bytes == null) null
    else {
      val r = new UnsafeRow(numFields)
      r.pointTo(bytes, bytes.length)
      r
    }

  /**
   * The heap backend's partitions: `<version>.delta` / `.snapshot` files, written compressed
   * with `compressionCodec` as the store provider writes them.
   */
  final case class Memory(
      keySchema: StructType,
      stateType: StructType,
      checkpointIds: Boolean,
      compressionCodec: String,
      hadoopConf: Map[String, String]) extends PartitionStateRewrite {

    private def files(operatorDir: String, partition: Int, readOnly: Boolean) =
      new StateCheckpointFiles(new Path(operatorDir, partition.toString), conf(hadoopConf),
        readOnly = readOnly, compressionCodec = Option.when(!readOnly)(compressionCodec))

    override def read(operatorDir: String, partition: Int, version: Long,
        id: Option[String]): Iterator[Record] = {
      val loaded = CommitLineage.load(files(operatorDir, partition, readOnly = true),
        CommitLineage.Commit(version, id), keySchema.length, stateType.length,
        StateMap.DefaultDeltaChainThreshold)
      loaded.map.getAll().map(record)
    }

    override def write(operatorDir: String, partition: Int, version: Long,
        records: Iterator[Record]): Written = {
      val map = StateMap.empty(keySchema.length, stateType.length)
      var count = 0L
      records.foreach { r =>
        map.put(row(r.key, keySchema.length), row(r.state, stateType.length), r.time)
        count += 1
      }
      val id = Option.when(checkpointIds)(java.util.UUID.randomUUID.toString)
      val out = files(operatorDir, partition, readOnly = false)
      out.write(out.snapshotFile(version, id))(StateMapSerde.writeSnapshot(map, _))
      Written(count, id)
    }
  }

  /**
   * The RocksDB backend's partitions, through Spark's provider with the store conf the query
   * runs with (`storeConf`: its SQL settings, as the checkpoint's offset log recorded them),
   * in the checkpoint's format (with ids or not, whatever the session running the rewrite
   * says: the offset log does not record it).
   */
  final case class RocksDB(
      keySchema: StructType,
      stateType: StructType,
      checkpointIds: Boolean,
      storeConf: Map[String, String]) extends PartitionStateRewrite {

    private def provider(operatorDir: String, partition: Int): StateStoreProvider = {
      val dir = new Path(operatorDir)
      val id = StateStoreProviderId(
        StateStoreId(dir.getParent.toString, dir.getName.toLong, partition),
        java.util.UUID.randomUUID())
      val sqlConf = new SQLConf
      storeConf.foreach { case (k, v) => sqlConf.setConfString(k, v) }
      sqlConf.setConf(SQLConf.STATE_STORE_CHECKPOINT_FORMAT_VERSION, if (checkpointIds) 2 else 1)
      StateStoreProvider.createAndInit(id, keySchema,
        StoreBackedStateMap.valueSchema(stateType), NoPrefixKeyStateEncoderSpec(keySchema),
        useColumnFamilies = true, new StateStoreConf(sqlConf), TaskLocalRocksDB.hadoopConf(),
        useMultipleValuesPerKey = false, stateSchemaProvider = None)
    }

    override def read(operatorDir: String, partition: Int, version: Long,
        id: Option[String]): Iterator[Record] = {
      val opened = provider(operatorDir, partition)
      val store =
        try opened.getStore(version, id, false, false)
        catch {
          case e: Throwable =>
            opened.close()
            throw e
        }
      TaskContext.get().addTaskCompletionListener[Unit] { _ =>
        try store.abort()
        finally opened.close()
      }
      new StoreBackedStateMap(store, keySchema, stateType).getAll().map(record)
    }

    override def write(operatorDir: String, partition: Int, version: Long,
        records: Iterator[Record]): Written = {
      val opened = provider(operatorDir, partition)
      try {
        // An empty store at the version before: its commit is `version`, a snapshot.
        val store = opened.getStore(version - 1, None, true, true)
        try {
          val map = new StoreBackedStateMap(store, keySchema, stateType)
          map.prepareExpiry()
          var count = 0L
          records.foreach { r =>
            map.put(row(r.key, keySchema.length), row(r.state, stateType.length), r.time)
            count += 1
          }
          map.flush()
          store.commit()
          Written(count, store.getStateStoreCheckpointInfo().stateStoreCkptId)
        } finally if (!store.hasCommitted) store.abort()
      } finally opened.close()
    }
  }

  private def conf(entries: Map[String, String]): Configuration = {
    val c = new Configuration(false)
    entries.foreach { case (k, v) => c.set(k, v) }
    c
  }
}
