package io.mapwithstate.reader

import org.apache.spark.sql.catalyst.analysis.MultiInstanceRelation
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.{LeafNode, LogicalPlan, Statistics}
import org.apache.spark.sql.catalyst.types.DataTypeUtils

/**
 * The logical plan of `read_state` / `read_state_changes`: a leaf whose rows come from the
 * files of a checkpoint (planned as a [[StateReadExec]]). The checkpoint is resolved, and the
 * read checked against it, when the plan is made, so a bad path or batch fails at analysis.
 */
final case class StateReadRelation(
    checkpoint: QueryCheckpoint,
    read: StateRead,
    output: Seq[Attribute]) extends LeafNode with MultiInstanceRelation {

  override def newInstance(): LogicalPlan = copy(output = output.map(_.newInstance()))

  // Nothing cheap tells the state's size; never broadcast on a guess.
  override def computeStats(): Statistics = Statistics(sizeInBytes = conf.defaultSizeInBytes)

  override def simpleString(maxFields: Int): String =
    s"StateRead ${checkpoint.location} $read"
}

object StateReadRelation {
  def apply(checkpoint: QueryCheckpoint, read: StateRead): StateReadRelation =
    StateReadRelation(checkpoint, read, DataTypeUtils.toAttributes(read.schema(checkpoint)))
}
