package io.mapwithstate.state

import java.io.{InputStreamReader, OutputStreamWriter}
import java.nio.charset.StandardCharsets.UTF_8
import java.util.Properties

import io.mapwithstate.{ErrorCondition, MapWithStateException, PluginVersion}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, LocalFileSystem, Path}
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager

/**
 * What a map_with_state checkpoint records about its operator beyond Spark's state schema, in
 * `state/<operator id>/_mapwithstate` (Java properties), written on a query's first batch:
 *
 *  - `backend`: which state backend wrote the state. The backends' files cannot be read by each
 *    other, so a restart naming another backend is refused with an error saying so, rather than
 *    failing later on unreadable files (or starting from empty state);
 *  - `timeSlot`: what the one time the state map keeps per key means — `updated` (the batch
 *    time of its last update, which the idle timeout is measured from) or `timer` (its pending
 *    `timeout_at` timer) — so that a reader of the files can tell `last_updated` from
 *    `timeout_at`;
 *  - `pluginVersion`, `formatVersion` and `stateFileVersion`: the plugin that wrote it, the
 *    version of this layout ([[FormatVersion]]) and of the state files' encoding
 *    ([[StateMapSerde.FormatVersion]]). A checkpoint of a newer format than this code knows is
 *    refused, on restart and by the reader, naming both plugins' versions — rather than read
 *    wrong. A file without them predates them: format 1, state files of version 2 or older.
 *    Format 2 is format 1 with a state schema history ([[StateSchemaHistory]]): a checkpoint
 *    is of format 2 exactly while it has one, so that a plugin that knows no history refuses
 *    the state a restart converted, rather than read its rows in the first schema. Format 3
 *    is heap state with checkpoint ids (`checkpointIds=true`: Spark's state checkpoint format
 *    v2, as Real-Time Mode runs; files named by version and id, deltas of state file version
 *    3 that name their parent, see [[CommitLineage]]), with or without a history: a plugin
 *    that knows no ids would look for files named by version alone and find none, or older
 *    ones of another lineage, so it refuses the checkpoint instead.
 *
 * A checkpoint with partition state but no record predates it: heap state with update times.
 */
object OperatorMetadata {
  val FileName = "_mapwithstate"
  val BackendKey = "backend"
  val TimeSlotKey = "timeSlot"
  val UpdateTimes = "updated"
  val Timers = "timer"
  val PluginVersionKey = "pluginVersion"
  val FormatVersionKey = "formatVersion"
  val StateFileVersionKey = "stateFileVersion"
  val RepartitionBatchesKey = "repartitionBatches"
  val CheckpointIdsKey = "checkpointIds"

  /** The newest version of the checkpoint's layout and of this file that this code reads. */
  val FormatVersion: Int = 3

  /** The format of a checkpoint with a state schema history and no checkpoint ids. */
  val FormatWithSchemaHistory: Int = 2

  /**
   * The state file version of a checkpoint without checkpoint ids, whose files are all of it
   * (the deltas naming a parent, of [[StateMapSerde.FormatVersion]], come with ids).
   */
  private val StateFileVersionWithoutIds: Int = 2

  /** The format of a checkpoint without a state schema history, as every one starts. */
  val FormatWithoutSchemaHistory: Int = 1

  /**
   * On a query's (re)start, on the driver: records `backend` and `timeSlot` for the state in
   * `operatorDir`, or checks `backend` against the one recorded; and, once the heap state runs
   * with `checkpointIds` (Spark's state checkpoint format v2), that it has them, for good.
   */
  def recordOrCheck(operatorDir: Path, backend: String, timeSlot: String,
      hadoopConf: Configuration, checkpointIds: Boolean = false): Unit = {
    val fs = fileSystem(operatorDir, hadoopConf)
    val file = new Path(operatorDir, FileName)
    val metadata = read(fs, file)
    metadata.foreach(checkVersions(operatorDir, _))
    RepartitionMarker.checkFinished(operatorDir, hadoopConf)
    val recorded = metadata.map(_.getProperty(BackendKey, StateBackend.MemoryName))
      .orElse {
        val hasState = fs.exists(operatorDir) && fs.listStatus(operatorDir)
          .exists(s => s.isDirectory && s.getPath.getName.forall(_.isDigit))
        if (hasState) Some(StateBackend.MemoryName) else None
      }
    recorded match {
      case Some(`backend`) =>
      case Some(other) => throw MapWithStateException(ErrorCondition.BackendChanged,
          s"map_with_state: this query's checkpoint ($operatorDir) holds state of the '$other' " +
            s"backend, but the StateSpec asks for backend '$backend'; a restarted query cannot " +
            s"switch backends: keep backend('$other'), or start the query on a new checkpoint")
      case None =>
    }
    if (!fs.exists(file)) {
      val properties = new Properties()
      properties.setProperty(BackendKey, backend)
      properties.setProperty(TimeSlotKey, timeSlot)
      properties.setProperty(PluginVersionKey, PluginVersion.current)
      properties.setProperty(FormatVersionKey, FormatWithoutSchemaHistory.toString)
      properties.setProperty(StateFileVersionKey, StateFileVersionWithoutIds.toString)
      fs.mkdirs(operatorDir)
      val out = new OutputStreamWriter(fs.create(file, false), UTF_8)
      try properties.store(out, "map_with_state operator metadata")
      finally out.close()
    }
    if (checkpointIds && backend == StateBackend.MemoryName &&
      !hasCheckpointIds(read(fs, file))) {
      rewrite(operatorDir, hadoopConf) { p =>
        p.setProperty(CheckpointIdsKey, "true")
        p.setProperty(FormatVersionKey, FormatVersion.toString)
        p.setProperty(StateFileVersionKey, StateMapSerde.FormatVersion.toString)
      }
    }
  }

  private def hasCheckpointIds(metadata: Option[Properties]): Boolean =
    metadata.exists(_.getProperty(CheckpointIdsKey, "false").trim == "true")

  /**
   * For a reader of the state in `operatorDir`: the recorded meaning of the per-key time,
   * [[UpdateTimes]] unless recorded otherwise; refuses a checkpoint of a newer format.
   */
  def timeSlot(operatorDir: Path, hadoopConf: Configuration): String = {
    val fs = fileSystem(operatorDir, hadoopConf)
    read(fs, new Path(operatorDir, FileName)).map { metadata =>
      checkVersions(operatorDir, metadata)
      metadata.getProperty(TimeSlotKey, UpdateTimes)
    }.getOrElse(UpdateTimes)
  }

  /** The backend recorded for the state in `operatorDir` (the heap's when none is). */
  def backend(operatorDir: Path, hadoopConf: Configuration): String = {
    val metadata = read(fileSystem(operatorDir, hadoopConf), new Path(operatorDir, FileName))
    metadata.foreach(checkVersions(operatorDir, _))
    metadata.map(_.getProperty(BackendKey, StateBackend.MemoryName))
      .getOrElse(StateBackend.MemoryName)
  }

  /**
   * The micro-batches of the state in `operatorDir` that `repartition_state` made (none when it
   * never ran): batches that read no input and that the operator never ran, which the
   * operators' batch numbering skips (an idle timeout scans every `checkpoint_interval`-th
   * batch of the query's input, repartitioned or not).
   */
  def repartitionBatches(operatorDir: Path, hadoopConf: Configuration): Seq[Long] =
    read(fileSystem(operatorDir, hadoopConf), new Path(operatorDir, FileName)).toSeq
      .flatMap(_.getProperty(RepartitionBatchesKey, "").split(",").toSeq)
      .flatMap(_.trim.toLongOption)

  /** Records `batchId` among the [[repartitionBatches]] of `operatorDir` (once). */
  def recordRepartitionBatch(operatorDir: Path, batchId: Long, hadoopConf: Configuration)
      : Unit = updateRepartitionBatches(operatorDir, hadoopConf)(b => (b :+ batchId).distinct)

  /** Removes `batchId` from the [[repartitionBatches]] of `operatorDir` (an abandoned one). */
  def forgetRepartitionBatch(operatorDir: Path, batchId: Long, hadoopConf: Configuration)
      : Unit = updateRepartitionBatches(operatorDir, hadoopConf)(_.filterNot(_ == batchId))

  private def updateRepartitionBatches(operatorDir: Path, hadoopConf: Configuration)(
      update: Seq[Long] => Seq[Long]): Unit = {
    val batches = repartitionBatches(operatorDir, hadoopConf)
    val updated = update(batches)
    if (updated != batches) {
      rewrite(operatorDir, hadoopConf)(_.setProperty(RepartitionBatchesKey, updated.mkString(",")))
    }
  }

  /**
   * Records whether the state in `operatorDir` has a state schema history (called by
   * [[StateSchemaHistory.write]]): its format is then [[FormatWithSchemaHistory]], else
   * [[FormatWithoutSchemaHistory]] — unless it has checkpoint ids, whose format stays
   * [[FormatVersion]].
   */
  def recordSchemaHistory(operatorDir: Path, hasHistory: Boolean, hadoopConf: Configuration)
      : Unit = {
    val metadata = read(fileSystem(operatorDir, hadoopConf), new Path(operatorDir, FileName))
    val format =
      if (hasCheckpointIds(metadata)) FormatVersion
      else if (hasHistory) FormatWithSchemaHistory
      else FormatWithoutSchemaHistory
    val recorded = metadata.map(_.getProperty(FormatVersionKey, "1").trim)
    if (!recorded.contains(format.toString)) {
      rewrite(operatorDir, hadoopConf)(_.setProperty(FormatVersionKey, format.toString))
    }
  }

  /** Replaces the record of `operatorDir` (atomically) with its properties after `change`. */
  private def rewrite(operatorDir: Path, hadoopConf: Configuration)(
      change: Properties => Unit): Unit = {
    val file = new Path(operatorDir, FileName)
    val properties = read(fileSystem(operatorDir, hadoopConf), file).getOrElse(new Properties())
    change(properties)
    val out = CheckpointFileManager.create(operatorDir, hadoopConf)
      .createAtomic(file, overwriteIfPossible = true)
    val writer = new OutputStreamWriter(out, UTF_8)
    try properties.store(writer, "map_with_state operator metadata")
    catch {
      case e: Throwable =>
        out.cancel()
        throw e
    }
    writer.close()
  }

  /** Refuses the checkpoint `metadata` describes when it is of a format this code cannot read. */
  private def checkVersions(operatorDir: Path, metadata: Properties): Unit = {
    def version(key: String): Int = {
      val text = metadata.getProperty(key, "1").trim
      text.toIntOption.getOrElse(throw MapWithStateException(
          ErrorCondition.CheckpointUnreadable,
          s"map_with_state: the operator metadata of $operatorDir has $key=$text, not a number"))
    }
    val newer = Seq(
      (FormatVersionKey, version(FormatVersionKey), FormatVersion),
      (StateFileVersionKey, version(StateFileVersionKey), StateMapSerde.FormatVersion))
      .filter { case (_, recorded, known) => recorded > known }
    if (newer.nonEmpty) {
      val writer = metadata.getProperty(PluginVersionKey, "an unknown version")
      val formats = newer.map { case (key, recorded, known) =>
        s"$key $recorded (this plugin knows up to $known)"
      }.mkString(", ")
      throw MapWithStateException(ErrorCondition.CheckpointTooNew,
        s"map_with_state: the state in $operatorDir was written by mapwithstate $writer with " +
          s"$formats; this is mapwithstate ${PluginVersion.current}, which cannot read it. Run " +
          s"the query, or read its state, with mapwithstate $writer or later")
    }
  }

  private def read(fs: FileSystem, file: Path): Option[Properties] = {
    if (!fs.exists(file)) return None
    val properties = new Properties()
    val in = new InputStreamReader(fs.open(file), UTF_8)
    try properties.load(in)
    finally in.close()
    Some(properties)
  }

  /**
   * The file system of `path`; on a local disk the raw one, so that this small file gets no
   * Hadoop `.crc` side file, as every other state file.
   */
  private def fileSystem(path: Path, hadoopConf: Configuration): FileSystem =
    path.getFileSystem(hadoopConf) match {
      case local: LocalFileSystem => local.getRawFileSystem
      case other => other
    }
}
