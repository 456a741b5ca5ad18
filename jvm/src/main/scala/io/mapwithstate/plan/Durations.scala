package io.mapwithstate.plan

import scala.util.control.NonFatal

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.catalyst.util.IntervalUtils
import org.apache.spark.unsafe.types.UTF8String

/** Parses the duration strings clients send ("30 seconds", "1 minute 30 seconds", "250 ms"). */
object Durations {
  private val MillisPerDay = 24L * 60 * 60 * 1000

  /** The duration in milliseconds; `what` names the setting in the error if it is not one. */
  def toMillis(text: String, what: String): Long = {
    val interval =
      try IntervalUtils.stringToInterval(UTF8String.fromString(text.trim))
      catch {
        case NonFatal(e) =>
          throw MapWithStateException(ErrorCondition.InvalidArgument,
            s"$what: '$text' is not a duration; expected e.g. '30 seconds', '1 minute' or " +
              s"'500 milliseconds' (${e.getMessage})")
      }
    if (interval.months != 0) {
      throw MapWithStateException(ErrorCondition.InvalidArgument,
        s"$what: '$text' uses months or years, which have no fixed length; " +
          "use days or smaller units")
    }
    interval.days * MillisPerDay + Math.floorDiv(interval.microseconds, 1000L)
  }

  /** Like [[toMillis]], but the duration must be above zero. */
  def positiveMillis(text: String, what: String): Long = {
    val ms = toMillis(text, what)
    if (ms <= 0) throw MapWithStateException(ErrorCondition.InvalidArgument,
      s"$what must be positive, got '$text' ($ms ms)")
    ms
  }
}
