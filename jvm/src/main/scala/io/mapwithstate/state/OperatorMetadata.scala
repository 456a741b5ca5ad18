package io.mapwithstate.state

import java.io.{InputStreamReader, OutputStreamWriter}
import java.nio.charset.StandardCharsets.UTF_8
import java.util.Properties

import io.mapwithstate.MapWithStateException
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, LocalFileSystem, Path}

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
 *    `timeout_at`.
 *
 * A checkpoint with partition state but no record predates it: heap state with update times.
 */
object OperatorMetadata {
  val FileName = "_mapwithstate"
  val BackendKey = "backend"
  val TimeSlotKey = "timeSlot"
  val UpdateTimes = "updated"
  val Timers = "timer"

  /**
   * On a query's (re)start, on the driver: records `backend` and `timeSlot` for the state in
   * `operatorDir`, or checks `backend` against the one recorded.
   */
  def recordOrCheck(operatorDir: Path, backend: String, timeSlot: String,
      hadoopConf: Configuration): Unit = {
    val fs = fileSystem(operatorDir, hadoopConf)
    val file = new Path(operatorDir, FileName)
    val recorded = read(fs, file).map(_.getProperty(BackendKey, StateBackend.MemoryName))
      .orElse {
        val hasState = fs.exists(operatorDir) && fs.listStatus(operatorDir)
          .exists(s => s.isDirectory && s.getPath.getName.forall(_.isDigit))
        if (hasState) Some(StateBackend.MemoryName) else None
      }
    recorded match {
      case Some(`backend`) =>
      case Some(other) => throw MapWithStateException(io.mapwithstate.ErrorCondition.BackendChanged,
          s"map_with_state: this query's checkpoint ($operatorDir) holds state of the '$other' " +
            s"backend, but the StateSpec asks for backend '$backend'; a restarted query cannot " +
            s"switch backends: keep backend('$other'), or start the query on a new checkpoint")
      case None =>
    }
    if (!fs.exists(file)) {
      val properties = new Properties()
      properties.setProperty(BackendKey, backend)
      properties.setProperty(TimeSlotKey, timeSlot)
      fs.mkdirs(operatorDir)
      val out = new OutputStreamWriter(fs.create(file, false), UTF_8)
      try properties.store(out, "map_with_state operator metadata")
      finally out.close()
    }
  }

  /** The recorded meaning of the per-key time: [[UpdateTimes]] unless recorded otherwise. */
  def timeSlot(operatorDir: Path, hadoopConf: Configuration): String = {
    val fs = fileSystem(operatorDir, hadoopConf)
    read(fs, new Path(operatorDir, FileName))
      .map(_.getProperty(TimeSlotKey, UpdateTimes)).getOrElse(UpdateTimes)
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
