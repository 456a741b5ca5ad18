package io.mapwithstate.state

import java.io.{BufferedReader, InputStreamReader, OutputStreamWriter}
import java.nio.charset.StandardCharsets.UTF_8
import java.util.zip.CRC32

import scala.util.control.NonFatal

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, LocalFileSystem, Path}
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * Each state schema an operator's checkpoint has held after its first, and from which state
 * version, in `state/<operator id>/_schemas`: what a restart with a changed `state_schema`
 * converts from, and what a reader of an older batch reads it in.
 *
 * The first schema is the one Spark's state schema check recorded on the query's first batch
 * (`state/<operator id>/0/_metadata/schema`), which stays as it was: Spark's check compares
 * the key columns with it, and Spark's file has no room for a second schema. Each later one is
 * an entry `(fromVersion, stateType)`: state version `fromVersion` and every version after it
 * (until the next entry) hold rows of `stateType`. A restart that converts records its entry
 * before its first batch runs; the entry counts only once that batch is committed: a restart
 * whose batch is at or before an entry's version drops the entry ([[pendingFrom]]), since the
 * conversion never committed (the files it left are the caller's to clear).
 *
 * The file is text: a version line, one line per entry (`<fromVersion> <state type as JSON>`)
 * and a last line with the CRC32 of the lines before it, so that a damaged or cut file is
 * refused naming it rather than read as a shorter history. It is replaced atomically.
 */
object StateSchemaHistory {
  val FileName = "_schemas"

  /** The version of this file's format that this code writes and reads. */
  val FormatVersion: Int = 1

  /** State versions `fromVersion` onward hold rows of `stateType`. */
  final case class Entry(fromVersion: Long, stateType: StructType)

  /** The entries recorded for the state in `operatorDir`, oldest first (none: no file). */
  def read(operatorDir: Path, hadoopConf: Configuration): Seq[Entry] = {
    val file = new Path(operatorDir, FileName)
    val fs = fileSystem(operatorDir, hadoopConf)
    if (!fs.exists(file)) return Nil
    val lines = {
      val in = new BufferedReader(new InputStreamReader(fs.open(file), UTF_8))
      try Iterator.continually(in.readLine()).takeWhile(_ != null).toVector
      finally in.close()
    }
    def damaged(why: String): MapWithStateException = MapWithStateException(
      ErrorCondition.CheckpointUnreadable,
      s"map_with_state: the state schema history $file is damaged: $why")
    if (lines.size < 2) throw damaged("it is cut short")
    val body = lines.init
    if (lines.last != s"crc32 ${checksum(body)}") {
      throw damaged("its checksum does not match its contents")
    }
    body.head match {
      case s"v$v" if v.toIntOption.exists(_ <= FormatVersion) =>
      case other => throw MapWithStateException(ErrorCondition.CheckpointTooNew,
          s"map_with_state: the state schema history $file is of format '$other'; this " +
            s"plugin reads up to v$FormatVersion")
    }
    body.tail.map { line =>
      val (version, json) = line.span(_ != ' ')
      val stateType =
        try DataType.fromJson(json.trim).asInstanceOf[StructType]
        catch { case NonFatal(e) => throw damaged(s"a schema does not parse: ${e.getMessage}") }
      Entry(version.toLongOption.getOrElse(throw damaged(s"'$version' is not a version")),
        stateType)
    }
  }

  /**
   * The state type of `version` of the state in `operatorDir`: the newest entry at or before
   * it, else `first` (the schema Spark's check recorded).
   */
  def stateTypeAt(entries: Seq[Entry], version: Long, first: StructType): StructType =
    entries.filter(_.fromVersion <= version).lastOption.map(_.stateType).getOrElse(first)

  /**
   * On a restart whose first batch loads `version`, the entries that hold (their version is at
   * or before it). The entry of a conversion whose first batch never committed is dropped,
   * with every partition's files of the versions after `version` (of either backend: that
   * conversion wrote them in its schema, and the batch, run again, rewrites them), so that
   * the query, in the old schema or the new, starts from the old schema's files alone.
   */
  def committed(operatorDir: Path, version: Long, hadoopConf: Configuration): Seq[Entry] = {
    val (held, uncommitted) = read(operatorDir, hadoopConf).partition(_.fromVersion <= version)
    if (uncommitted.nonEmpty) {
      val fs = fileSystem(operatorDir, hadoopConf)
      val partitions = fs.listStatus(operatorDir).toSeq
        .filter(s => s.isDirectory && s.getPath.getName.forall(_.isDigit))
      for {
        partition <- partitions
        file <- fs.listStatus(partition.getPath).toSeq
        if versionOf(file.getPath.getName).exists(_ > version)
      } fs.delete(file.getPath, false)
      write(operatorDir, held, hadoopConf)
    }
    held
  }

  /** A state file's version: `<v>.delta`, `<v>.snapshot` (heap), `<v>[_id].zip|changelog`. */
  private def versionOf(name: String): Option[Long] = name match {
    case StateFile(version) => version.toLongOption
    case _ => None
  }

  private val StateFile = raw"(\d+)(?:_[^.]*)?\.(?:delta|snapshot|zip|changelog)".r

  /**
   * Replaces the history of `operatorDir` with `entries` (none: removes the file), and records
   * the checkpoint's format that goes with it ([[OperatorMetadata.recordSchemaHistory]]): the
   * format first when a history begins, the file last when it ends, so that at no moment a
   * history is there and the format says there is none.
   */
  def write(operatorDir: Path, entries: Seq[Entry], hadoopConf: Configuration): Unit = {
    val file = new Path(operatorDir, FileName)
    if (entries.isEmpty) {
      val fs = fileSystem(operatorDir, hadoopConf)
      if (fs.exists(file)) fs.delete(file, false)
      OperatorMetadata.recordSchemaHistory(operatorDir, hasHistory = false, hadoopConf)
      return
    }
    OperatorMetadata.recordSchemaHistory(operatorDir, hasHistory = true, hadoopConf)
    val body = s"v$FormatVersion" +: entries.map(e => s"${e.fromVersion} ${e.stateType.json}")
    val out = CheckpointFileManager.create(operatorDir, hadoopConf)
      .createAtomic(file, overwriteIfPossible = true)
    val writer = new OutputStreamWriter(out, UTF_8)
    try (body :+ s"crc32 ${checksum(body)}").foreach(line => writer.write(line + "\n"))
    catch {
      case e: Throwable =>
        out.cancel()
        throw e
    }
    writer.close()
  }

  private def checksum(lines: Seq[String]): String = {
    val crc = new CRC32
    lines.foreach(line => crc.update((line + "\n").getBytes(UTF_8)))
    java.lang.Long.toHexString(crc.getValue)
  }

  /** As [[OperatorMetadata]]: on a local disk the raw file system (no `.crc` side files). */
  private def fileSystem(path: Path, hadoopConf: Configuration): FileSystem =
    path.getFileSystem(hadoopConf) match {
      case local: LocalFileSystem => local.getRawFileSystem
      case other => other
    }
}
