package io.mapwithstate.plan

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.internal.Logging
import org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
import org.apache.spark.sql.catalyst.plans.logical.{
  Aggregate,
  Deduplicate,
  DeduplicateWithinWatermark,
  Distinct,
  FlatMapGroupsInPandasWithState,
  FlatMapGroupsWithState,
  Join,
  LogicalPlan,
  TransformWithState,
  TransformWithStateInPySpark
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.streaming.{GroupStateTimeout, OutputMode}

/**
 * Spark's global-watermark correctness check
 * (`UnsupportedOperationChecker.checkStreamingQueryGlobalWatermarkLimit`) for the chains of
 * stateful operators that hold a map_with_state, which Spark's own check cannot see: it knows
 * its `FlatMapGroupsWithState`, not our node. One watermark serves every stateful operator of a
 * query, so an operator that can emit rows older than it feeds "late rows" to the stateful
 * operators after it, which may discard them.
 *
 * Spark's rule, as of 4.3: a stateful operator (its `isStatefulOperation`, which this asks
 * directly so the list stays Spark's: a streaming aggregation or distinct, a stream-stream
 * join, [flat]mapGroupsWithState, applyInPandasWithState, transformWithState, dropDuplicates
 * over an event-time column, dropDuplicatesWithinWatermark; and here a map_with_state) may not
 * follow an operator that can emit such rows: [flat]mapGroupsWithState or
 * applyInPandasWithState with `EventTimeTimeout` (here also a map_with_state with event-time
 * timers), or a streaming aggregation or distinct in update or complete mode (which re-emits
 * its rows). Chains of Spark's operators alone stay Spark's to judge. Like Spark's, the check
 * runs only with `spark.sql.streaming.unsupportedOperationCheck` on ([[StreamingWriteCheck]]
 * calls it so), and refuses only with
 * `spark.sql.streaming.statefulOperator.checkCorrectness.enabled` on (the default); off, it
 * logs a warning and lets the query run.
 */
private[plan] object GlobalWatermarkLimit extends Logging {

  /** Spark's own words for the refusal, so they read the same from either check. */
  val SparkMessage: String = "Detected pattern of possible 'correctness' issue due to global " +
    "watermark. The query contains stateful operation which can emit rows older than the " +
    "current watermark plus allowed late record delay, which are \"late rows\" in downstream " +
    "stateful operations and these rows can be discarded. Please refer the programming guide " +
    "doc for more details. If you understand the possible risk of correctness issue and still " +
    "need to run the query, you can disable this check by setting the config " +
    s"`${SQLConf.STATEFUL_OPERATOR_CHECK_CORRECTNESS_ENABLED.key}` to false."

  def apply(plan: LogicalPlan, outputMode: OutputMode): Unit =
    violation(plan, outputMode).foreach { message =>
      if (SQLConf.get.statefulOperatorCorrectnessCheckEnabled) {
        throw MapWithStateException(ErrorCondition.GlobalWatermarkLimit, message)
      }
      logWarning(s"$message\n$plan")
    }

  /** The first stateful operator following one it may not, when either is a map_with_state. */
  private def violation(plan: LogicalPlan, outputMode: OutputMode): Option[String] =
    plan.collect { case later if isStateful(later) => later }.iterator.flatMap { later =>
      later.find { earlier =>
        (earlier ne later) && emitsLateRows(earlier, outputMode) &&
        (streamingMapWithState(later) || streamingMapWithState(earlier))
      }.map(earlier => message(later, earlier, outputMode))
    }.nextOption()

  private def streamingMapWithState(plan: LogicalPlan): Boolean = plan match {
    case m: MapWithState => m.child.isStreaming
    case _ => false
  }

  private def isStateful(plan: LogicalPlan): Boolean =
    streamingMapWithState(plan) || UnsupportedOperationChecker.isStatefulOperation(plan)

  /** Spark's `ifCannotBeFollowedByStatefulOperation` (private there), with our node added. */
  private def emitsLateRows(plan: LogicalPlan, outputMode: OutputMode): Boolean = plan match {
    case m: MapWithState => streamingMapWithState(m) && eventTimeTimers(m)
    case f: FlatMapGroupsWithState =>
      f.isStreaming && f.timeout == GroupStateTimeout.EventTimeTimeout()
    case f: FlatMapGroupsInPandasWithState =>
      f.isStreaming && f.timeout == GroupStateTimeout.EventTimeTimeout()
    case a @ (_: Aggregate | _: Distinct) => a.isStreaming && outputMode != OutputMode.Append()
    case _ => false
  }

  private def eventTimeTimers(m: MapWithState): Boolean =
    m.options.timerDomain.contains(TimerDomain.EventTime)

  private def message(later: LogicalPlan, earlier: LogicalPlan, outputMode: OutputMode): String = {
    val why = earlier match {
      case a @ (_: Aggregate | _: Distinct) => aggregationBefore(later, a, outputMode)
      case _ =>
        val (timers, otherTimers) =
          if (streamingMapWithState(earlier)) {
            ("event-time timers (timeout_domain('event_time'))", "processing-time timers")
          } else ("GroupStateTimeout.EventTimeTimeout", "GroupStateTimeout.ProcessingTimeTimeout")
        s"${describe(earlier)} with $timers is followed by ${describe(later)} in one streaming " +
          "query: the rows it emits when the watermark passes a timer can be older than that " +
          s"watermark, late rows to ${describe(later)}, which may drop them; use $otherTimers, " +
          s"or run ${describe(later)} in a query of its own that reads this one's sink"
    }
    s"$why. $SparkMessage"
  }

  /**
   * Why `operator` may not read the rows of `aggregation` (a streaming aggregation or distinct)
   * in `outputMode` (update or complete), and the way out.
   */
  def aggregationBefore(operator: LogicalPlan, aggregation: LogicalPlan,
      outputMode: OutputMode): String = {
    val mode = outputMode.toString.toLowerCase
    s"${describe(operator)} reads the rows of ${describe(aggregation)} in outputMode('$mode'), " +
      "which emits a key's row again in every micro-batch that updates it" +
      (if (mode == "complete") " (all its rows, every micro-batch)" else "") +
      s", so ${describe(operator)} takes each emission as new records (a key's rows are " +
      "counted again); write the query in outputMode('append') with a watermark on the " +
      "aggregation's grouping (withWatermark on its input, and a window over that column), so " +
      "that it emits each row once, when final"
  }

  /** The API a user calls for the operator `plan` (a stateful one, or an aggregation). */
  def describe(plan: LogicalPlan): String = plan match {
    case m: MapWithState => m.functionName
    case _: Aggregate => "a streaming aggregation"
    case _: Distinct => "a streaming distinct()"
    case _: Join => "a stream-stream join"
    case f: FlatMapGroupsWithState =>
      if (f.isMapGroupsWithState) "mapGroupsWithState" else "flatMapGroupsWithState"
    case _: FlatMapGroupsInPandasWithState => "applyInPandasWithState"
    case _: Deduplicate => "dropDuplicates over an event-time column"
    case _: DeduplicateWithinWatermark => "dropDuplicatesWithinWatermark"
    case _: TransformWithState | _: TransformWithStateInPySpark => "transformWithState"
    case other => other.nodeName
  }
}
