package io.mapwithstate

/**
 * A problem with a mapWithState request that the caller can fix: a missing column, a state
 * function of the wrong type, a bad option value. The message names the offending piece.
 *
 * It is an IllegalArgumentException so that Spark Connect hands it to Python clients as
 * `pyspark.errors.IllegalArgumentException` with this message, rather than as an internal
 * error (an AnalysisException needs an error condition registered with Spark).
 */
class MapWithStateException(message: String, cause: Throwable = null)
  extends IllegalArgumentException(message, cause)

object MapWithStateException {
  def apply(message: String): MapWithStateException = new MapWithStateException(message)

  /** The message of an error from Spark, without the plan an AnalysisException appends. */
  def describe(error: Throwable): String = error match {
    case e: org.apache.spark.sql.AnalysisException => e.getSimpleMessage
    case e => e.getMessage
  }
}
