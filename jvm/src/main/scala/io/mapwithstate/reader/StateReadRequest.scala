package io.mapwithstate.reader

import org.apache.hadoop.conf.Configuration

/**
 * What a caller asks of the state reader, as every door (the JVM API
 * [[io.mapwithstate.StateReader]], the Spark Connect plugin) receives it: which checkpoint,
 * which of its map_with_state operators (the only one when None) and which batches.
 * [[relation]] resolves it against the checkpoint's files into the plan, so that the doors
 * cannot drift apart.
 */
sealed trait StateReadRequest {
  def checkpoint: String
  def operatorId: Option[Long]

  /** The plan of the read, after resolving the checkpoint and checking the batches. */
  final def relation(hadoopConf: Configuration): StateReadRelation = {
    val resolved = QueryCheckpoint.resolve(checkpoint, hadoopConf, operatorId)
    // Each batch is read in the state schema it was written in.
    val (atVersion, read) = this match {
      case StateReadRequest.State(_, batchId, _) =>
        val version = resolved.versionOf(batchId, hadoopConf)
        (resolved.inStateTypeOf(version), StateRead.At(version))
      case StateReadRequest.Changes(_, startBatch, endBatch, _) =>
        val (first, last) = resolved.changeRange(startBatch, endBatch, hadoopConf)
        (resolved.inStateTypeOf(first + 1), StateRead.Changes(first, last))
    }
    StateReadRelation(atVersion, read)
  }
}

object StateReadRequest {

  /** `read_state`: every key's state after `batchId` (default: the last committed batch). */
  final case class State(checkpoint: String, batchId: Option[Long], operatorId: Option[Long])
    extends StateReadRequest

  /** `read_state_changes`: the changes of batches `startBatch` to `endBatch` (default: last). */
  final case class Changes(
      checkpoint: String,
      startBatch: Long,
      endBatch: Option[Long],
      operatorId: Option[Long]) extends StateReadRequest
}
