package io.mapwithstate.state

import java.io.{BufferedOutputStream, IOException, OutputStream}
import java.nio.ByteBuffer
import java.nio.channels.FileChannel
import java.nio.file.{Files, StandardCopyOption, StandardOpenOption, Path => NioPath}
import java.util.UUID

import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{
  FileAlreadyExistsException,
  FileStatus,
  FileSystem,
  FSDataInputStream,
  Path,
  PathFilter,
  RawLocalFileSystem
}
import org.apache.spark.internal.Logging
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.{
  CancellableFSDataOutputStream
}

/**
 * A Spark [[CheckpointFileManager]] that writes checkpoint files on the local file system
 * without forking a process, and hands every other file system to Spark's own manager.
 *
 * Why: Spark's default manager goes through Hadoop's `FileContext`, whose local file system
 * forks `readlink`, `stat` or `chmod` for a rename's link status and for permissions. Each fork
 * of a multi-gigabyte JVM costs tens of milliseconds, and a micro-batch renames several files
 * (offset log, commit log, one state file per partition), so a small batch spent most of its
 * time waiting for those processes. Here `file:` paths (and scheme-less paths when the default
 * file system is local) are written with `java.nio`: a temporary file in the same directory,
 * flushed and fsynced, renamed atomically over the final name (or hard-linked to it when it must
 * not be overwritten, which fails atomically if it exists), and the directory fsynced so the
 * rename itself survives a crash. No `.crc` side file is written: the state files carry their
 * own CRCs, and Spark's logs are JSON that Spark validates when reading.
 *
 * Reads, listings and deletes go through Hadoop's `RawLocalFileSystem`, which forks nothing for
 * them and returns the `FileStatus`es Spark expects. It has the constructor Spark instantiates
 * a `spark.sql.streaming.checkpointFileManagerClass` with, so it can serve a whole query's
 * offset and commit logs as well as the mapWithState state files.
 */
class LocalCheckpointFileManager(path: Path, hadoopConf: Configuration)
  extends CheckpointFileManager with Logging {
  import LocalCheckpointFileManager._

  private val raw: RawLocalFileSystem = {
    val fs = new RawLocalFileSystem()
    fs.initialize(java.net.URI.create("file:///"), hadoopConf)
    fs
  }

  private val defaultFsIsLocal = FileSystem.getDefaultUri(hadoopConf).getScheme == "file"

  /** Spark's own manager, for paths on other file systems; made on first use. */
  private lazy val delegate: CheckpointFileManager = {
    // Without our class in the conf, Spark picks its default for that file system (and does
    // not hand the path back to us).
    val conf = new Configuration(hadoopConf)
    conf.unset(CheckpointFileManagerClassKey)
    CheckpointFileManager.create(path, conf)
  }

  /** Whether `p` is on the local file system, so this manager handles it itself. */
  def handlesLocally(p: Path): Boolean = isLocalPath(p, defaultFsIsLocal)

  private def local(p: Path): NioPath = raw.pathToFile(p).toPath

  override def createAtomic(p: Path, overwriteIfPossible: Boolean)
      : CancellableFSDataOutputStream = {
    if (!handlesLocally(p)) return delegate.createAtomic(p, overwriteIfPossible)
    val target = local(p)
    val temp = target.resolveSibling(s".${target.getFileName}.${UUID.randomUUID()}.tmp")
    val channel =
      try {
        FileChannel.open(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)
      } catch {
        case NonFatal(e) => throw new IOException(s"cannot create $temp to write $p: $e", e)
      }
    new AtomicLocalOutputStream(channel, temp, target, overwriteIfPossible)
  }

  override def open(p: Path): FSDataInputStream =
    if (handlesLocally(p)) raw.open(p) else delegate.open(p)

  override def list(p: Path, filter: PathFilter): Array[FileStatus] =
    if (handlesLocally(p)) raw.listStatus(p, filter) else delegate.list(p, filter)

  override def mkdirs(p: Path): Unit =
    // `Files.createDirectories`, not Hadoop's mkdirs: that one forks `chmod` for a new directory.
    if (handlesLocally(p)) Files.createDirectories(local(p)) else delegate.mkdirs(p)

  override def exists(p: Path): Boolean =
    if (handlesLocally(p)) Files.exists(local(p)) else delegate.exists(p)

  override def delete(p: Path): Unit =
    if (handlesLocally(p)) raw.delete(p, true) else delegate.delete(p)

  override def isLocal: Boolean = handlesLocally(path) || delegate.isLocal

  override def createCheckpointDirectory(): Path = {
    if (!handlesLocally(path)) return delegate.createCheckpointDirectory()
    val qualified = raw.makeQualified(path)
    mkdirs(qualified)
    qualified
  }

  override def close(): Unit = ()

  /**
   * The temporary file under way; `close` publishes it under the final name, `cancel` deletes
   * it. Both are idempotent, and a failed `close` leaves no temporary file behind either.
   */
  private final class AtomicLocalOutputStream(
      channel: FileChannel, temp: NioPath, target: NioPath, overwrite: Boolean)
    extends CancellableFSDataOutputStream(
      new BufferedOutputStream(new ChannelOutputStream(channel), BufferSize)) {

    private var terminated = false

    override def close(): Unit = synchronized {
      if (terminated) return
      terminated = true
      try {
        flush()
        // fdatasync: the data and what reading it needs (the size), not the times; the rename
        // and the directory fsync below make the name durable.
        channel.force(false)
        channel.close()
        publish()
        syncDirectory(target.getParent)
      } catch {
        case e: Throwable =>
          discard()
          e match {
            case _: FileAlreadyExistsException => throw e
            case _ => throw new IOException(s"cannot write checkpoint file $target: $e", e)
          }
      }
    }

    override def cancel(): Unit = synchronized {
      if (terminated) return
      terminated = true
      discard()
    }

    private def publish(): Unit = {
      if (overwrite) {
        // rename(2): atomic, and replaces an existing file (a re-run batch rewrites its version).
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE)
      } else {
        // link(2) fails atomically if the name exists, which a check-then-rename cannot do.
        try Files.createLink(target, temp)
        catch {
          case _: java.nio.file.FileAlreadyExistsException =>
            throw new FileAlreadyExistsException(s"checkpoint file $target already exists")
          case _: UnsupportedOperationException | _: java.nio.file.FileSystemException
              if !Files.exists(target) =>
            // No hard links on this file system: the best it offers is check, then rename.
            Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE)
        }
        Files.deleteIfExists(temp)
      }
    }

    private def discard(): Unit = {
      try channel.close()
      catch { case NonFatal(_) => }
      try Files.deleteIfExists(temp)
      catch {
        case NonFatal(e) => logWarning(s"cannot delete temporary checkpoint file $temp: $e")
      }
    }
  }
}

object LocalCheckpointFileManager {

  /** The Spark setting (`spark.sql.streaming.checkpointFileManagerClass`) that selects this. */
  val CheckpointFileManagerClassKey = "spark.sql.streaming.checkpointFileManagerClass"

  private val BufferSize = 1 << 16

  private val IsWindows = System.getProperty("os.name", "").toLowerCase.startsWith("windows")

  /** `file:` paths, and scheme-less ones when the default file system is the local one. */
  def isLocalPath(p: Path, defaultFsIsLocal: Boolean): Boolean = p.toUri.getScheme match {
    case null => defaultFsIsLocal
    case scheme => scheme == "file"
  }

  /**
   * Makes a rename in `directory` durable: on Linux a renamed name is on disk only once its
   * directory is fsynced. Windows cannot open a directory for this, and needs no such step.
   */
  private[state] def syncDirectory(directory: NioPath): Unit = if (!IsWindows) {
    val dir = FileChannel.open(directory, StandardOpenOption.READ)
    try dir.force(true)
    finally dir.close()
  }

  /** Writes straight to the channel (the caller buffers), whole buffers at a time. */
  private final class ChannelOutputStream(channel: FileChannel) extends OutputStream {
    override def write(b: Int): Unit = write(Array(b.toByte), 0, 1)

    override def write(b: Array[Byte], off: Int, len: Int): Unit = {
      val buffer = ByteBuffer.wrap(b, off, len)
      while (buffer.hasRemaining) channel.write(buffer)
    }
  }
}
