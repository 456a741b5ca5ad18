package io.mapwithstate.state

import java.nio.charset.StandardCharsets

import io.mapwithstate.MapWithStateException
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

/**
 * Which backend a streaming query's state was written with, recorded in the checkpoint beside
 * the state (`state/<operator>/_mapwithstate_backend`) on the query's first batch. The two
 * backends' files cannot be read by each other, so a restart that names another backend is
 * refused with an error saying so, rather than failing later on unreadable files (or, worse,
 * starting from empty state). Checkpoints from before the marker hold heap state.
 */
object StateBackendMarker {

  val FileName = "_mapwithstate_backend"

  /**
   * Records `backend` for the operator's state in `operatorDir`, or checks it against the one
   * recorded; run on the driver when a query (re)starts.
   */
  def recordOrCheck(operatorDir: Path, backend: String, hadoopConf: Configuration): Unit = {
    val fs = OperatorMetadata.fileSystem(operatorDir, hadoopConf)
    val marker = new Path(operatorDir, FileName)
    val recorded = if (fs.exists(marker)) {
      val in = fs.open(marker)
      try Some(new String(in.readAllBytes(), StandardCharsets.UTF_8).trim) finally in.close()
    } else if (fs.exists(operatorDir) &&
        fs.listStatus(operatorDir).exists(s => s.isDirectory && s.getPath.getName.forall(_.isDigit))) {
      Some(StateBackend.MemoryName) // partition state written before the marker existed
    } else {
      None
    }
    recorded match {
      case Some(`backend`) =>
      case Some(other) => throw MapWithStateException(
        s"map_with_state: this query's checkpoint ($operatorDir) holds state of the '$other' " +
          s"backend, but the StateSpec asks for backend '$backend'; a restarted query cannot " +
          s"switch backends: keep backend('$other'), or start the query on a new checkpoint")
      case None =>
        val out = fs.create(marker, false)
        try out.write(backend.getBytes(StandardCharsets.UTF_8)) finally out.close()
    }
  }
}
