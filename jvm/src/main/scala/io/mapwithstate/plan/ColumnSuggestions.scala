package io.mapwithstate.plan

import org.apache.commons.text.similarity.LevenshteinDistance

import org.apache.spark.SparkThrowable
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * Spark's "Did you mean one of the following?" list for a column a state function names but
 * its inputs lack (`UNRESOLVED_COLUMN.WITH_SUGGESTION`), in the caller's words.
 *
 * Spark proposes the columns of the plan it resolved against, which for a state function
 * include its own inputs under reserved names (`__mws_state`, `__mws_new_state`, ...) that the
 * caller never wrote. The list is made again from what the caller can write there: the key and
 * value columns, `S.state("f")` for each state field, `S.new_state("f")` where new_state is in
 * scope, and the context functions (`S.batch_time()`, ...); closest names first, as Spark
 * orders its own.
 */
private[plan] object ColumnSuggestions {
  private val Condition = "UNRESOLVED_COLUMN.WITH_SUGGESTION"
  private val Shown = 5

  /** `message` (Spark's, for `error` while analyzing `plan`) with its proposal rewritten. */
  def inCallersWords(message: String, error: Throwable, plan: LogicalPlan): String =
    error match {
      case t: SparkThrowable if t.getCondition == Condition =>
        val proposal = t.getMessageParameters.get("proposal")
        val missing = Option(t.getMessageParameters.get("objectName")).getOrElse("")
          .split('.').last.stripPrefix("`").stripSuffix("`")
        val inputs = plan.collectLeaves().flatMap(_.output)
        if (proposal == null || !inputs.exists(a => isReserved(a.name))) {
          message
        } else {
          val candidates = inputs.flatMap(a => vocabulary(a.name, a.dataType))
          val closest = candidates.sortBy { case (name, _) =>
            LevenshteinDistance.getDefaultInstance.apply(name.toLowerCase, missing.toLowerCase)
          }.take(Shown).map(_._2)
          message.replace(proposal, closest.mkString(", "))
        }
      case _ => message
    }

  private def isReserved(name: String): Boolean =
    name.startsWith(StateFunctionInput.ReservedPrefix)

  /**
   * What the caller writes for an input column: (the name to compare, the words to show).
   * Reserved columns that are no input of the caller's (a group function's aggregates) have
   * none.
   */
  private def vocabulary(name: String, dataType: DataType): Seq[(String, String)] = {
    def fields(function: String) = dataType match {
      case s: StructType => s.fieldNames.toSeq.map(f => f -> s"""S.$function("$f")""")
      case _ => Nil
    }
    name match {
      case StateFunctionInput.State => fields("state")
      case StateFunctionInput.NewState => fields("new_state")
      case StateFunctionInput.StateExists => Seq("state_exists" -> "S.state_exists()")
      case StateFunctionInput.IsTimingOut => Seq("is_timing_out" -> "S.is_timing_out()")
      case StateFunctionInput.BatchTime => Seq("batch_time" -> "S.batch_time()")
      case StateFunctionInput.TimeoutAt => Seq("timeout_at" -> "S.timeout_at()")
      case StateFunctionInput.Watermark => Seq("watermark" -> "S.watermark()")
      case other if isReserved(other) => Nil
      case other => Seq(other -> s"`$other`")
    }
  }
}
