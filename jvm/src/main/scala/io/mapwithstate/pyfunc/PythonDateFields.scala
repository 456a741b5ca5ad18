package io.mapwithstate.pyfunc

import java.time.{LocalDateTime, ZoneOffset}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.types.{StringType, StructField, StructType, TimestampNTZType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * The fields of a datetime a reserved function parsed ([[PythonStrptime]],
 * [[PythonIsoFormat]]), with CPython's range checks of `datetime(...)` and their messages.
 */
object PythonDateFields {

  /**
   * `local`, the datetime's fields as a TIMESTAMP_NTZ (the compiler casts it to a TIMESTAMP:
   * the same wall-clock time in the session's time zone, as PySpark's naive datetimes are), or
   * `error`: Python's exception and message, with which the query fails.
   */
  val ResultType: StructType =
    StructType(Seq(StructField("local", TimestampNTZType), StructField("error", StringType)))

  def failure(message: String): InternalRow = failure("ValueError", message)

  def failure(exception: String, message: String): InternalRow =
    new GenericInternalRow(Array[Any](null, UTF8String.fromString(s"$exception: $message")))

  /** Whether `row` is a failure. */
  def failed(row: InternalRow): Boolean = !row.isNullAt(1)

  /** CPython's `check_date_args`: its message for the first field out of range. */
  def checkDate(year: Int, month: Int, day: Int): Option[String] =
    if (year < 1 || year > 9999) {
      Some(s"year $year is out of range")
    } else if (month < 1 || month > 12) {
      Some("month must be in 1..12")
    } else if (day < 1 || day > java.time.YearMonth.of(year, month).lengthOfMonth) {
      Some("day is out of range for month")
    } else {
      None
    }

  /** CPython's `check_time_args`: its message for the first field out of range. */
  def checkTime(hour: Int, minute: Int, second: Int, microsecond: Int): Option[String] =
    if (hour < 0 || hour > 23) {
      Some("hour must be in 0..23")
    } else if (minute < 0 || minute > 59) {
      Some("minute must be in 0..59")
    } else if (second < 0 || second > 59) {
      Some("second must be in 0..59")
    } else if (microsecond < 0 || microsecond > 999999) {
      Some("microsecond must be in 0..999999")
    } else {
      None
    }

  /** `datetime(year, ..., microsecond)`'s fields, or its ValueError. */
  def fields(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int,
      microsecond: Int): InternalRow =
    checkDate(year, month, day).orElse(checkTime(hour, minute, second, microsecond)) match {
      case Some(error) => failure(error)
      case None =>
        val local = LocalDateTime.of(year, month, day, hour, minute, second)
        val micros = local.toEpochSecond(ZoneOffset.UTC) * 1000000L + microsecond
        new GenericInternalRow(Array[Any](micros, null))
    }
}
