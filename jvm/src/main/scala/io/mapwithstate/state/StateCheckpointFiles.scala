package io.mapwithstate.state

import java.io.{BufferedInputStream, BufferedOutputStream, DataInputStream, DataOutputStream, IOException}

import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{Path, PathFilter}
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager

/**
 * The files of one state store partition in a query's checkpoint: `<version>.delta` holds the
 * writes of the batch that made `version` (a [[StateMapSerde]] delta over `version - 1`), and
 * `<version>.snapshot` the whole state at `version`.
 *
 * Writes are atomic (a file appears complete or not at all) and may overwrite, because a batch
 * that is re-run after a failure rewrites the same version. Every read or write error names
 * the file: a stateful query that cannot load its state must say which file is at fault.
 *
 * On the local file system the files go through [[LocalCheckpointFileManager]], which forks no
 * process and writes no `.crc` side files (the files carry their own CRCs); elsewhere (HDFS,
 * object stores) through the `CheckpointFileManager` Spark would use for the query.
 *
 * A `readOnly` instance (the state reader's) never creates the directory and refuses writes
 * and deletes: reading a checkpoint must leave it exactly as it was.
 */
class StateCheckpointFiles(
    val directory: Path,
    hadoopConf: Configuration,
    readOnly: Boolean = false) {
  import StateCheckpointFiles._

  private val fileManager: CheckpointFileManager = {
    val local = new LocalCheckpointFileManager(directory, hadoopConf)
    if (local.handlesLocally(directory)) local else CheckpointFileManager.create(directory, hadoopConf)
  }
  if (!readOnly) fileManager.mkdirs(directory)

  def deltaFile(version: Long): Path = new Path(directory, s"$version$DeltaSuffix")

  def snapshotFile(version: Long): Path = new Path(directory, s"$version$SnapshotSuffix")

  def exists(path: Path): Boolean = fileManager.exists(path)

  /**
   * Writes `path` atomically with `body` and returns its size in bytes (capped at
   * Int.MaxValue); a failed write leaves no file behind. With `closes`, the file's bytes are
   * written here but made durable and visible (its close: fsync and rename) in the background,
   * and `closes.awaitAll()` says when, or why not.
   */
  def write(path: Path, closes: Option[DeferredCloses] = None)(
      body: DataOutputStream => Unit): Long = {
    checkWritable(path)
    val raw = fileManager.createAtomic(path, true)
    def failed(e: Throwable): IOException = {
      raw.cancel()
      writeFailure(path, e)
    }
    try {
      val out = new DataOutputStream(new BufferedOutputStream(raw, BufferSize))
      body(out)
      out.flush()
      closes match {
        case None => raw.close()
        case Some(deferred) =>
          deferred.defer(path) { () =>
            try raw.close() catch { case NonFatal(e) => throw failed(e) }
          }
      }
      out.size().toLong
    } catch {
      case NonFatal(e) => throw failed(e)
    }
  }

  /** Reads `path` with `body`; an error says which file could not be read and why. */
  def read[T](path: Path)(body: DataInputStream => T): T = {
    val in = try fileManager.open(path) catch {
      case NonFatal(e) =>
        throw new IOException(s"cannot open mapWithState state file $path: ${e.getMessage}", e)
    }
    try body(new DataInputStream(new BufferedInputStream(in, BufferSize)))
    catch {
      case NonFatal(e) =>
        throw new IOException(s"cannot load mapWithState state file $path: ${e.getMessage}", e)
    } finally in.close()
  }

  /** The versions that have a delta file, and those that have a snapshot file. */
  def list(): StateFileListing = {
    val statuses = fileManager.list(directory, new PathFilter {
      override def accept(path: Path): Boolean =
        path.getName.endsWith(DeltaSuffix) || path.getName.endsWith(SnapshotSuffix)
    })
    def versions(suffix: String): Seq[(Long, Long)] = statuses.toSeq.flatMap { status =>
      val name = status.getPath.getName
      if (!name.endsWith(suffix)) None
      else name.stripSuffix(suffix).toLongOption.filter(_ > 0).map(_ -> status.getLen)
    }.sorted
    val deltas = versions(DeltaSuffix)
    val snapshots = versions(SnapshotSuffix)
    StateFileListing(deltas.map(_._1), snapshots.map(_._1), deltas.toMap, snapshots.toMap)
  }

  def delete(path: Path): Unit = {
    checkWritable(path)
    fileManager.delete(path)
  }

  private def checkWritable(path: Path): Unit =
    if (readOnly) throw new IllegalStateException(s"$path is in a read-only view of the state")
}

object StateCheckpointFiles {
  val DeltaSuffix = ".delta"
  val SnapshotSuffix = ".snapshot"
  private val BufferSize = 1 << 16

  /** The error of a state file that could not be written (or made durable): it names the file. */
  def writeFailure(path: Path, cause: Throwable): IOException =
    new IOException(s"cannot write mapWithState state file $path: ${cause.getMessage}", cause)
}

/**
 * Which versions of one partition's state have files, both lists ascending, and the size in
 * bytes of each delta and snapshot file.
 */
case class StateFileListing(
    deltas: Seq[Long],
    snapshots: Seq[Long],
    deltaBytes: Map[Long, Long] = Map.empty,
    snapshotBytes: Map[Long, Long] = Map.empty) {
  def latest: Long = (deltas ++ snapshots).foldLeft(0L)(math.max)
}
