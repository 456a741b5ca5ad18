package io.mapwithstate.plan

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.catalyst.plans.logical.{
  Aggregate,
  Distinct,
  FlatMapGroupsWithState,
  LogicalPlan
}
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
 * FlatMapGroupsWithStateSuite's "streaming + aggregation" runs in complete mode).
 *
 * Spark's `UnsupportedOperationChecker` sees none of this node, so the rules it applies to
 * flatMapGroupsWithState are applied here, under its switch
 * (`spark.sql.streaming.unsupportedOperationCheck`): in update mode a streaming aggregation
 * before map_with_state is refused, as Spark refuses flatMapGroupsWithState in update mode
 * with an aggregation (the aggregation re-emits a key's row every micro-batch that updates
 * it, which map_with_state would take as new records; in append mode, with a watermark, it
 * emits each row once, and Spark 4 allows that); several map_with_state (each with its own
 * state, see [[NumberStateOperators]]) are allowed only in append mode, as Spark allows several
 * flatMapGroupsWithState only in append mode (map_with_state has no output mode of its own:
 * it takes the query's); and the global-watermark limit on chains of stateful operators holds
 * for chains with a map_with_state, see [[GlobalWatermarkLimit]].
 */
object StreamingWriteCheck extends (LogicalPlan => Unit) {
  override def apply(plan: LogicalPlan): Unit = plan.foreach {
    case write: WriteToStream =>
      val operators = write.inputQuery.collect { case m: MapWithState if m.child.isStreaming => m }
      if (operators.nonEmpty && SQLConf.get.isUnsupportedOperationCheckEnabled) {
        refuseSeveralOutsideAppend(write)
      }
      val name = operators.headOption.fold("map_with_state")(_.functionName)
      if (operators.nonEmpty && write.outputMode != OutputMode.Append() &&
        write.outputMode != OutputMode.Update() && !aggregatesAfter(write.inputQuery)) {
        throw MapWithStateException(ErrorCondition.UnsupportedOutputMode,
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
   * Spark's rule for several flatMapGroupsWithState in one query, with our operators counted
   * among them: they are allowed only when the query's output mode, and each Spark operator's
   * own, is append. (In update mode an operator's rows would be read, by the next stateful
   * operator or the sink, as updates of the rows it emitted before; Spark's mapGroupsWithState,
   * update mode only, counts here too, as Spark refuses mixing it with flatMapGroupsWithState.)
   */
  private def refuseSeveralOutsideAppend(write: WriteToStream): Unit = {
    val operators = write.inputQuery.collect {
      case m: MapWithState if m.child.isStreaming => m
      case f: FlatMapGroupsWithState if f.isStreaming => f
    }
    val allAppend = write.outputMode == OutputMode.Append() && operators.forall {
      case f: FlatMapGroupsWithState => f.outputMode == OutputMode.Append()
      case _ => true
    }
    if (operators.size > 1 && !allAppend) {
      val names = operators.map(GlobalWatermarkLimit.describe).mkString(", ")
      throw MapWithStateException(ErrorCondition.UnsupportedOutputMode,
        s"a streaming query holds several map_with_state (or flatMapGroupsWithState) " +
          "operators only in outputMode('append'), where each adds rows that the next one or " +
          s"the sink takes once: this one has ${operators.size} ($names) in " +
          s"outputMode('${write.outputMode.toString.toLowerCase}'); write it in append mode " +
          "(map_with_state gives the same rows in both), or split it into several queries " +
          "(Spark refuses it too: \"Multiple flatMapGroupsWithStates are not supported when " +
          "they are not all in append mode or the output mode is not append on a streaming " +
          "DataFrames/Datasets\")")
    }
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
      throw MapWithStateException(ErrorCondition.UnsupportedOutputMode,
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
