package io.mapwithstate.state

import java.io.{InputStreamReader, OutputStreamWriter}
import java.nio.charset.StandardCharsets.UTF_8
import java.util.Properties

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, LocalFileSystem, Path}

/**
 * What a map_with_state checkpoint records about its operator beyond Spark's state schema, in
 * `state/<operator id>/_mapwithstate` (Java properties): what the one time the state map keeps
 * per key means — `updated` (the batch time of the key's last update, which the idle timeout is
 * measured from) or `timer` (the key's pending `timeout_at` timer) — so that a reader of the
 * files can tell `last_updated` from `timeout_at`. Written once, when a query first plans its
 * state; a checkpoint without it predates timers and holds update times.
 */
object OperatorMetadata {
  val FileName = "_mapwithstate"
  val TimeSlotKey = "timeSlot"
  val UpdateTimes = "updated"
  val Timers = "timer"

  /** Records `timeSlot` under `stateDir` unless a record is there already. */
  def writeIfAbsent(stateDir: Path, hadoopConf: Configuration, timeSlot: String): Unit = {
    val file = new Path(stateDir, FileName)
    val fs = fileSystem(file, hadoopConf)
    if (fs.exists(file)) return
    val properties = new Properties()
    properties.setProperty(TimeSlotKey, timeSlot)
    fs.mkdirs(stateDir)
    val out = new OutputStreamWriter(fs.create(file, false), UTF_8)
    try properties.store(out, "map_with_state operator metadata") finally out.close()
  }

  /**
   * The file system of `path`; on a local disk the raw one, so that these small files get no
   * Hadoop `.crc` side files, as every other state file.
   */
  def fileSystem(path: Path, hadoopConf: Configuration): FileSystem =
    path.getFileSystem(hadoopConf) match {
      case local: LocalFileSystem => local.getRawFileSystem
      case other => other
    }

  /** The recorded meaning of the per-key time: [[UpdateTimes]] unless recorded otherwise. */
  def timeSlot(stateDir: Path, hadoopConf: Configuration): String = {
    val file = new Path(stateDir, FileName)
    val fs = fileSystem(file, hadoopConf)
    if (!fs.exists(file)) return UpdateTimes
    val properties = new Properties()
    val in = new InputStreamReader(fs.open(file), UTF_8)
    try properties.load(in) finally in.close()
    properties.getProperty(TimeSlotKey, UpdateTimes)
  }
}
