package io.mapwithstate.state

import java.io.{
  BufferedInputStream,
  BufferedOutputStream,
  DataInputStream,
  DataOutputStream,
  FilterOutputStream,
  IOException,
  OutputStream
}

import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{Path, PathFilter}
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager

/**
 * The files of one state store partition in a query's checkpoint: `<version>.delta` holds the
 * writes of the batch that made `version` (a [[StateMapSerde]] delta over `version - 1`), and
 * `<version>.snapshot` the whole state at `version`. In a checkpoint with checkpoint ids
 * (Spark's state checkpoint format v2, see [[CommitLineage]]) each commit's files are named by
 * its version and its unique id instead, `<version>_<id>.delta` and `<version>_<id>.snapshot`,
 * so that two attempts of one version never share a file.
 *
 * Writes are atomic (a file appears complete or not at all) and may overwrite, because a batch
 * that is re-run after a failure rewrites the same version (in a checkpoint without ids).
 * Every read or write error names the file: a stateful query that cannot load its state must
 * say which file is at fault.
 *
 * On the local file system the files go through [[LocalCheckpointFileManager]], which forks no
 * process and writes no `.crc` side files (the files carry their own CRCs); elsewhere (HDFS,
 * object stores) through the `CheckpointFileManager` Spark would use for the query.
 *
 * Files are written compressed with `compressionCodec` (a Spark codec's name; None: as they
 * are), and every file reads back whatever it was written with ([[StateFileCompression]]).
 *
 * A `readOnly` instance (the state reader's) never creates the directory and refuses writes
 * and deletes: reading a checkpoint must leave it exactly as it was.
 */
class StateCheckpointFiles(
    val directory: Path,
    hadoopConf: Configuration,
    readOnly: Boolean = false,
    compressionCodec: Option[String] = None) {
  import StateCheckpointFiles._

  // Made once: a bad name fails when the store is set up, naming the setting.
  private val codec = compressionCodec.map(name => name -> StateFileCompression.codec(name))

  private val fileManager: CheckpointFileManager = {
    val local = new LocalCheckpointFileManager(directory, hadoopConf)
    if (local.handlesLocally(directory)) local
    else CheckpointFileManager.create(directory, hadoopConf)
  }
  if (!readOnly) fileManager.mkdirs(directory)

  def deltaFile(version: Long): Path = new Path(directory, s"$version$DeltaSuffix")

  def snapshotFile(version: Long): Path = new Path(directory, s"$version$SnapshotSuffix")

  /** The delta of `version` with checkpoint id `id`; None: the one named by its version. */
  def deltaFile(version: Long, id: Option[String]): Path =
    id.fold(deltaFile(version))(i => new Path(directory, s"${version}_$i$DeltaSuffix"))

  /** The snapshot of `version` with checkpoint id `id`; None: the one named by its version. */
  def snapshotFile(version: Long, id: Option[String]): Path =
    id.fold(snapshotFile(version))(i => new Path(directory, s"${version}_$i$SnapshotSuffix"))

  def exists(path: Path): Boolean = fileManager.exists(path)

  /**
   * Writes `path` atomically with `body` and returns its size in bytes as stored (compressed);
   * a failed write leaves no file behind. With `closes`, the file's bytes are written here but
   * made durable and visible (its close: fsync and rename) in the background, and
   * `closes.awaitAll()` says when, or why not.
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
      // Closing `stored` leaves `raw` open, for its close below.
      val stored = new StoredBytes(raw)
      val content = codec match {
        case Some((name, c)) => StateFileCompression.compressing(stored, name, c)
        case None => stored
      }
      val out = new DataOutputStream(new BufferedOutputStream(content, BufferSize))
      body(out)
      out.close() // flushes the buffer and finishes the compressed stream
      closes match {
        case None => raw.close()
        case Some(deferred) =>
          deferred.defer(path) { () =>
            try raw.close()
            catch { case NonFatal(e) => throw failed(e) }
          }
      }
      stored.count
    } catch {
      case NonFatal(e) => throw failed(e)
    }
  }

  /**
   * Reads `path` with `body`, which must read the whole file: bytes left after it are damage.
   * An error says which file could not be read and why.
   */
  def read[T](path: Path)(body: DataInputStream => T): T = reading(path, BufferSize) {
    (buffered, content) =>
      val data = new DataInputStream(
        if (content eq buffered) buffered else new BufferedInputStream(content, BufferSize))
      val result = body(data)
      // Also reads a compressed stream's end, whose damage would otherwise go unseen.
      if (data.read() != -1) {
        throw new IOException("is corrupt: it has bytes after the end of its state")
      }
      result
  }

  /**
   * Reads the start of `path` with `body`, which may leave the rest of the file unread (a
   * header). An error says which file could not be read and why.
   */
  def readStart[T](path: Path)(body: DataInputStream => T): T =
    reading(path, HeaderBufferSize)((_, content) => body(new DataInputStream(content)))

  /**
   * Opens `path` and hands `body` its bytes through a buffer of `bufferSize`, as stored and
   * decompressed (the same stream for a file written as it is); closes it after. An error
   * says which file could not be opened or read, and why.
   */
  private def reading[T](path: Path, bufferSize: Int)(
      body: (BufferedInputStream, java.io.InputStream) => T): T = {
    val in =
      try fileManager.open(path)
      catch {
        case NonFatal(e) =>
          throw new IOException(s"cannot open mapWithState state file $path: ${e.getMessage}", e)
      }
    try {
      val buffered = new BufferedInputStream(in, bufferSize)
      body(buffered, StateFileCompression.decompressing(buffered))
    } catch {
      case NonFatal(e) =>
        throw new IOException(s"cannot load mapWithState state file $path: ${e.getMessage}", e)
    } finally in.close()
  }

  /**
   * The versions that have a delta file, and those that have a snapshot file, named by their
   * version alone; and the files named by a version and a checkpoint id.
   */
  def list(): StateFileListing = {
    val statuses = fileManager.list(directory,
      new PathFilter {
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
    def withIds(suffix: String): Seq[CommitFile] = statuses.toSeq.flatMap { status =>
      status.getPath.getName.stripSuffix(suffix) match {
        case name if name.length == status.getPath.getName.length => None
        case s"${version}_$id" if id.nonEmpty =>
          version.toLongOption.filter(_ > 0).map(CommitFile(_, id, status.getLen))
        case _ => None
      }
    }.sortBy(f => (f.version, f.id))
    StateFileListing(deltas.map(_._1), snapshots.map(_._1), deltas.toMap, snapshots.toMap,
      withIds(DeltaSuffix), withIds(SnapshotSuffix))
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
  private val HeaderBufferSize = 1 << 12

  /** The error of a state file that could not be written (or made durable): it names the file. */
  def writeFailure(path: Path, cause: Throwable): IOException =
    new IOException(s"cannot write mapWithState state file $path: ${cause.getMessage}", cause)

  /** Passes bytes on to `out`, counting them; closing it leaves `out` open. */
  private final class StoredBytes(out: OutputStream) extends FilterOutputStream(out) {
    var count = 0L

    override def write(b: Int): Unit = {
      out.write(b)
      count += 1
    }

    override def write(b: Array[Byte], off: Int, len: Int): Unit = {
      out.write(b, off, len)
      count += len
    }

    override def close(): Unit = out.flush()
  }
}

/**
 * Which versions of one partition's state have files named by their version, both lists
 * ascending, and the size in bytes of each delta and snapshot file; and the delta and snapshot
 * files named by a version and a checkpoint id, by version.
 */
case class StateFileListing(
    deltas: Seq[Long],
    snapshots: Seq[Long],
    deltaBytes: Map[Long, Long] = Map.empty,
    snapshotBytes: Map[Long, Long] = Map.empty,
    deltasWithIds: Seq[CommitFile] = Nil,
    snapshotsWithIds: Seq[CommitFile] = Nil) {

  /** The newest version with a file named by its version alone. */
  def latest: Long = (deltas ++ snapshots).foldLeft(0L)(math.max)

  /** Whether any file is named by a checkpoint id. */
  def hasIds: Boolean = deltasWithIds.nonEmpty || snapshotsWithIds.nonEmpty
}

/** A state file named by its `version` and checkpoint `id`, of `bytes` bytes as stored. */
final case class CommitFile(version: Long, id: String, bytes: Long)
