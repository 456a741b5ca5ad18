package io.mapwithstate.reader

import java.io.FileNotFoundException

import scala.util.control.NonFatal

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import io.mapwithstate.execution.MapWithStateStreamExec
import io.mapwithstate.state.{
  CommitLineage,
  OperatorMetadata,
  StateBackend,
  StateCheckpointFiles,
  StateFileListing,
  StateSchemaHistory
}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.checkpointing.{OffsetSeqLog, OffsetSeqMetadata}
import org.apache.spark.sql.execution.streaming.state.StateSchemaCompatibilityChecker
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.StructType

/**
 * A streaming query's checkpoint as the state reader sees it: where the state of one of its
 * map_with_state operators is (`state/<operator id>/<partition>/`; a query with several has
 * one directory each), its key and state schemas (as Spark's state schema
 * check recorded them in `state/<operator id>/0/_metadata/schema` on the query's first batch),
 * its number of partitions, the last batch in the commit log (`commits/<batch id>`) and how
 * its state backend's files are read ([[StoredStateFormat]]; the backend is the one its
 * operator metadata records). The state's fields are [[valueSchema]], without a backend's own
 * columns.
 *
 * Only committed batches are readable: a micro-batch writes its state files before Spark
 * records it in the commit log, so files beyond the last commit may belong to a batch that is
 * still running or that failed and will be rerun. State version `v` is the state after batch
 * `v - 1`. Everything here reads, nothing writes; it runs on the driver, and the tasks of a
 * read get this (serializable) description and open the partitions' files themselves.
 *
 * In a checkpoint with checkpoint ids (Spark's state checkpoint format v2, as Real-Time Mode
 * writes it, on either backend) a committed version is the one with the id its batch's
 * commit-log entry records, and a read opens that version by it, never the files of an attempt
 * no commit names. The ids are read from the commit log only for the versions a read opens
 * ([[withCommitIdsOf]]), the one way both formats get them: `checkpointIds` holds those read,
 * by version, one per partition ([[commitOf]]).
 */
final case class QueryCheckpoint(
    location: String,
    operatorId: Long,
    numPartitions: Int,
    keySchema: StructType,
    valueSchema: StructType,
    lastCommittedBatch: Long,
    timeSlot: String = OperatorMetadata.UpdateTimes,
    schemaHistory: Seq[StateSchemaHistory.Entry] = Nil,
    checkpointIds: Map[Long, IndexedSeq[String]] = Map.empty,
    format: StoredStateFormat = StoredStateFormat.DeltaFiles) {

  /** State `version` of `partition` as its commit names it (its checkpoint id, if any). */
  def commitOf(version: Long, partition: Int): CommitLineage.Commit =
    CommitLineage.Commit(version, checkpointIds.get(version).map(_(partition)))

  /**
   * This checkpoint read in the state type of `version` ([[StateSchemaHistory]]: a restart with
   * a changed state schema converted the state from the version its entry names on), where
   * [[valueSchema]] is the first one, as Spark recorded it.
   */
  def inStateTypeOf(version: Long): QueryCheckpoint =
    copy(valueSchema = StateSchemaHistory.stateTypeAt(schemaHistory, version, valueSchema))

  /**
   * The state types this checkpoint has held from the one of `version` to its current one (the
   * newest), in order: one when no restart changed the schema since.
   */
  def stateTypesSince(version: Long): Seq[StructType] =
    StateSchemaHistory.stateTypeAt(schemaHistory, version, valueSchema) +:
      schemaHistory.filter(_.fromVersion > version).map(_.stateType)

  def stateDirectory: Path = new Path(new Path(location, "state"), operatorId.toString)

  def partitionDirectory(partition: Int): Path = new Path(stateDirectory, partition.toString)

  /**
   * This checkpoint with the checkpoint ids its commit log records for each of `versions` (the
   * entry of batch `version - 1`), for the versions a read opens: none for a checkpoint
   * without ids (format v1) or for version 0 (the empty state).
   */
  def withCommitIdsOf(versions: Seq[Long], hadoopConf: Configuration): QueryCheckpoint = {
    val read = versions.distinct.filter(v => v > 0 && !checkpointIds.contains(v)).flatMap {
      version =>
        QueryCheckpoint.committedIds(new Path(location), version - 1, operatorId, numPartitions,
          hadoopConf).map(version -> _)
    }
    copy(checkpointIds = checkpointIds ++ read)
  }

  /** A read-only view of one partition's heap state files. */
  def partitionFiles(partition: Int, hadoopConf: Configuration): StateCheckpointFiles =
    new StateCheckpointFiles(partitionDirectory(partition), hadoopConf, readOnly = true)

  /**
   * The state version holding the state after `batchId` (default: the last committed batch),
   * after checking that the batch is committed and that maintenance has not cleaned it up.
   */
  def versionOf(batchId: Option[Long], hadoopConf: Configuration): Long = {
    val batch = batchId.getOrElse(lastCommittedBatch)
    checkCommitted("batch_id", batch)
    lastRepartition(hadoopConf).filter(batch < _).foreach { repartition =>
      throw MapWithStateException(ErrorCondition.BatchUnavailable,
        s"batch_id: the state after batch $batch of $location was written in the " +
          s"partitions repartition_state replaced at batch $repartition; the oldest batch " +
          s"readable is $repartition")
    }
    val version = batch + 1
    val oldest = listings(hadoopConf).map(QueryCheckpoint.oldestLoadableVersion).max
    if (version < oldest) {
      throw MapWithStateException(ErrorCondition.BatchUnavailable,
        s"batch_id: the state after batch $batch of $location has " +
          s"been cleaned up by state maintenance; the oldest batch still readable is ${oldest - 1}")
    }
    version
  }

  /**
   * The batch range `[start, end]` of a change feed (end default: the last committed batch),
   * after checking that every batch in it is committed and still has its delta files.
   */
  def changeRange(start: Long, end: Option[Long], hadoopConf: Configuration): (Long, Long) = {
    val last = end.getOrElse(lastCommittedBatch)
    checkCommitted("start_batch", start)
    checkCommitted("end_batch", last)
    if (start > last) {
      throw MapWithStateException(ErrorCondition.InvalidArgument,
        s"start_batch $start is after end_batch $last")
    }
    lastRepartition(hadoopConf).filter(start <= _).foreach { repartition =>
      throw MapWithStateException(ErrorCondition.BatchUnavailable,
        s"start_batch: the changes of batch $start of $location were written in the " +
          s"partitions repartition_state replaced at batch $repartition (which changes no " +
          s"key); the oldest batch whose changes are readable is ${repartition + 1}")
    }
    // The first batch of a restart with a changed state schema wrote the whole state in the
    // new one (a snapshot): a range of changes holds batches of one schema, after it.
    schemaHistory.map(_.fromVersion).filter(v => start + 1 <= v && v <= last + 1).maxOption
      .foreach { converted =>
        throw MapWithStateException(ErrorCondition.BatchUnavailable,
          s"start_batch: batch ${converted - 1} of $location converted the state to another " +
            s"state schema (a restart with a changed state_schema), so the changes of batches " +
            s"$start to $last are not in one schema; the oldest batch whose changes are " +
            s"readable is $converted (read_state reads each batch in its own schema)")
      }
    val partitionListings = listings(hadoopConf)
    format match {
      case StoredStateFormat.RocksDB(_) if partitionListings.exists(_.deltas.isEmpty) =>
        throw MapWithStateException(ErrorCondition.BatchUnavailable,
          s"start_batch: the RocksDB state of $location has no changelog files (its query ran " +
            s"with ${StateBackend.RocksDB.ChangelogCheckpointing}=false), and a change feed " +
            "reads each batch's changes from its changelog; read_state reads the state " +
            "after each batch")
      case _ =>
    }
    val oldest = partitionListings.map(QueryCheckpoint.oldestDeltaVersion).max
    if (start + 1 < oldest) {
      throw MapWithStateException(ErrorCondition.BatchUnavailable,
        s"start_batch: the changes of batch $start of $location have " +
          s"been cleaned up by state maintenance; the oldest batch whose changes are still " +
          s"readable is ${oldest - 1}")
    }
    (start, last)
  }

  /**
   * The last committed batch that `repartition_state` made, if any: the state of the batches
   * before it is in another number of partitions than [[numPartitions]], so this reader,
   * reading these partitions, would miss or misplace keys of it.
   */
  private def lastRepartition(hadoopConf: Configuration): Option[Long] =
    OperatorMetadata.repartitionBatches(stateDirectory, hadoopConf)
      .filter(_ <= lastCommittedBatch).maxOption

  private def checkCommitted(argument: String, batch: Long): Unit = {
    if (batch < 0) throw MapWithStateException(ErrorCondition.InvalidArgument,
      s"$argument must be >= 0, got $batch")
    if (batch > lastCommittedBatch) {
      throw MapWithStateException(ErrorCondition.BatchUnavailable,
        s"$argument $batch is beyond the last committed batch " +
          s"($lastCommittedBatch) of $location")
    }
  }

  private def listings(hadoopConf: Configuration): Seq[StateFileListing] =
    (0 until numPartitions).map(p => format.listing(this, p, hadoopConf))
}

object QueryCheckpoint {

  /**
   * Reads what a state read needs from the checkpoint at `location`, of its map_with_state
   * operator `operatorId` (the one there is when None), failing with an error that names what
   * was found when it is not a checkpoint of a query with map_with_state, or holds several
   * and none was chosen.
   */
  def resolve(location: String, session: SparkSession,
      operatorId: Option[Long] = None): QueryCheckpoint = {
    val hadoopConf = session.sessionState.newHadoopConf()
    val (fs, root) = open(location, hadoopConf)
    def children(dir: Path): Seq[String] =
      (try fs.listStatus(dir).toSeq
      catch { case _: FileNotFoundException => Nil })
        .filter(_.getPath != dir).map(_.getPath.getName).filterNot(_.startsWith("."))
    def numbers(names: Seq[String]): Seq[Long] = names.flatMap(_.toLongOption).sorted

    val found = children(root)
    if (!found.contains("commits") && !found.contains("offsets")) {
      throw MapWithStateException(ErrorCondition.NotACheckpoint,
        s"checkpoint $location is not a streaming query's checkpoint: " +
          s"it has no commits/ or offsets/ (found ${describe(found)})")
    }
    val operators = numbers(children(new Path(root, "state")))
    val chosen = chooseOperator(location, operators, operatorId)
    val commits = numbers(children(new Path(root, "commits")))
    if (commits.isEmpty) {
      throw MapWithStateException(ErrorCondition.BatchUnavailable,
        s"checkpoint $location has no committed batch yet: its " +
          "query has not finished a micro-batch")
    }
    val stateDir = new Path(new Path(root, "state"), chosen.toString)
    val partitions = numbers(children(stateDir))
    if (partitions.isEmpty || partitions != partitions.indices.map(_.toLong)) {
      throw MapWithStateException(ErrorCondition.CheckpointUnreadable,
        s"the state of $location ($stateDir) should have partition " +
          s"directories 0 to n - 1, but has ${describe(partitions.map(_.toString))}")
    }
    val backend = OperatorMetadata.backend(stateDir, hadoopConf)
    // Files of another backend than the recorded one: better to say so than to report missing
    // deltas.
    val firstPartition = children(new Path(stateDir, "0")).filterNot(_ == "_metadata")
    val (expected, holdsItsFiles) = backend match {
      case StateBackend.RocksDBName =>
        ("<version>.zip, <version>.changelog, SSTs/",
          StoredStateFormat.RocksDB.holdsItsFiles(firstPartition))
      case _ =>
        ("<version>.delta, <version>.snapshot",
          firstPartition.exists(name =>
            name.endsWith(StateCheckpointFiles.DeltaSuffix) ||
            name.endsWith(StateCheckpointFiles.SnapshotSuffix)))
    }
    if (firstPartition.nonEmpty && !holdsItsFiles) {
      throw MapWithStateException(ErrorCondition.CheckpointUnreadable,
        s"the state files of $location (${describe(firstPartition)} " +
          s"in $stateDir/0) are not those of the $backend state backend its operator " +
          s"metadata records ($expected)")
    }
    // Spark's schema check writes it under the store location of partition 0.
    val (keySchema, storeValueSchema) =
      readSchema(fs, new Path(new Path(new Path(stateDir, "0"), "_metadata"), "schema"))
    val (valueSchema, format) = backend match {
      case StateBackend.RocksDBName =>
        val queryConf = recordedConf(session, root, commits.last)
        (StateBackend.RocksDB(Map.empty).stateTypeOf(storeValueSchema),
          StoredStateFormat.RocksDB(queryConf.getAllConfs ++
            StateBackend.RocksDB.fromConf(queryConf).storeSqlConfs +
            (SQLConf.STATE_STORE_PROVIDER_CLASS.key -> StateBackend.RocksDB.ProviderClass)))
      case _ => (storeValueSchema, StoredStateFormat.DeltaFiles)
    }
    QueryCheckpoint(root.toString, chosen, partitions.size, keySchema, valueSchema,
      commits.last, OperatorMetadata.timeSlot(stateDir, hadoopConf),
      StateSchemaHistory.read(stateDir, hadoopConf).filter(_.fromVersion <= commits.last + 1),
      format = format)
  }

  /**
   * The checkpoint ids of the state partitions of operator `operatorId` after `batch`, as the
   * batch's commit-log entry (`commits/<batch>` under `root`) records them (checkpoint format
   * v2), one per partition; None when it records none (format v1). An entry whose ids are not
   * one per partition of `numPartitions` is refused as damaged.
   */
  def committedIds(root: Path, batch: Long, operatorId: Long, numPartitions: Int,
      hadoopConf: Configuration): Option[IndexedSeq[String]] = {
    val file = new Path(new Path(root, "commits"), batch.toString)
    val ids =
      try {
        val in = file.getFileSystem(hadoopConf).open(file)
        try StreamingQueryGlue.committedStateIds(in, operatorId)
        finally in.close()
      } catch {
        case NonFatal(e) => throw new MapWithStateException(ErrorCondition.CheckpointUnreadable,
            s"cannot read the commit-log entry $file: ${MapWithStateException.describe(e)}", e)
      }
    ids.map { perPartition =>
      if (perPartition.length != numPartitions || perPartition.exists(_.isEmpty)) {
        throw MapWithStateException(ErrorCondition.CheckpointUnreadable,
          s"the commit-log entry $file records state checkpoint ids of " +
            s"${perPartition.length} partitions for operator $operatorId, which has " +
            s"$numPartitions")
      }
      perPartition.map(_.head).toIndexedSeq
    }
  }

  /**
   * The SQL settings the query of the checkpoint at `root` ran `batch` with: the session's,
   * under those its offset log recorded (its state store's among them).
   */
  private def recordedConf(session: SparkSession, root: Path, batch: Long): SQLConf = {
    val conf = session.sessionState.conf.clone()
    new OffsetSeqLog(session, new Path(root, "offsets").toString).get(batch)
      .flatMap(_.metadataOpt).foreach(OffsetSeqMetadata.setSessionConf(_, conf))
    conf
  }

  /**
   * The file system of the checkpoint at `location` and its qualified root, or an error saying
   * why there is none (an empty location, one that cannot be opened).
   */
  def open(location: String, hadoopConf: Configuration): (FileSystem, Path) = {
    if (location == null || location.isEmpty) {
      throw MapWithStateException(ErrorCondition.InvalidArgument,
        "checkpoint is empty: the checkpointLocation of a streaming " +
          "query that ran map_with_state")
    }
    try {
      val path = new Path(location)
      val fs = path.getFileSystem(hadoopConf)
      (fs, fs.makeQualified(path))
    } catch {
      case NonFatal(e) => throw new MapWithStateException(ErrorCondition.CheckpointUnreadable,
          s"checkpoint $location cannot be opened: ${e.getMessage}", e)
    }
  }

  /**
   * Which of the checkpoint's stateful `operators` (the ids under `state/`) to read:
   * `requested`, which must be one of map_with_state's (ids from
   * `MapWithStateStreamExec.FirstOperatorId` on, Spark's own being below), or else the one
   * map_with_state there is. A query with several has no default: reading the wrong one would
   * give plausible rows of another state.
   */
  private def chooseOperator(location: String, operators: Seq[Long],
      requested: Option[Long]): Long = {
    val ours = operators.filter(_ >= MapWithStateStreamExec.FirstOperatorId)
    def listed = ours.mkString(", ")
    requested match {
      case Some(id) if ours.contains(id) => id
      case Some(id) if ours.isEmpty =>
        throw MapWithStateException(ErrorCondition.NotACheckpoint,
          s"operator_id $id: checkpoint $location holds no " +
            "map_with_state state " + (
              if (operators.isEmpty) "(a stateless query?)"
              else s"(only the state of Spark's stateful operators ${operators.mkString(", ")})"))
      case Some(id) =>
        throw MapWithStateException(ErrorCondition.NotACheckpoint,
          s"operator_id $id is not a map_with_state operator of " +
            s"checkpoint $location" + (if (operators.contains(id)) " (it is one of Spark's " +
                                         "stateful operators)"
                                       else "") + s"; its map_with_state operators are $listed")
      case None if ours.size == 1 => ours.head
      case None if ours.isEmpty =>
        val first = MapWithStateStreamExec.FirstOperatorId
        throw MapWithStateException(ErrorCondition.NotACheckpoint,
          s"checkpoint $location is not a map_with_state checkpoint: " +
            (if (operators.isEmpty) "it holds no state (a stateless query?)"
             else s"it holds the state of stateful operators ${operators.mkString(", ")}, not of " +
               s"map_with_state (operator $first)"))
      case None =>
        throw MapWithStateException(ErrorCondition.AmbiguousOperator,
          s"checkpoint $location holds the state of ${ours.size} " +
            s"map_with_state operators ($listed): pass operator_id to choose one (a query's " +
            "operators are numbered from 1000 in its plan, from the sources on: in a chain the " +
            "first one, in a union the left side's first)")
    }
  }

  /** The key and state schemas recorded by Spark's state schema check (its format and reader). */
  private def readSchema(fs: FileSystem, file: Path): (StructType, StructType) = {
    if (!fs.exists(file)) {
      throw MapWithStateException(ErrorCondition.CheckpointUnreadable,
        s"the state schema file $file is missing: the checkpoint was " +
          "not written by map_with_state, or is damaged")
    }
    val schemas =
      try StateSchemaCompatibilityChecker.readSchemaFile(fs.open(file))
      catch {
        case NonFatal(e) => throw new MapWithStateException(ErrorCondition.CheckpointUnreadable,
            s"cannot read the state schema file $file: ${MapWithStateException.describe(e)}", e)
      }
    schemas match {
      case Seq(schema) => (schema.keySchema, schema.valueSchema)
      case other => throw MapWithStateException(ErrorCondition.CheckpointUnreadable,
          s"the state schema file $file holds " +
            s"${other.size} column families (${other.map(_.colFamilyName).mkString(", ")}); " +
            "map_with_state state has exactly one")
    }
  }

  /**
   * The oldest version the files of a partition can still rebuild: the oldest snapshot, or
   * version 1 while the first delta is still there. (A gap in the deltas after it is found by
   * the load, which names the missing file.)
   */
  private def oldestLoadableVersion(listing: StateFileListing): Long = {
    val deltas = (listing.deltas ++ listing.deltasWithIds.map(_.version)).distinct.sorted
    (listing.snapshots ++ listing.snapshotsWithIds.map(_.version) ++
      deltas.headOption.filter(_ == 1L)).minOption.getOrElse(1L)
  }

  /**
   * The oldest version from which a partition's deltas (of any id) run without a gap to its
   * newest.
   */
  private def oldestDeltaVersion(listing: StateFileListing): Long = {
    val deltas = (listing.deltas ++ listing.deltasWithIds.map(_.version)).distinct.sorted
    deltas.reverse.zipWithIndex
      .takeWhile { case (v, i) => v == deltas.last - i }
      .lastOption.map(_._1).getOrElse(1L)
  }

  private def describe(names: Seq[String]): String =
    if (names.isEmpty) "nothing"
    else names.sorted.take(10).mkString(", ") +
      (if (names.size > 10) s" and ${names.size - 10} more" else "")
}
