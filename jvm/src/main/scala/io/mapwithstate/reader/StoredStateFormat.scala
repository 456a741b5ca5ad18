package io.mapwithstate.reader

import java.util.UUID

import io.mapwithstate.state.{
  CommitLineage,
  StateEntry,
  StateFileListing,
  StateMap,
  StateMapSerde,
  StoreBackedStateMap,
  TaskLocalRocksDB
}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{Path, PathFilter}
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  ReadStateStore,
  RecordType,
  StateStoreConf,
  StateStoreId,
  StateStoreProvider,
  StateStoreProviderId
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue

/**
 * How the state reader reads the state partitions of one state backend's checkpoint, in a task
 * of the read: which versions a partition's files hold, every key of a version, and the changes
 * of a range of batches, each with the key's one time ([[StateEntry]]: update time or timer;
 * no state for a key holding only a timer). The backends keep different files, so each is read
 * its own way — and each through the code that wrote it, which checks the files and fails
 * naming a damaged or missing one.
 */
sealed trait StoredStateFormat extends Serializable {

  /** Which versions of `checkpoint`'s partition `partition` have a snapshot or a change file. */
  def listing(checkpoint: QueryCheckpoint, partition: Int, hadoopConf: Configuration)
      : StateFileListing

  /** Every key of partition `partition` at state `version`; released when the task ends. */
  def state(checkpoint: QueryCheckpoint, partition: Int, version: Long,
      hadoopConf: Configuration): Iterator[StateEntry]

  /**
   * The changes of batches `first` to `last` in partition `partition`, batch after batch: per
   * batch, each key it changed once, with its state after the batch (null: the key has no
   * state after it, or only a timer), leaving out a key the batch added and removed.
   */
  def changes(checkpoint: QueryCheckpoint, partition: Int, first: Long, last: Long,
      hadoopConf: Configuration): Iterator[StoredStateFormat.Change]
}

object StoredStateFormat {

  /** A key's change in batch `batch`: its state after it, null when it has none. */
  final case class Change(batch: Long, key: UnsafeRow, state: UnsafeRow)

  /**
   * The heap backend's files: a version is loaded as its store loads it ([[CommitLineage]]:
   * the newest snapshot at or below it, then deltas; with checkpoint ids, of the lineage the
   * version's commit names), and a batch's changes are the records of its delta file (the
   * committed attempt's), which holds each key the batch changed once.
   */
  case object DeltaFiles extends StoredStateFormat {

    override def listing(checkpoint: QueryCheckpoint, partition: Int,
        hadoopConf: Configuration): StateFileListing =
      checkpoint.partitionFiles(partition, hadoopConf).list()

    override def state(checkpoint: QueryCheckpoint, partition: Int, version: Long,
        hadoopConf: Configuration): Iterator[StateEntry] =
      // Along the lineage its commit names, in a checkpoint with checkpoint ids.
      CommitLineage.load(checkpoint.partitionFiles(partition, hadoopConf),
        checkpoint.commitOf(version, partition), checkpoint.keySchema.length,
        checkpoint.valueSchema.length, StateMap.DefaultDeltaChainThreshold).map.getAll()

    override def changes(checkpoint: QueryCheckpoint, partition: Int, first: Long, last: Long,
        hadoopConf: Configuration): Iterator[Change] = {
      val files = checkpoint.partitionFiles(partition, hadoopConf)
      // One batch's delta at a time: a feed over many batches holds one delta in memory.
      Iterator.range(0, (last - first + 1).toInt).map(first + _).flatMap { batch =>
        val delta = files.deltaFile(batch + 1, checkpoint.commitOf(batch + 1, partition).id)
        files.read(delta)(in =>
          StateMapSerde.readDeltaRecords(in,
            checkpoint.keySchema.length, checkpoint.valueSchema.length))
          .iterator.map(record => Change(batch, record.key, record.state))
      }
    }
  }

  /**
   * The RocksDB backend's partitions, read through Spark's own provider as Spark's state data
   * source reads them: a version is a read-only store (`getReadStore`: the newest snapshot,
   * `<version>.zip`, at or below it, then the changelogs after it), and the changes of batches
   * come from their changelogs (Spark's change reader, `getStateStoreChangeDataReader`, made
   * through [[StreamingQueryGlue.rocksDBChanges]]; it needs the query to have written them:
   * changelog checkpointing, on by default for this backend). The store's value
   * is the state followed by the key's time ([[StoreBackedStateMap]]); only the default column
   * family holds the state (the others are the map's expiry index and key count).
   *
   * Under checkpoint format v2 (every Real-Time Mode query) each version's files are named by a
   * unique id that the batch's commit-log entry records ([[QueryCheckpoint.commitOf]]): a
   * version is opened by its id, and the changelogs of a range are those of the lineage of
   * its last version's id, as Spark's state data source reads them.
   *
   * A changelog holds every write of a batch in order, where the heap's delta holds each key
   * once: the changes of a batch are its last write of each key, and a key whose last write
   * removes it is a change only if it was there before the batch (as the heap writes a
   * removal only then) — known from the batches before it in the range, or else from the
   * store at the version the range starts from.
   *
   * @param storeConf the SQL settings the query's stores run with (as its offset log recorded
   *                  them, over the session's), the backend's RocksDB settings among them
   */
  final case class RocksDB(storeConf: Map[String, String]) extends StoredStateFormat {

    override def listing(checkpoint: QueryCheckpoint, partition: Int,
        hadoopConf: Configuration): StateFileListing = {
      val dir = checkpoint.partitionDirectory(partition)
      val fs = dir.getFileSystem(hadoopConf)
      val names =
        try fs.listStatus(dir,
            new PathFilter {
              override def accept(path: Path): Boolean = RocksDB.VersionFile.matches(path.getName)
            }).toSeq.map(_.getPath.getName)
        catch { case _: java.io.FileNotFoundException => Nil }
      def versions(suffix: String): Seq[Long] = names.collect {
        case RocksDB.VersionFile(version, `suffix`) => version.toLong
      }.filter(_ > 0).distinct.sorted
      StateFileListing(versions(RocksDB.ChangelogSuffix), versions(RocksDB.SnapshotSuffix))
    }

    /**
     * The store's settings for reading `checkpoint`: the query's, in the checkpoint's format.
     * The offset log does not record the format (Real-Time Mode sets it for its query alone),
     * and Spark's provider ignores a version's checkpoint id unless its settings say format v2.
     */
    private def sqlConf(checkpoint: QueryCheckpoint): SQLConf = {
      val conf = new SQLConf
      storeConf.foreach { case (k, v) => conf.setConfString(k, v) }
      conf.setConf(SQLConf.STATE_STORE_CHECKPOINT_FORMAT_VERSION,
        if (checkpoint.checkpointIds.nonEmpty) 2 else 1)
      conf
    }

    /** Spark's provider of the partition, with its Hadoop conf; closed when the task ends. */
    private def provider(checkpoint: QueryCheckpoint, partition: Int,
        hadoopConf: Configuration): (StateStoreProvider, Configuration) = {
      val id = StateStoreProviderId(StateStoreId(new Path(checkpoint.location, "state").toString,
          checkpoint.operatorId, partition), UUID.randomUUID())
      val conf = TaskLocalRocksDB.hadoopConf(hadoopConf)
      val opened = StateStoreProvider.createAndInit(id, checkpoint.keySchema,
        StoreBackedStateMap.valueSchema(checkpoint.valueSchema),
        NoPrefixKeyStateEncoderSpec(checkpoint.keySchema), useColumnFamilies = true,
        new StateStoreConf(sqlConf(checkpoint)), conf, useMultipleValuesPerKey = false,
        stateSchemaProvider = None)
      TaskContext.get().addTaskCompletionListener[Unit](_ => opened.close())
      (opened, conf)
    }

    /**
     * The read-only store of `version` from `provider` (by its checkpoint id, under format v2);
     * released before it closes.
     */
    private def readStore(provider: StateStoreProvider, checkpoint: QueryCheckpoint,
        partition: Int, version: Long): ReadStateStore = {
      val store = provider.getReadStore(version, checkpoint.commitOf(version, partition).id)
      TaskContext.get().addTaskCompletionListener[Unit](_ => store.abort())
      store
    }

    override def state(checkpoint: QueryCheckpoint, partition: Int, version: Long,
        hadoopConf: Configuration): Iterator[StateEntry] = {
      val entries = new StoreBackedStateMap.StoredEntries(checkpoint.valueSchema)
      readStore(provider(checkpoint, partition, hadoopConf)._1, checkpoint, partition, version)
        .iterator()
        .map(pair => entries(pair.key, pair.value))
    }

    override def changes(checkpoint: QueryCheckpoint, partition: Int, first: Long, last: Long,
        hadoopConf: Configuration): Iterator[Change] = {
      val (opened, conf) = provider(checkpoint, partition, hadoopConf)
      // A version loaded gives the provider the checkpoint's column family ids: the state
      // before the range (where a removal's key is looked up), or else its last version.
      val loaded = readStore(opened, checkpoint, partition, if (first > 0) first else last + 1)
      val before = Option.when(first > 0)(loaded)
      val reader = StreamingQueryGlue.rocksDBChanges(opened, checkpoint.keySchema,
        StoreBackedStateMap.valueSchema(checkpoint.valueSchema),
        new StateStoreConf(sqlConf(checkpoint)), conf, first + 1, last + 1,
        checkpoint.commitOf(last + 1, partition).id)
      TaskContext.get().addTaskCompletionListener[Unit](_ => reader.closeIfNeeded())
      val entries = new StoreBackedStateMap.StoredEntries(checkpoint.valueSchema)
      // Whether each key changed so far in the range has a value after its last change.
      val present = new java.util.HashMap[UnsafeRow, java.lang.Boolean]()
      def wasPresent(key: UnsafeRow): Boolean = Option(present.get(key)) match {
        case Some(known) => known
        case None => before.exists(_.get(key) != null)
      }
      val records = reader.buffered
      new Iterator[Iterator[Change]] {
        override def hasNext: Boolean = records.hasNext
        // One batch's writes, the last of each key in the order of their first.
        override def next(): Iterator[Change] = {
          val batch = records.head._4
          val lastWrites = new java.util.LinkedHashMap[UnsafeRow, UnsafeRow]()
          while (records.hasNext && records.head._4 == batch) {
            val (recordType, key, value, _) = records.next()
            val removed = recordType == RecordType.DELETE_RECORD
            lastWrites.put(key.copy(), if (removed) null else value.copy())
          }
          val changes = Seq.newBuilder[Change]
          lastWrites.forEach { (key, value) =>
            if (value != null) changes += Change(batch, key, entries(key, value).state)
            else if (wasPresent(key)) changes += Change(batch, key, null)
          }
          lastWrites.forEach((key, value) => present.put(key, value != null))
          changes.result().iterator
        }
      }.flatten
    }
  }

  object RocksDB {
    val SnapshotSuffix = "zip"
    val ChangelogSuffix = "changelog"

    /** A version's snapshot or changelog: `<version>.zip`, or `<version>_<unique id>.zip`. */
    private[reader] val VersionFile = """(\d+)(?:_[^.]+)?\.(zip|changelog)""".r

    /** The backend's files in `names`: snapshots, changelogs, and RocksDB's shared SST files. */
    def holdsItsFiles(names: Seq[String]): Boolean =
      names.exists(name => VersionFile.matches(name) || name == "SSTs")
  }
}
