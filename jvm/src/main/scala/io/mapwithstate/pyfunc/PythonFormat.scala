package io.mapwithstate.pyfunc

import java.math.{BigDecimal => JBigDecimal, MathContext, RoundingMode}

import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.DataTypeMismatch
import org.apache.spark.sql.catalyst.expressions.{BinaryExpression, Expression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{DataType, DoubleType, LongType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Python's `format(value, spec)` of a float, an int or a str, which the Python state function
 * compiler emits as `__mws_python_format(value, spec)` for f-string format specs
 * (`f"{x:,.2f}"`), `format()`, `str.format` and `%` formatting. Spark's `format_string` and
 * `format_number` round a double's shortest decimal text half up (`%.2f` of 2.675 is 2.68
 * there, 2.67 in Python, whose double is 2.67499999...), and print at most 17 significant
 * digits; Python formats the double's exact binary value, rounded half to even.
 *
 * The compiler checks the spec against Python before it emits the call (a spec Python refuses
 * for the value's type is a compile error), so the spec here is always one Python takes.
 */
case class PythonFormat(value: Expression, spec: Expression) extends BinaryExpression {

  override def left: Expression = value
  override def right: Expression = spec
  override def dataType: DataType = StringType
  override def prettyName: String = PythonFormat.Name

  override def checkInputDataTypes(): TypeCheckResult =
    if (!Seq(DoubleType, LongType, StringType).contains(value.dataType) ||
      spec.dataType != StringType) {
      DataTypeMismatch("UNEXPECTED_INPUT_TYPE",
        Map("paramIndex" -> "first or second",
          "requiredType" -> "DOUBLE, BIGINT or STRING, and STRING",
          "inputSql" -> s"${value.sql}, ${spec.sql}",
          "inputType" -> s"${value.dataType.sql}, ${spec.dataType.sql}"))
    } else {
      TypeCheckResult.TypeCheckSuccess
    }

  private def method: String = value.dataType match {
    case DoubleType => "formatDouble"
    case LongType => "formatLong"
    case _ => "formatString"
  }

  override protected def nullSafeEval(v: Any, s: Any): Any = {
    val text = s.toString
    val formatted = value.dataType match {
      case DoubleType => PythonFormatting.formatDouble(v.asInstanceOf[Double], text)
      case LongType => PythonFormatting.formatLong(v.asInstanceOf[Long], text)
      case _ => PythonFormatting.formatString(v.toString, text)
    }
    UTF8String.fromString(formatted)
  }

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val formatting = PythonFormatting.getClass.getName.stripSuffix("$")
    val utf8 = classOf[UTF8String].getName
    val argument = if (value.dataType == StringType) (v: String) => s"$v.toString()"
    else (v: String) => v
    defineCodeGen(ctx, ev,
      (v, s) =>
        s"$utf8.fromString($formatting.$method(${argument(v)}, $s.toString()))")
  }

  override protected def withNewChildrenInternal(newLeft: Expression, newRight: Expression)
      : PythonFormat = copy(value = newLeft, spec = newRight)
}

object PythonFormat {
  val Name = "__mws_python_format"
}

/**
 * CPython's format-spec mini-language (`Python/formatter_unicode.c`) for floats, ints and
 * strs: `[[fill]align][sign][z][#][0][width][grouping][.precision][type]`, with the layout
 * `<left padding><sign><prefix><sign-aware padding><grouped digits><decimal><rest><right
 * padding>`, and a float's digits as `PyOS_double_to_string` gives them: the exact binary
 * value rounded half to even (`BigDecimal(double)` is that exact value), `repr`'s shortest
 * digits for a spec without a type or precision.
 */
object PythonFormatting {

  /** A parsed spec; `width` and `precision` are -1 where not given, `kind` is 0 for none. */
  final case class Spec(fill: Int, align: Char, sign: Char, noNegativeZero: Boolean,
      alternate: Boolean, width: Int, grouping: Char, precision: Int, kind: Char)

  def parse(spec: String, defaultAlign: Char): Spec = {
    val cps = spec.codePoints().toArray
    var pos = 0
    def at(i: Int): Int = if (i < cps.length) cps(i) else -1
    def isAlign(c: Int): Boolean = c == '<' || c == '>' || c == '=' || c == '^'
    var fill = ' '.toInt
    var align = defaultAlign
    var fillGiven = false
    var alignGiven = false
    if (cps.length >= 2 && isAlign(at(1))) {
      fill = at(0); align = at(1).toChar; fillGiven = true; alignGiven = true; pos = 2
    } else if (cps.nonEmpty && isAlign(at(0))) {
      align = at(0).toChar; alignGiven = true; pos = 1
    }
    var sign = '-'
    if (at(pos) == '+' || at(pos) == '-' || at(pos) == ' ') { sign = at(pos).toChar; pos += 1 }
    var z = false
    if (at(pos) == 'z') { z = true; pos += 1 }
    var alternate = false
    if (at(pos) == '#') { alternate = true; pos += 1 }
    if (!fillGiven && at(pos) == '0') {
      fill = '0'
      if (!alignGiven && defaultAlign == '>') align = '='
      pos += 1
    }
    def digits(): Int = {
      val start = pos
      while (at(pos) >= '0' && at(pos) <= '9') pos += 1
      if (pos == start) -1 else new String(cps, start, pos - start).toInt
    }
    val width = digits()
    var grouping = '\u0000'
    if (at(pos) == ',' || at(pos) == '_') { grouping = at(pos).toChar; pos += 1 }
    var precision = -1
    if (at(pos) == '.') { pos += 1; precision = digits() }
    val kind = if (pos < cps.length) cps(pos).toChar else '\u0000'
    Spec(fill, align, sign, z, alternate, width, grouping, precision, kind)
  }

  // --- strs

  def formatString(s: String, specText: String): String = {
    val spec = parse(specText, '<')
    val count = s.codePointCount(0, s.length)
    val cut = if (spec.precision >= 0 && spec.precision < count) {
      s.substring(0, s.offsetByCodePoints(0, spec.precision))
    } else s
    pad(spec, "", "", cut.codePointCount(0, cut.length), cut)
  }

  /** `text` (of `length` code points) aligned in the spec's width: `sign` and `prefix`
   * before a sign-aware padding, as `fill_number` lays them out. */
  private def pad(spec: Spec, sign: String, prefix: String, length: Int, text: String)
      : String = {
    val padding = spec.width - length
    if (padding <= 0) return sign + prefix + text
    val fill = new String(Character.toChars(spec.fill))
    spec.align match {
      case '<' => sign + prefix + text + fill * padding
      case '^' => fill * (padding / 2) + sign + prefix + text + fill * (padding - padding / 2)
      case '=' => sign + prefix + fill * padding + text
      case _ => fill * padding + sign + prefix + text
    }
  }

  // --- numbers

  /** CPython's `_PyUnicode_InsertThousandsGrouping`: `digits` grouped by `size` from the
   * right with `separator` (none for size 0), padded with zeros to `minWidth`. */
  private def group(digits: String, minWidth: Int, separator: String, size: Int): String = {
    var remaining = digits.length
    var width = minWidth
    var end = digits.length
    val out = new StringBuilder
    var useSeparator = false
    def put(len: Int): Unit = {
      val zeros = math.max(0, len - remaining)
      val chars = math.max(0, math.min(remaining, len))
      val part = "0" * zeros + digits.substring(end - chars, end) +
        (if (useSeparator) separator else "")
      out.insert(0, part)
      end -= chars
      remaining -= chars
    }
    var broken = false
    if (size > 0) {
      while (!broken) {
        val len = math.min(size, math.max(math.max(remaining, width), 1))
        put(len)
        useSeparator = true
        width -= len
        if (remaining <= 0 && width <= 0) broken = true else width -= separator.length
      }
    }
    if (!broken) put(math.max(math.max(remaining, width), 1))
    out.toString
  }

  /** A number laid out: its `digits` (grouped), then the `rest` (a decimal point, fraction,
   * exponent, `%`), without sign. */
  private def layout(spec: Spec, negative: Boolean, prefix: String, digits: String,
      rest: String, groupSize: Int): String = {
    val sign = if (negative) "-"
    else if (spec.sign == '+') "+"
    else if (spec.sign == ' ') " "
    else ""
    val separator = if (spec.grouping == '\u0000') "" else spec.grouping.toString
    val size = if (spec.grouping == '\u0000') 0 else groupSize
    val fixed = sign.length + prefix.length + rest.length
    val minWidth = if (spec.fill == '0' && spec.align == '=') spec.width - fixed else 0
    val grouped = if (digits.isEmpty) "" else group(digits, minWidth, separator, size)
    pad(spec, sign, prefix, fixed + grouped.length, grouped + rest)
  }

  def formatLong(x: Long, specText: String): String = {
    val spec = parse(specText, '>')
    spec.kind match {
      case 'e' | 'E' | 'f' | 'F' | 'g' | 'G' | '%' => formatParsedDouble(x.toDouble, spec)
      case kind =>
        val magnitude = BigInt(x).abs
        val (radix, prefix, size) = kind match {
          case 'b' => (2, "0b", 4)
          case 'o' => (8, "0o", 4)
          case 'x' => (16, "0x", 4)
          case 'X' => (16, "0X", 4)
          case _ => (10, "", 3)
        }
        val text = magnitude.toString(radix)
        layout(spec, x < 0, if (spec.alternate) prefix else "",
          if (kind == 'X') text.toUpperCase else text, "", size)
    }
  }

  def formatDouble(x: Double, specText: String): String =
    formatParsedDouble(x, parse(specText, '>'))

  private def formatParsedDouble(x: Double, spec: Spec): String = {
    val upper = spec.kind == 'E' || spec.kind == 'F' || spec.kind == 'G'
    var value = x
    var percent = false
    var kind = spec.kind.toLower
    if (spec.kind == '%') { kind = 'f'; value = x * 100; percent = true }
    val (negative, body) = if (value.isNaN) {
      (false, "nan")
    } else if (value.isInfinite) {
      (value < 0, "inf")
    } else {
      val exact = new JBigDecimal(math.abs(value))
      val text = kind match {
        case 'f' => fixed(exact, if (spec.precision < 0) 6 else spec.precision, spec.alternate)
        case 'e' =>
          scientific(exact, if (spec.precision < 0) 6 else spec.precision, spec.alternate)
        case 'g' => general(exact, if (spec.precision < 0) 6 else spec.precision,
            spec.alternate, dot0 = false)
        case _ if spec.precision < 0 => repr(exact, value, spec.alternate)
        case _ => general(exact, spec.precision, spec.alternate, dot0 = true)
      }
      val signBit = java.lang.Double.doubleToRawLongBits(value) < 0
      (signBit && !(spec.noNegativeZero && zeroDigits(text)), text)
    }
    val shown = (if (upper) body.toUpperCase else body) + (if (percent) "%" else "")
    val digits = shown.takeWhile(c => c >= '0' && c <= '9')
    layout(spec, negative, "", digits, shown.substring(digits.length), 3)
  }

  /** True if every digit of a formatted number (before any exponent) is a zero. */
  private def zeroDigits(text: String): Boolean =
    text.takeWhile(c => c != 'e' && c != 'E').forall(c => c == '0' || c == '.')

  private def fixed(exact: JBigDecimal, precision: Int, alternate: Boolean): String = {
    val text = exact.setScale(precision, RoundingMode.HALF_EVEN).toPlainString
    if (precision == 0 && alternate) text + "." else text
  }

  /** The digits of `exact` rounded to `count` significant digits (at least one), and the
   * decimal exponent of the first: zero gives "0" * count and 0. */
  private def significant(exact: JBigDecimal, count: Int): (String, Int) = {
    if (exact.signum == 0) return ("0" * count, 0)
    val rounded = exact.round(new MathContext(count, RoundingMode.HALF_EVEN))
    val unscaled = rounded.unscaledValue.toString
    val exponent = unscaled.length - 1 - rounded.scale
    val digits = (unscaled + "0" * count).substring(0, count)
    (digits, exponent)
  }

  private def exponentText(exponent: Int): String = {
    val magnitude = math.abs(exponent).toString
    (if (exponent < 0) "e-" else "e+") + (if (magnitude.length < 2) "0" + magnitude else magnitude)
  }

  private def scientific(exact: JBigDecimal, precision: Int, alternate: Boolean): String = {
    val (digits, exponent) = significant(exact, precision + 1)
    val point = if (precision > 0 || alternate) "." else ""
    digits.substring(0, 1) + point + digits.substring(1) + exponentText(exponent)
  }

  /** 'g' (and, with `dot0`, the float format without a type but with a precision). */
  private def general(exact: JBigDecimal, precisionGiven: Int, alternate: Boolean,
      dot0: Boolean): String = {
    val precision = if (precisionGiven == 0) 1 else precisionGiven
    val (allDigits, exponent) = significant(exact, precision)
    val digits = if (alternate) allDigits else allDigits.reverse.dropWhile(_ == '0').reverse
    val kept = if (digits.isEmpty) "0" else digits
    val useExponent = exponent < -4 || exponent >= (if (dot0) precision - 1 else precision)
    if (useExponent) {
      val point = if (kept.length > 1 || alternate) "." else ""
      kept.substring(0, 1) + point + kept.substring(1) + exponentText(exponent)
    } else {
      laidOut(kept, exponent, alternate || dot0, dot0)
    }
  }

  /** Digits with the first at decimal exponent `exponent`, positional; with `point`, a
   * decimal point even without a fraction, and with `zero` a ".0" after it then. */
  private def laidOut(digits: String, exponent: Int, point: Boolean, zero: Boolean): String = {
    if (exponent < 0) {
      "0." + "0" * (-exponent - 1) + digits
    } else if (digits.length > exponent + 1) {
      digits.substring(0, exponent + 1) + "." + digits.substring(exponent + 1)
    } else {
      val whole = digits + "0" * (exponent + 1 - digits.length)
      if (zero) whole + ".0" else if (point) whole + "." else whole
    }
  }

  /** Python's `repr` of a finite non-negative double: the shortest digits that read back as
   * it (the nearest such), positional for decimal exponents -4 to 15; `alternate` (`#`)
   * keeps a decimal point in a one-digit scientific form (`5.e-324`). */
  private def repr(exact: JBigDecimal, value: Double, alternate: Boolean): String = {
    val target = math.abs(value)
    if (target == 0.0) return "0.0"
    var found: JBigDecimal = null
    var n = 1
    while (found == null && n <= 17) {
      val rounded = exact.round(new MathContext(n, RoundingMode.HALF_EVEN))
      val unit = rounded.ulp
      val candidates = Seq(rounded, rounded.add(unit), rounded.subtract(unit))
        .filter(c => c.signum > 0 && c.doubleValue == target)
      if (candidates.nonEmpty) {
        found = candidates.minBy(c => c.subtract(exact).abs)
      }
      n += 1
    }
    val stripped = found.stripTrailingZeros
    val unscaled = stripped.unscaledValue.toString
    val exponent = unscaled.length - 1 - stripped.scale
    if (exponent >= -4 && exponent < 16) {
      laidOut(unscaled, exponent, point = true, zero = true)
    } else {
      val point = if (unscaled.length > 1 || alternate) "." else ""
      unscaled.substring(0, 1) + point + unscaled.substring(1) + exponentText(exponent)
    }
  }
}
