package io.mapwithstate.pyfunc

import java.nio.charset.StandardCharsets

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.DataType

/**
 * Python 3.11's `datetime.fromisoformat(s)` and `date.fromisoformat(s)`, which the Python
 * state function compiler emits as the reserved functions
 * `__mws_python_datetime_fromisoformat(s)` and `__mws_python_date_fromisoformat(s)`
 * (registered by [[PythonFunctions]]).
 *
 * CPython's C parser (`Modules/_datetimemodule.c`) ported step by step, on the string's UTF-8
 * bytes as it reads them: the date as `YYYY-MM-DD`, `YYYYMMDD`, `YYYY-Www[-D]` or
 * `YYYYWww[D]`; any one character between date and time; the time as `HH[:MM[:SS[.f]]]` or
 * without colons, a fraction of any length (`.` or `,`, truncated to microseconds); then
 * `Z` or a `+`/`-` offset. What it cannot parse fails with `Invalid isoformat string: '...'`,
 * fields out of range with the datetime constructor's messages (`month must be in 1..12`), an
 * offset of a day or more with Python's `ValueError`. A string with an offset (or `Z`) is an
 * aware datetime in Python, which a state function cannot hold (its datetimes are naive, in
 * the session's time zone): the query fails there, saying so.
 *
 * The result is a [[PythonDateFields.ResultType]] struct: the datetime, or `error`.
 */
case class PythonIsoFormat(dateOnly: Boolean, child: Expression) extends UnaryExpression {

  override def dataType: DataType = PythonDateFields.ResultType
  override def prettyName: String = PythonIsoFormat.name(dateOnly)

  override protected def nullSafeEval(s: Any): Any = PythonIsoFormat.parse(dateOnly, s.toString)

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val iso = PythonIsoFormat.getClass.getName.stripSuffix("$")
    defineCodeGen(ctx, ev, s => s"$iso.parse($dateOnly, $s.toString())")
  }

  override protected def withNewChildInternal(newChild: Expression): PythonIsoFormat =
    copy(child = newChild)
}

object PythonIsoFormat {

  def name(dateOnly: Boolean): String =
    if (dateOnly) "__mws_python_date_fromisoformat" else "__mws_python_datetime_fromisoformat"

  /** The UTF-8 bytes, read as C reads a NUL-terminated string: 0 past the end. */
  private final class Bytes(s: String) {
    val bytes: Array[Byte] = s.getBytes(StandardCharsets.UTF_8)
    def length: Int = bytes.length
    def apply(i: Int): Int = if (i >= 0 && i < bytes.length) bytes(i) & 0xff else 0
    def digit(i: Int): Boolean = apply(i) >= '0' && apply(i) <= '9'
  }

  /** `parse_digits`: `n` digits from `at` into `value`, the position after them, or -1. */
  private def digits(b: Bytes, at: Int, n: Int, value: Array[Int], slot: Int): Int = {
    var p = at
    for (_ <- 0 until n) {
      if (!b.digit(p)) return -1
      value(slot) = value(slot) * 10 + (b(p) - '0')
      p += 1
    }
    p
  }

  private def isLeap(year: Int): Boolean = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)

  /** `iso_to_ymd`: 0 and the date in `ymd`, or -2 (week) or -3 (day). */
  private def isoToYmd(year: Int, week: Int, day: Int, ymd: Array[Int]): Int = {
    if (week <= 0 || week >= 53) {
      // A 53rd week in years starting on a Thursday, or leap years starting on a Wednesday.
      val first = java.time.LocalDate.of(year max 1, 1, 1).getDayOfWeek.getValue - 1
      if (!(week == 53 && (first == 3 || (first == 2 && isLeap(year))))) return -2
    }
    if (day <= 0 || day >= 8) return -3
    if (year == 0) {
      // CPython's ord_to_ymd of a day before 0001-01-01 gives month 0.
      ymd(0) = 1
      ymd(1) = 0
      ymd(2) = 1
      return 0
    }
    val jan4 = java.time.LocalDate.of(year max 1, 1, 4)
    val week1Monday = jan4.minusDays(jan4.getDayOfWeek.getValue - 1L)
    val date = week1Monday.plusDays((week - 1) * 7L + day - 1)
    ymd(0) = date.getYear
    ymd(1) = date.getMonthValue
    ymd(2) = date.getDayOfMonth
    0
  }

  /** `parse_isoformat_date` of the first `len` bytes: 0 and the date in `ymd`, else < 0. */
  private def parseDate(b: Bytes, len: Int, ymd: Array[Int]): Int = {
    var p = digits(b, 0, 4, ymd, 0)
    if (p < 0) return -1
    val separator = b(p) == '-'
    if (separator) p += 1
    if (b(p) == 'W') {
      p += 1
      val week = Array(0, 0)
      p = digits(b, p, 2, week, 0)
      if (p < 0) return -3
      if (p < len) {
        if (separator) {
          if (b(p) != '-') return -2
          p += 1
        }
        if (digits(b, p, 1, week, 1) < 0) return -4
      } else {
        week(1) = 1
      }
      val rv = isoToYmd(ymd(0), week(0), week(1), ymd)
      return if (rv != 0) -3 + rv else 0
    }
    p = digits(b, p, 2, ymd, 1)
    if (p < 0) return -1
    if (separator) {
      if (b(p) != '-') return -2
      p += 1
    }
    if (digits(b, p, 2, ymd, 2) < 0) -1 else 0
  }

  /**
   * `parse_hh_mm_ss_ff` from `start` to `end`: the time in `hms` (hour, minute, second,
   * microsecond); < 0 where it fails, 1 where the string goes on past `end`, else 0.
   */
  private def parseTime(b: Bytes, start: Int, end: Int, hms: Array[Int]): Int = {
    var p = start
    var separator = true
    var i = 0
    var fraction = true
    while (i < 3 && fraction) {
      p = digits(b, p, 2, hms, i)
      if (p < 0) return -3
      val c = b(p)
      p += 1
      if (i == 0) separator = c == ':'
      if (p >= end) {
        return if (c != 0) 1 else 0
      } else if (separator && c == ':') {
        i += 1
      } else if (c == '.' || c == ',') {
        fraction = false
      } else if (!separator) {
        p -= 1
        i += 1
      } else {
        return -4
      }
    }
    val toParse = math.min(end - p, 6)
    p = digits(b, p, toParse, hms, 3)
    if (p < 0) return -3
    if (toParse < 6) hms(3) *= Seq(100000, 10000, 1000, 100, 10)(toParse - 1)
    while (b.digit(p)) p += 1
    if (b(p) != 0) 1 else 0
  }

  /** `_find_isoformat_datetime_separator`: where the date ends, or -1. */
  private def separatorAt(b: Bytes): Int = {
    val len = b.length
    if (len == 7) return 7
    if (b(4) == '-') {
      if (b(5) == 'W') {
        if (len > 8 && b(8) == '-') {
          if (len == 9) return -1
          if (len > 10 && b.digit(10)) return 8
          return 10
        }
        return 8
      }
      return 10
    }
    if (b(4) == 'W') {
      var idx = 7
      while (idx < len && b.digit(idx)) idx += 1
      if (idx < 9) return idx
      return if (idx % 2 == 0) 7 else 8
    }
    8
  }

  /** `repr(timedelta(seconds=s))`, as the offset's ValueError writes it. */
  private def timedeltaRepr(seconds: Int): String = {
    val days = Math.floorDiv(seconds, 86400)
    val rest = Math.floorMod(seconds, 86400)
    val parts = Seq(days -> "days", rest -> "seconds").collect {
      case (v, n) if v != 0 => s"$n=$v"
    }
    s"datetime.timedelta(${if (parts.isEmpty) "0" else parts.mkString(", ")})"
  }

  /** `fromisoformat(s)` of `date` (`dateOnly`) or `datetime`: the fields, or the error. */
  def parse(dateOnly: Boolean, s: String): InternalRow = {
    val invalid = PythonDateFields.failure(s"Invalid isoformat string: ${PythonRepr.repr(s)}")
    val b = new Bytes(s)
    val ymd = Array(0, 0, 0)
    if (dateOnly) {
      if (!Seq(7, 8, 10).contains(b.length) || parseDate(b, b.length, ymd) < 0) return invalid
      return PythonDateFields.checkDate(ymd(0), ymd(1), ymd(2)) match {
        case Some(error) => PythonDateFields.failure(error)
        case None => PythonDateFields.fields(ymd(0), ymd(1), ymd(2), 0, 0, 0, 0)
      }
    }
    if (s.codePointCount(0, s.length) < 7) return invalid
    val separator = separatorAt(b)
    if (separator < 0) return invalid
    var rv = parseDate(b, separator, ymd)
    val hms = Array(0, 0, 0, 0)
    val offset = Array(0, 0, 0, 0)
    var sign = 1
    if (rv == 0 && b.length > separator) {
      // Past the separator, one character of any UTF-8 length.
      val lead = b(separator)
      val p =
        separator + (if ((lead & 0x80) == 0) 1
                     else if ((lead & 0xf0) == 0xe0) 3
                     else if ((lead & 0xf0) == 0xf0) 4
                     else 2)
      val end = b.length
      // parse_isoformat_time: the time up to the first Z, + or -.
      var tz = p
      var searching = true
      while (searching) {
        if (b(tz) == 'Z' || b(tz) == '+' || b(tz) == '-') searching = false
        else {
          tz += 1
          if (tz >= end) searching = false
        }
      }
      val time = parseTime(b, p, tz, hms)
      rv =
        if (time < 0) time
        else if (tz == end) { if (time == 1) -5 else 0 }
        else if (b(tz) == 'Z') { if (b(tz + 1) != 0) -5 else 1 }
        else {
          sign = if (b(tz) == '-') -1 else 1
          if (parseTime(b, tz + 1, end, offset) != 0) -5 else 1
        }
    }
    if (rv < 0) return invalid
    if (rv == 1) {
      val seconds = sign * (offset(0) * 3600 + offset(1) * 60 + offset(2))
      if (math.abs(seconds) >= 86400) {
        return PythonDateFields.failure("offset must be a timedelta strictly between " +
          "-timedelta(hours=24) and timedelta(hours=24), not " + timedeltaRepr(seconds) + ".")
      }
    }
    val fields = PythonDateFields.fields(ymd(0), ymd(1), ymd(2), hms(0), hms(1), hms(2), hms(3))
    if (rv == 1 && !PythonDateFields.failed(fields)) {
      return PythonDateFields.failure(s"datetime.fromisoformat(${PythonRepr.repr(s)}) is " +
        "an aware datetime (it has a UTC offset), which a state function cannot hold: its " +
        "datetimes are naive, in the session's time zone; drop the offset from the string")
    }
    fields
  }
}
