package io.mapwithstate.plan

import io.mapwithstate.MapWithStateException
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, LogicalPlan}
import org.apache.spark.sql.catalyst.streaming.WriteToStream
import org.apache.spark.sql.streaming.OutputMode

/**
 * Refuses, when a streaming query starts, the writes map_with_state (and map_groups_with_state)
 * cannot serve, so the user gets the reason from `start()` rather than from a failed
 * micro-batch. It runs as an analyzer
 * check rule: the analyzed `WriteToStream` is the first plan that knows the output mode.
 *
 * map_with_state adds rows per micro-batch and never retracts them — the emitted records, or
 * the state snapshot stamped with its batch time — so the append mode fits, and the update
 * mode too, with the same rows (as flatMapGroupsWithState allows both, for sinks that require
 * update); complete, which re-emits a whole result table per micro-batch, does not — unless a
 * streaming aggregation follows: then the result table is the aggregation's, over the rows
 * map_with_state appended, and every mode Spark allows that aggregation is ours to allow too,
 * as Spark allows flatMapGroupsWithState in append mode before an aggregation (its
 * FlatMapGroupsWithStateSuite's "streaming + aggregation" runs in complete mode). Its state
 * lives under one fixed operator id, so a query holds at most one map_with_state.
 */
object StreamingWriteCheck extends (LogicalPlan => Unit) {
  override def apply(plan: LogicalPlan): Unit = plan.foreach {
    case write: WriteToStream =>
      val operators = write.inputQuery.collect { case m: MapWithState if m.child.isStreaming => m }
      if (operators.size > 1) {
        throw MapWithStateException(
          s"a streaming query can hold one map_with_state, this one has ${operators.size}; " +
            "split it into several queries")
      }
      val name = if (operators.exists(_.groups)) "map_groups_with_state" else "map_with_state"
      if (operators.nonEmpty && write.outputMode != OutputMode.Append() &&
          write.outputMode != OutputMode.Update() && !aggregatesAfter(write.inputQuery)) {
        throw MapWithStateException(
          s"$name over a stream supports outputMode('append') and outputMode('update') (the " +
            s"same rows), not '${write.outputMode.toString.toLowerCase}': output='emitted' " +
            "adds the records each micro-batch emits and output='snapshots' the whole state " +
            "after each micro-batch, stamped with its batch_time; neither is a result table " +
            "to rewrite whole (a streaming aggregation after it is, and may be written in " +
            "complete mode)")
      }
    case _ =>
  }

  /** Whether a streaming aggregation in `plan` reads the rows of a map_with_state. */
  private def aggregatesAfter(plan: LogicalPlan): Boolean = plan.exists {
    case a: Aggregate => a.child.exists {
      case m: MapWithState => m.child.isStreaming
      case _ => false
    }
    case _ => false
  }
}
