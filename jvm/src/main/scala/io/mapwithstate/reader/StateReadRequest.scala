package io.mapwithstate.reader

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic.SparkSession

/**
 * What a caller asks of the state reader, as every door (the JVM API
 * [[io.mapwithstate.StateReader]], the Spark Connect plugin) receives it: which checkpoint,
 * which of its map_with_state operators (the only one when None), which batches, and whether
 * in the batches' own state schema or the checkpoint's current one. [[relation]] resolves it
 * against the checkpoint's files into the plan, so that the doors cannot drift apart.
 */
sealed trait StateReadRequest {
  def checkpoint: String
  def operatorId: Option[Long]
  def inCurrentSchema: Boolean

  /** The plan of the read, after resolving the checkpoint and checking the batches. */
  final def relation(session: SparkSession): LogicalPlan = {
    val hadoopConf = session.sessionState.newHadoopConf()
    val resolved = QueryCheckpoint.resolve(checkpoint, session, operatorId)
    // Each batch is read in the state schema it was written in, unless asked in the current.
    val keys = resolved.keySchema.size
    // The versions whose state files the read opens: the one read, or each of the range's
    // and the one before its first (where a removal's key is looked up).
    val (version, read, stateOffset, batch, opened) = this match {
      case StateReadRequest.State(_, batchId, _, _, timerOnlyKeys) =>
        val version = resolved.versionOf(batchId, hadoopConf)
        (version, StateRead.At(version, timerOnlyKeys), keys, s"batch ${version - 1}",
          Seq(version))
      case StateReadRequest.Changes(_, startBatch, endBatch, _, _) =>
        val (first, last) = resolved.changeRange(startBatch, endBatch, hadoopConf)
        (first + 1, StateRead.Changes(first, last), 2 + keys, s"batches $first to $last",
          first to last + 1)
    }
    val relation = StateReadRelation(
      resolved.inStateTypeOf(version).withCommitIdsOf(opened, hadoopConf), read)
    if (!inCurrentSchema) relation
    else InCurrentStateSchema(relation, stateOffset, resolved.stateTypesSince(version), batch)
  }
}

object StateReadRequest {

  /**
   * `read_state`: every key's state after `batchId` (default: the last committed batch); with
   * `timerOnlyKeys`, also the keys holding only a timer ([[StateRead.At]]).
   */
  final case class State(
      checkpoint: String,
      batchId: Option[Long],
      operatorId: Option[Long],
      inCurrentSchema: Boolean = false,
      timerOnlyKeys: Boolean = false) extends StateReadRequest

  /** `read_state_changes`: the changes of batches `startBatch` to `endBatch` (default: last). */
  final case class Changes(
      checkpoint: String,
      startBatch: Long,
      endBatch: Option[Long],
      operatorId: Option[Long],
      inCurrentSchema: Boolean = false) extends StateReadRequest
}
