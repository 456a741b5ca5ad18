package io.mapwithstate.plan

import io.mapwithstate.MapWithStateException
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Distinct, LogicalPlan}
import org.apache.spark.sql.catalyst.streaming.WriteToStream
import org.apache.spark.sql.internal.SQLConf
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
 *
 * Spark's `UnsupportedOperationChecker` sees none of this node, so the rules it applies to
 * flatMapGroupsWithState are applied here, under its switch
 * (`spark.sql.streaming.unsupportedOperationCheck`): in update mode a streaming aggregation
 * before map_with_state is refused, as Spark refuses flatMapGroupsWithState in update mode
 * with an aggregation (the aggregation re-emits a key's row every micro-batch that updates
 * it, which map_with_state would take as new records; in append mode, with a watermark, it
 * emits each row once, and Spark 4 allows that); and the global-watermark limit on chains of
 * stateful operators holds for chains with a map_with_state, see [[GlobalWatermarkLimit]].
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
      val name = operators.headOption.fold("map_with_state")(_.functionName)
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
      if (operators.nonEmpty && SQLConf.get.isUnsupportedOperationCheckEnabled) {
        if (write.outputMode == OutputMode.Update()) operators.foreach(refuseAggregationBefore)
        GlobalWatermarkLimit(write.inputQuery, write.outputMode)
      }
    case _ =>
  }

  /**
   * Refuses a streaming aggregation (or distinct) before `operator` in update mode whatever
   * `spark.sql.streaming.statefulOperator.checkCorrectness.enabled` says: that switch lets a
   * user accept late rows possibly dropped, while here every re-emitted row is certainly
   * taken again, which Spark refuses unconditionally for flatMapGroupsWithState in update mode.
   */
  private def refuseAggregationBefore(operator: MapWithState): Unit =
    operator.child.collectFirst {
      case a @ (_: Aggregate | _: Distinct) if a.isStreaming => a
    }.foreach { aggregation =>
      throw MapWithStateException(
        GlobalWatermarkLimit.aggregationBefore(operator, aggregation, OutputMode.Update()) +
          " (Spark refuses it too: \"flatMapGroupsWithState in update mode is not supported " +
          "with aggregation on a streaming DataFrame/Dataset\")")
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
