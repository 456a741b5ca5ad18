package io.mapwithstate.plan

import io.mapwithstate.MapWithStateException
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.streaming.WriteToStream
import org.apache.spark.sql.streaming.OutputMode

/**
 * Refuses, when a streaming query starts, the writes map_with_state cannot serve, so the user
 * gets the reason from `start()` rather than from a failed micro-batch. It runs as an analyzer
 * check rule: the analyzed `WriteToStream` is the first plan that knows the output mode.
 *
 * map_with_state adds rows per micro-batch and never retracts them — the emitted records, or
 * the state snapshot stamped with its batch time — so only the append mode fits. Its state
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
      if (operators.nonEmpty && write.outputMode != OutputMode.Append()) {
        throw MapWithStateException(
          s"map_with_state over a stream supports only outputMode('append'), not " +
            s"'${write.outputMode.toString.toLowerCase}': output='emitted' appends the records " +
            "each micro-batch emits and output='snapshots' appends the whole state after each " +
            "micro-batch, stamped with its batch_time")
      }
    case _ =>
  }
}
