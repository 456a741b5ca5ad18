package io.mapwithstate.pyfunc

import java.util.Locale
import java.util.concurrent.ConcurrentHashMap
import java.util.regex.{Matcher, Pattern}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BinaryExpression, Expression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.DataType

/**
 * Python 3.11's `datetime.strptime(s, format)` in the C locale, which the Python state
 * function compiler emits as the reserved function `__mws_python_strptime(s, format)`
 * (registered by [[PythonFunctions]]).
 *
 * It is CPython's `_strptime` ported step by step: the format becomes a regular expression,
 * one group per directive (`%d` one or two digits, `%Y` four, `%f` one to six, names of
 * months and days longest first), its other characters escaped and each run of whitespace
 * matching one or more whitespace characters, all case-insensitive; `\d` there is any Unicode
 * decimal digit and whitespace is what Python's `str.isspace` takes. The string must match
 * from its start (`time data '...' does not match format '...'`) to its end (`unconverted
 * data remains: ...`). The fields are then Python's: `%y` 69-99 in the 1900s, `%I` with
 * `%p`, `%j` counting from the year's (or 1900's) first day, 1900 for no year (1904 while a
 * February 29 is checked, then 1900 again), and the datetime's range checks with Python's
 * messages. The directives are those the compiler accepts (`%Y %m %d %H %I %M %S %f %y %j
 * %a %A %b %B %p %w %u %%`); it refuses the others at compile time.
 *
 * The result is a [[PythonDateFields.ResultType]] struct: the datetime, or `error`, Python's
 * `ValueError` message, which the compiler fails the query with.
 */
case class PythonStrptime(string: Expression, format: Expression) extends BinaryExpression {

  override def left: Expression = string
  override def right: Expression = format
  override def dataType: DataType = PythonDateFields.ResultType
  override def prettyName: String = PythonStrptime.Name

  override protected def nullSafeEval(s: Any, f: Any): Any =
    PythonStrptime.parse(s.toString, f.toString)

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val strptime = PythonStrptime.getClass.getName.stripSuffix("$")
    defineCodeGen(ctx, ev, (s, f) => s"$strptime.parse($s.toString(), $f.toString())")
  }

  override protected def withNewChildrenInternal(
      newLeft: Expression,
      newRight: Expression): PythonStrptime = copy(string = newLeft, format = newRight)
}

object PythonStrptime {

  val Name = "__mws_python_strptime"

  /** The directives supported, as the compiler checks a format against them. */
  val Directives: String = "YmdHIMSfyjaAbBpwu%"

  /** What Python's `\s` matches in a str pattern: the characters `str.isspace` takes. */
  private val Space =
    "[\\t\\n\\x0B\\f\\r\\x1C-\\x1F \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}" +
      "\\x{2029}\\x{202F}\\x{205F}\\x{3000}]"
  private val SpaceRun = Pattern.compile(Space + "+")

  /** What Python's `\d` matches in a str pattern: a Unicode decimal digit. */
  private val D = "\\p{Nd}"

  private val Weekdays =
    Seq("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
  private val Months = Seq("january", "february", "march", "april", "may", "june", "july",
    "august", "september", "october", "november", "december")
  private val ShortWeekdays = Weekdays.map(_.take(3))
  private val ShortMonths = Months.map(_.take(3))
  private val AmPm = Seq("am", "pm")

  /** `_strptime`'s `__seqToRE`: the names longest first (a stable sort), as alternatives. */
  private def names(values: Seq[String], directive: Char): String =
    values.sortBy(-_.length).mkString(s"(?<$directive>", "|", ")")

  /** `TimeRE`'s regular expression of each directive. */
  private val Regex: Map[Char, String] = Map(
    'd' -> s"(?<d>3[0-1]|[1-2]$D|0[1-9]|[1-9]| [1-9])",
    'f' -> "(?<f>[0-9]{1,6})",
    'H' -> s"(?<H>2[0-3]|[0-1]$D|$D)",
    'I' -> "(?<I>1[0-2]|0[1-9]|[1-9])",
    'j' -> s"(?<j>36[0-6]|3[0-5]$D|[1-2]$D$D|0[1-9]$D|00[1-9]|[1-9]$D|0[1-9]|[1-9])",
    'm' -> "(?<m>1[0-2]|0[1-9]|[1-9])",
    'M' -> s"(?<M>[0-5]$D|$D)",
    'S' -> s"(?<S>6[0-1]|[0-5]$D|$D)",
    'w' -> "(?<w>[0-6])",
    'u' -> "(?<u>[1-7])",
    'y' -> s"(?<y>$D$D)",
    'Y' -> s"(?<Y>$D$D$D$D)",
    'A' -> names(Weekdays, 'A'),
    'a' -> names(ShortWeekdays, 'a'),
    'B' -> names(Months, 'B'),
    'b' -> names(ShortMonths, 'b'),
    'p' -> names(AmPm, 'p'),
    '%' -> "%")

  /** A format's pattern and its directives, in order. */
  private final case class Compiled(pattern: Pattern, directives: Seq[Char])

  /** `list.index`'s ValueError for a name Python's lowercase does not find. */
  private final case class NotInList(message: String) extends Exception(message)

  private val Cache = new ConcurrentHashMap[String, Compiled]()

  /** `TimeRE.pattern`: regex characters escaped, whitespace runs made `\s+`, directives. */
  private def compile(format: String): Compiled = {
    val escaped = format.replaceAll("([\\\\.^$*+?(){}\\[\\]|])", "\\\\$1")
    val spaced = SpaceRun.matcher(escaped).replaceAll(Matcher.quoteReplacement(Space + "+"))
    val regex = new StringBuilder
    val directives = Seq.newBuilder[Char]
    var i = 0
    while (i < spaced.length) {
      val c = spaced.charAt(i)
      if (c == '%' && i + 1 < spaced.length) {
        val directive = spaced.charAt(i + 1)
        // The compiler passes only formats of supported directives, each once.
        regex.append(Regex(directive))
        if (directive != '%') directives += directive
        i += 2
      } else {
        regex.append(c)
        i += 1
      }
    }
    Compiled(
      Pattern.compile(regex.toString, Pattern.CASE_INSENSITIVE | Pattern.UNICODE_CASE),
      directives.result())
  }

  /** Python's `int()` of a group's digits, any Unicode decimal digits. */
  private def digits(text: String): Int =
    text.codePoints.toArray.foldLeft(0)((n, cp) => n * 10 + Character.digit(cp, 10))

  private def ordinal(year: Int, month: Int, day: Int): Long =
    java.time.LocalDate.of(year, month, day).toEpochDay

  private def failure(message: String): InternalRow = PythonDateFields.failure(message)

  /** `datetime.strptime(s, format)`'s fields, or Python's ValueError message. */
  def parse(s: String, format: String): InternalRow = {
    val compiled = Cache.computeIfAbsent(format, f => compile(f))
    val found = compiled.pattern.matcher(s)
    if (!found.lookingAt()) {
      return failure(
        s"time data ${PythonRepr.repr(s)} does not match format ${PythonRepr.repr(format)}")
    }
    if (found.end() != s.length) {
      return failure(s"unconverted data remains: ${s.substring(found.end())}")
    }
    def group(d: Char): String = found.group(d.toString)
    def index(values: Seq[String], text: String, offset: Int): Int = {
      val lowered = text.toLowerCase(Locale.ROOT)
      val at = values.indexOf(lowered)
      if (at < 0) throw NotInList(s"${PythonRepr.repr(lowered)} is not in list")
      at + offset
    }
    var year: Option[Int] = None
    var month = 1
    var day = 1
    var hour = 0
    var minute = 0
    var second = 0
    var fraction = 0
    var julian: Option[Int] = None
    // Each directive in the format's order, as `_strptime` walks the match's groups: a later
    // one setting the same field wins. The weekday directives are checked, not used.
    try {
      compiled.directives.foreach {
        case 'y' =>
          val two = digits(group('y'))
          year = Some(if (two <= 68) two + 2000 else two + 1900)
        case 'Y' => year = Some(digits(group('Y')))
        case 'm' => month = digits(group('m'))
        case 'B' => month = index(Months, group('B'), 1)
        case 'b' => month = index(ShortMonths, group('b'), 1)
        case 'd' => day = digits(group('d').trim)
        case 'H' => hour = digits(group('H'))
        case 'I' =>
          hour = digits(group('I'))
          val ampm =
            if (compiled.directives.contains('p')) group('p').toLowerCase(Locale.ROOT) else ""
          if (ampm == "" || ampm == "am") {
            if (hour == 12) hour = 0
          } else if (ampm == "pm" && hour != 12) {
            hour += 12
          }
        case 'M' => minute = digits(group('M'))
        case 'S' => second = digits(group('S'))
        case 'f' => fraction = digits(group('f').padTo(6, '0'))
        case 'A' => index(Weekdays, group('A'), 0)
        case 'a' => index(ShortWeekdays, group('a'), 0)
        case 'j' => julian = Some(digits(group('j')))
        case _ => // %p (read with %I), %w and %u (checked by the pattern), %%
      }
    } catch {
      case NotInList(message) => return failure(message)
    }

    var leapYearFix = false
    var y = year.getOrElse(1900)
    if (year.isEmpty && month == 2 && day == 29) {
      y = 1904
      leapYearFix = true
    }
    julian match {
      case None =>
        PythonDateFields.checkDate(y, month, day).foreach(error => return failure(error))
      case Some(j) =>
        PythonDateFields.checkDate(y, 1, 1).foreach(error => return failure(error))
        val date = java.time.LocalDate.ofEpochDay(j - 1 + ordinal(y, 1, 1))
        if (date.getYear > 9999) return failure(s"year ${date.getYear} is out of range")
        y = date.getYear
        month = date.getMonthValue
        day = date.getDayOfMonth
    }
    if (leapYearFix) y = 1900
    PythonDateFields.fields(y, month, day, hour, minute, second, fraction)
  }
}
