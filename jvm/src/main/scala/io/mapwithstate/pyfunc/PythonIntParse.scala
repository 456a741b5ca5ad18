package io.mapwithstate.pyfunc

import java.math.BigInteger

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BinaryExpression, Expression, GenericInternalRow}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{DataType, LongType, StringType, StructField, StructType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Python 3.11's `int(s, base)` of a str, for a base known only at run time or base 0, which
 * the Python state function compiler emits as the reserved function `__mws_python_int(s,
 * base)` (registered by [[PythonFunctions]]).
 *
 * CPython's `_PyLong_FromUnicodeObject` ported: Unicode decimal digits and whitespace become
 * ASCII first; then `PyLong_FromString`: whitespace around, a sign, the base's prefix
 * (`0x`, `0o`, `0b`; for base 0 the prefix decides, else base 10 without leading zeros but
 * for zero itself), single underscores between digits and after the prefix. The base must be
 * 0 or 2 to 36.
 *
 * The result is a struct: `n`, the int, or `error`: Python's `ValueError` and its message
 * (`invalid literal for int() with base 0: '010'`), or the compiler's `OverflowError` for an
 * int beyond 64 bits.
 */
case class PythonIntParse(string: Expression, base: Expression) extends BinaryExpression {

  override def left: Expression = string
  override def right: Expression = base
  override def dataType: DataType = PythonIntParse.ResultType
  override def prettyName: String = PythonIntParse.Name

  override protected def nullSafeEval(s: Any, b: Any): Any =
    PythonIntParse.parse(s.toString, b.asInstanceOf[Long])

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val parse = PythonIntParse.getClass.getName.stripSuffix("$")
    defineCodeGen(ctx, ev, (s, b) => s"$parse.parse($s.toString(), $b)")
  }

  override protected def withNewChildrenInternal(
      newLeft: Expression,
      newRight: Expression): PythonIntParse = copy(string = newLeft, base = newRight)
}

object PythonIntParse {

  val Name = "__mws_python_int"

  val ResultType: StructType =
    StructType(Seq(StructField("n", LongType), StructField("error", StringType)))

  private def failure(exception: String, message: String): InternalRow =
    new GenericInternalRow(Array[Any](null, UTF8String.fromString(s"$exception: $message")))

  /** `Py_UNICODE_ISSPACE`: the characters `str.isspace` takes. */
  private def isSpace(cp: Int): Boolean =
    (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
    cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
    cp == 0x202f || cp == 0x205f || cp == 0x3000

  /** `_PyUnicode_TransformDecimalAndSpaceToASCII`: anything else non-ASCII is `?`. */
  private def ascii(s: String): String = {
    val out = new StringBuilder
    s.codePoints.forEach { cp =>
      if (isSpace(cp)) out.append(' ')
      else if (Character.getType(cp) == Character.DECIMAL_DIGIT_NUMBER) {
        out.append(('0' + Character.digit(cp, 10)).toChar)
      } else if (cp < 128) out.append(cp.toChar)
      else out.append('?')
    }
    out.toString
  }

  private def digitValue(c: Char): Int =
    if (c >= '0' && c <= '9') c - '0'
    else if (c >= 'a' && c <= 'z') c - 'a' + 10
    else if (c >= 'A' && c <= 'Z') c - 'A' + 10
    else 99

  /** `int(s, base)`, or Python's error. */
  def parse(s: String, base: Long): InternalRow = {
    if ((base != 0 && base < 2) || base > 36) {
      return failure("ValueError", "int() base must be >= 2 and <= 36, or 0")
    }
    val repr = PythonRepr.repr(s)
    val invalid = failure("ValueError",
      s"invalid literal for int() with base $base: " +
        (if (repr.length > 200) repr.take(200) else repr))
    val t = ascii(s)
    var i = 0
    def at(k: Int): Char = if (k < t.length) t.charAt(k) else '\u0000'
    def space(c: Char): Boolean = c == ' ' || (c >= '\t' && c <= '\r')
    while (space(at(i))) i += 1
    val negative = at(i) == '-'
    if (at(i) == '+' || at(i) == '-') i += 1
    var b = base.toInt
    var zerosOnly = false
    if (b == 0) {
      b =
        if (at(i) != '0') 10
        else if (at(i + 1) == 'x' || at(i + 1) == 'X') 16
        else if (at(i + 1) == 'o' || at(i + 1) == 'O') 8
        else if (at(i + 1) == 'b' || at(i + 1) == 'B') 2
        else {
          // Base 0 forbids leading zeros: only zero itself may start with 0.
          zerosOnly = true
          10
        }
    }
    val prefix = b match {
      case 16 => "xX"
      case 8 => "oO"
      case 2 => "bB"
      case _ => ""
    }
    var underscoreAllowed = false
    if (at(i) == '0' && prefix.nonEmpty && prefix.indexOf(at(i + 1)) >= 0) {
      i += 2
      // An underscore may follow the prefix.
      underscoreAllowed = true
    }
    val digits = new StringBuilder
    var lastUnderscore = false
    var more = true
    while (more) {
      val c = at(i)
      if (c == '_' && (digits.nonEmpty || underscoreAllowed) && !lastUnderscore) {
        lastUnderscore = true
        underscoreAllowed = false
        i += 1
      } else if (digitValue(c) < b) {
        digits.append(c)
        lastUnderscore = false
        i += 1
      } else {
        more = false
      }
    }
    if (digits.isEmpty || lastUnderscore) return invalid
    if (zerosOnly && digits.exists(_ != '0')) return invalid
    while (space(at(i))) i += 1
    if (i != t.length) return invalid
    val magnitude = new BigInteger(digits.toString, b)
    val n = if (negative) magnitude.negate else magnitude
    if (n.bitLength > 63) {
      failure("OverflowError", "int result does not fit in 64 bits (BIGINT)")
    } else {
      new GenericInternalRow(Array[Any](n.longValue, null))
    }
  }
}
