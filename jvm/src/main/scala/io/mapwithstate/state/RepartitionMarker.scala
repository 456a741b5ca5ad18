package io.mapwithstate.state

import java.nio.charset.StandardCharsets.UTF_8

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}

/**
 * The mark `repartition_state` leaves in `state/<operator id>/_repartition` while it rewrites
 * an operator's state: the id of the batch it is making. It is written before any state file
 * of the new layout and removed once that batch is in the commit log, so while it stands with
 * no commit of its batch the checkpoint holds an unfinished repartition, which a restart of the
 * query must not run on (a query rerunning the uncommitted batch would load the new layout's
 * partitions at a version only the old layout has). A restart is then refused, saying to run
 * `repartition_state` again, which finishes it.
 */
object RepartitionMarker {
  val FileName = "_repartition"

  def file(operatorDir: Path): Path = new Path(operatorDir, FileName)

  /** Marks `operatorDir` as being rewritten into batch `batchId`. */
  def write(operatorDir: Path, batchId: Long, hadoopConf: Configuration): Unit = {
    val path = file(operatorDir)
    val out = path.getFileSystem(hadoopConf).create(path, true)
    try out.write(batchId.toString.getBytes(UTF_8))
    finally out.close()
  }

  /** The batch the mark in `operatorDir` names, if there is one. */
  def read(operatorDir: Path, hadoopConf: Configuration): Option[Long] = {
    val path = file(operatorDir)
    val fs = path.getFileSystem(hadoopConf)
    if (!fs.exists(path)) None
    else {
      val in = fs.open(path)
      try Some(new String(in.readAllBytes(), UTF_8).trim.toLong)
      finally in.close()
    }
  }

  def remove(operatorDir: Path, hadoopConf: Configuration): Unit = {
    val path = file(operatorDir)
    path.getFileSystem(hadoopConf).delete(path, false)
  }

  /**
   * On a query's (re)start: refuses the state in `operatorDir` (`<checkpoint>/state/<id>`)
   * while a repartition of it is unfinished (marked, and its batch not committed).
   */
  def checkFinished(operatorDir: Path, hadoopConf: Configuration): Unit =
    read(operatorDir, hadoopConf).foreach { batch =>
      val root = operatorDir.getParent.getParent
      val fs: FileSystem = root.getFileSystem(hadoopConf)
      if (!fs.exists(new Path(new Path(root, "commits"), batch.toString))) {
        throw MapWithStateException(ErrorCondition.QueryActive,
          s"map_with_state: the state in $operatorDir is being repartitioned (into batch " +
            s"$batch), and the repartition did not finish: run mapwithstate.repartition_state " +
            "on this checkpoint again, with the same num_partitions, before restarting the query")
      }
    }
}
