package io.mapwithstate

import scala.jdk.CollectionConverters._

import org.apache.spark.{BreakingChangeInfo, SparkThrowable}
import org.apache.spark.sql.AnalysisException

/**
 * A problem with a mapWithState request, or with its run, that the caller can fix: a missing
 * column, a state function of the wrong type, a bad option value, a timer already due. The
 * message names the offending piece; the [[ErrorCondition]] says what kind of problem it is,
 * in a name a caller can match.
 *
 * It is a `SparkThrowable`, so Spark Connect sends its condition, SQLSTATE and parameters
 * with the error (PySpark's `getCondition()`, `getSqlState()`, `getMessageParameters()`), and
 * classic PySpark reads them from it the same way. The message starts with the condition in
 * brackets, as Spark's own do. Its parameters are `message` (the text after the condition)
 * and whatever the throw site adds (`argument`, `sparkCondition`, ...).
 *
 * It is an IllegalArgumentException so that PySpark raises it as
 * `pyspark.errors.IllegalArgumentException`, whose conditions need no registration with Spark
 * (an AnalysisException's are looked up in Spark's own table).
 */
class MapWithStateException(
    val condition: ErrorCondition,
    val detail: String,
    cause: Throwable = null,
    parameters: Map[String, String] = Map.empty)
  extends IllegalArgumentException(s"[${condition.name}] $detail", cause) with SparkThrowable {

  override def getCondition: String = condition.name

  override def getSqlState: String = condition.sqlState

  override def getMessageParameters: java.util.Map[String, String] =
    (parameters + ("message" -> detail)).asJava

  /** Not in Spark's table of conditions, so no template there: the message is the template. */
  override def getDefaultMessageTemplate: String = "<message>"

  override def getBreakingChangeInfo: BreakingChangeInfo = null
}

object MapWithStateException {
  def apply(condition: ErrorCondition, message: String): MapWithStateException =
    new MapWithStateException(condition, message)

  /**
   * `what` (an argument) refused by Spark's analyzer with `error`, whose `message` follows the
   * argument's name; Spark's own condition, when it has one, is the `sparkCondition` parameter.
   */
  def analysisFailed(what: String, error: Throwable, message: String): MapWithStateException = {
    val spark = error match {
      case t: SparkThrowable if t.getCondition != null => Map("sparkCondition" -> t.getCondition)
      case _ => Map.empty[String, String]
    }
    new MapWithStateException(ErrorCondition.AnalysisFailed, s"$what: $message", error,
      spark + ("argument" -> what))
  }

  /**
   * Spark's refusal of a changed state schema, without its advice to turn the schema check
   * off (`spark.sql.streaming.stateStore.stateSchemaCheck`): a query run past the check reads
   * its old state with the new schema, which corrupts it.
   */
  def withoutSchemaCheckAdvice(error: Throwable): String =
    describe(error).split("\n").map(_.trim)
      .filterNot(line =>
        line.contains("stateSchemaCheck") ||
        line.contains("running the query with incompatible schema"))
      .mkString(" ")

  /** The message of an error from Spark, without the plan an AnalysisException appends. */
  def describe(error: Throwable): String = error match {
    case e: AnalysisException => e.getSimpleMessage
    case e => e.getMessage
  }
}
