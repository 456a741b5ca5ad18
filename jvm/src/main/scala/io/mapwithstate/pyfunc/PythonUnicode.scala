package io.mapwithstate.pyfunc

import java.nio.charset.StandardCharsets
import scala.collection.mutable.ArrayBuffer
import scala.io.Source

import org.apache.spark.unsafe.types.UTF8String

/**
 * Python's `str` predicates (`isdigit`, `isalpha`, `isupper`, `istitle`, `isprintable`,
 * `isidentifier`, ...) and case methods (`lower`, `upper`, `title`, `capitalize`, `swapcase`,
 * `casefold`), and the ASCII text `int()` and `float()` parse of a str ([[ascii_digits]]), as
 * CPython computes them (`Objects/unicodeobject.c`), from CPython's own character tables
 * rather than the JVM's: Java 17 has Unicode 13 and its own special casing, Python 3.11
 * Unicode 14, and the compiled state function must answer as Python does for every code point.
 *
 * The tables are `python-unicode.txt`, generated from Python's `str` methods by
 * `dev/gen_python_unicode.py` (a test checks it is current): each code point's flags (CPython's
 * character type flags, and what `isprintable` and `isidentifier` read), its full case mappings
 * where a character does not map to itself, and a decimal digit's ASCII digit. Loaded
 * once per JVM: the Basic Multilingual Plane's flags in an array, the rest as runs.
 */
object PythonUnicode {

  // CPython's character type flags, as the tables name them.
  private val Decimal = 1
  private val Digit = 2
  private val Numeric = 4
  private val Alpha = 8
  private val Space = 16
  private val Upper = 32
  private val Lower = 64
  private val Title = 128
  private val Cased = 256
  private val Ignorable = 512
  private val Printable = 1024
  private val IdStart = 2048
  private val IdContinue = 4096
  private val FlagNames = Map("decimal" -> Decimal, "digit" -> Digit, "numeric" -> Numeric,
    "alpha" -> Alpha, "space" -> Space, "upper" -> Upper, "lower" -> Lower, "title" -> Title,
    "cased" -> Cased, "ignorable" -> Ignorable, "printable" -> Printable, "idstart" -> IdStart,
    "idcontinue" -> IdContinue)

  /** Whether a code point has a mapping (not to itself) in each table: most have none. */
  private val MappingFlags = Map("tolower" -> (1 << 13), "toupper" -> (1 << 14),
    "totitle" -> (1 << 15), "tofold" -> (1 << 16), "todecimal" -> (1 << 17))
  private val Alnum = Alpha | Decimal | Digit | Numeric
  private val CapitalSigma = 0x3a3

  /**
   * A full case mapping: the code points that have one (their flags have `flag`), sorted, and
   * what each maps to.
   */
  private final class Mapping(flag: Int, keys: Array[Int], values: Array[String]) {
    def append(cp: Int, out: java.lang.StringBuilder): Unit =
      if ((flags(cp) & flag) == 0) out.appendCodePoint(cp)
      else out.append(values(java.util.Arrays.binarySearch(keys, cp)))
  }

  private val Resource = "python-unicode.txt"
  private val (bmp, runStarts, runFlags, toLower, toUpper, toTitle, toFold, toDecimal) = load()

  private def lines(): Seq[String] = {
    val stream = getClass.getResourceAsStream(Resource)
    require(stream != null, s"$Resource is missing from the plugin's jar")
    val source = Source.fromInputStream(stream, StandardCharsets.US_ASCII.name)
    try source.getLines().toVector
    finally source.close()
  }

  private def load(): (Array[Int], Array[Int], Array[Int], Mapping, Mapping, Mapping, Mapping,
      Mapping) = {
    val flags = new Array[Int](0x110000)
    val mappings = scala.collection.mutable.Map[String, ArrayBuffer[(Int, String)]]()
    def hex(text: String): Int = Integer.parseInt(text, 16)
    lines().filterNot(_.startsWith("#")).foreach { line =>
      line.split(" ").toList match {
        case "flag" :: name :: ranges =>
          val flag = FlagNames(name)
          ranges.foreach { range =>
            val Array(first, last) = range.split("-").map(hex)
            (first to last).foreach(cp => flags(cp) |= flag)
          }
        case "unicode" :: _ => ()
        case name :: cp :: to :: Nil =>
          val text = new java.lang.StringBuilder
          to.split("\\.").foreach(t => text.appendCodePoint(hex(t)))
          mappings.getOrElseUpdate(name, ArrayBuffer()) += (hex(cp) -> text.toString)
          flags(hex(cp)) |= MappingFlags(name)
        case _ => throw new IllegalStateException(s"$Resource: unreadable line: $line")
      }
    }
    def mapping(name: String): Mapping = {
      val sorted = mappings(name).sortBy(_._1)
      new Mapping(MappingFlags(name), sorted.map(_._1).toArray, sorted.map(_._2).toArray)
    }
    // Beyond the BMP: runs of code points with the same flags, by their first code point.
    val starts = ArrayBuffer[Int]()
    val runs = ArrayBuffer[Int]()
    (0x10000 until 0x110000).foreach { cp =>
      if (runs.isEmpty || runs.last != flags(cp)) {
        starts += cp
        runs += flags(cp)
      }
    }
    (java.util.Arrays.copyOf(flags, 0x10000), starts.toArray, runs.toArray, mapping("tolower"),
      mapping("toupper"), mapping("totitle"), mapping("tofold"), mapping("todecimal"))
  }

  /** The code point's flags (CPython's character type flags, and which mappings it has). */
  private def flags(cp: Int): Int =
    if (cp < 0x10000) bmp(cp)
    else {
      val at = java.util.Arrays.binarySearch(runStarts, cp)
      runFlags(if (at >= 0) at else -at - 2)
    }

  private def has(cp: Int, flag: Int): Boolean = (flags(cp) & flag) != 0

  /** The code point at byte `i` of `s` (the first byte of a character), read in place. */
  @inline private def codePointAt(s: UTF8String, i: Int): Int = {
    val b = s.getByte(i)
    if (b >= 0) b else s.codePointFrom(i)
  }

  /** The number of bytes of the character at byte `i` of `s`. */
  @inline private def width(s: UTF8String, i: Int): Int =
    UTF8String.numBytesForFirstByte(s.getByte(i))

  /** Whether `s` is not empty and each of its characters has one of `flag`'s bits. */
  private def all(s: UTF8String, flag: Int): Boolean = {
    var i = 0
    while (i < s.numBytes) {
      if (!has(codePointAt(s, i), flag)) return false
      i += width(s, i)
    }
    s.numBytes > 0
  }

  /** Whether `cp` is a word character of Python's `re` (`\w`: `str.isalnum()`, or `_`). */
  def isWord(cp: Int): Boolean = cp == '_' || has(cp, Alnum)

  /** Whether `cp` is a digit of Python's `re` (`\d`: `str.isdecimal()`). */
  def isDecimalDigit(cp: Int): Boolean = has(cp, Decimal)

  /** Whether `cp` is whitespace to Python's `re` (`\s`: `str.isspace()`). */
  def isWhitespace(cp: Int): Boolean = has(cp, Space)

  def isdecimal(s: UTF8String): Boolean = all(s, Decimal)
  def isdigit(s: UTF8String): Boolean = all(s, Digit)
  def isnumeric(s: UTF8String): Boolean = all(s, Numeric)
  def isalpha(s: UTF8String): Boolean = all(s, Alpha)
  def isalnum(s: UTF8String): Boolean = all(s, Alnum)
  def isspace(s: UTF8String): Boolean = all(s, Space)
  def isascii(s: UTF8String): Boolean = s.isFullAscii

  /** Every character printable (the empty string too). */
  def isprintable(s: UTF8String): Boolean = s.numBytes == 0 || all(s, Printable)

  /** CPython's `unicode_isidentifier_impl`: XID_Start or `_`, then XID_Continue characters. */
  def isidentifier(s: UTF8String): Boolean = {
    if (s.numBytes == 0 || !has(codePointAt(s, 0), IdStart)) return false
    var i = width(s, 0)
    while (i < s.numBytes) {
      if (!has(codePointAt(s, i), IdContinue)) return false
      i += width(s, i)
    }
    true
  }

  /**
   * CPython's `_PyUnicode_TransformDecimalAndSpaceToASCII`, the text `int()` and `float()` of a
   * `str` parse: an ASCII string as it is; else characters below 127 kept, whitespace a space,
   * a decimal digit its ASCII digit, and the first other character `?`, where the text ends.
   */
  def ascii_digits(s: UTF8String): UTF8String =
    if (s.isFullAscii) s
    else {
      val points = s.toString.codePoints().toArray
      val out = new java.lang.StringBuilder(points.length)
      var i = 0
      while (i < points.length) {
        val cp = points(i)
        if (cp < 127) out.appendCodePoint(cp)
        else if (has(cp, Space)) out.append(' ')
        else if (has(cp, Decimal)) toDecimal.append(cp, out)
        else {
          out.append('?')
          i = points.length
        }
        i += 1
      }
      UTF8String.fromString(out.toString)
    }

  /** CPython's `unicode_isupper_impl` (`upper` true) or `unicode_islower_impl`. */
  private def oneCase(s: UTF8String, upper: Boolean): Boolean = {
    val (wanted, other) = if (upper) (Upper, Lower) else (Lower, Upper)
    var cased = false
    var i = 0
    while (i < s.numBytes) {
      val f = flags(codePointAt(s, i))
      if ((f & (other | Title)) != 0) return false
      if ((f & wanted) != 0) cased = true
      i += width(s, i)
    }
    cased
  }

  def isupper(s: UTF8String): Boolean = oneCase(s, upper = true)
  def islower(s: UTF8String): Boolean = oneCase(s, upper = false)

  /** CPython's `unicode_istitle_impl`. */
  def istitle(s: UTF8String): Boolean = {
    var cased = false
    var previousIsCased = false
    var i = 0
    while (i < s.numBytes) {
      val f = flags(codePointAt(s, i))
      i += width(s, i)
      if ((f & (Upper | Title)) != 0) {
        if (previousIsCased) return false
        previousIsCased = true
        cased = true
      } else if ((f & Lower) != 0) {
        if (!previousIsCased) return false
        previousIsCased = true
        cased = true
      } else {
        previousIsCased = false
      }
    }
    cased
  }

  /**
   * CPython's `handle_capital_sigma`: `points(i)`, a capital sigma, lowers to the final sigma
   * after a cased character and not before one (case-ignorable characters skipped both ways).
   */
  private def lowerSigma(points: Array[Int], i: Int): Int = {
    var j = i - 1
    while (j >= 0 && has(points(j), Ignorable)) j -= 1
    var finalSigma = j >= 0 && has(points(j), Cased)
    if (finalSigma) {
      j = i + 1
      while (j < points.length && has(points(j), Ignorable)) j += 1
      finalSigma = j == points.length || !has(points(j), Cased)
    }
    if (finalSigma) 0x3c2 else 0x3c3
  }

  /** CPython's `lower_ucs4`: `points(i)` lowered, in its context. */
  private def appendLower(points: Array[Int], i: Int, out: java.lang.StringBuilder): Unit =
    if (points(i) == CapitalSigma) out.appendCodePoint(lowerSigma(points, i))
    else toLower.append(points(i), out)

  /** `s`'s code points mapped one by one, each by `map(points, i, out)`. */
  private def mapped(s: UTF8String)(
      map: (Array[Int], Int, java.lang.StringBuilder) => Unit): UTF8String = {
    val points = s.toString.codePoints().toArray
    val out = new java.lang.StringBuilder(points.length + 8)
    var i = 0
    while (i < points.length) {
      map(points, i, out)
      i += 1
    }
    UTF8String.fromString(out.toString)
  }

  def lower(s: UTF8String): UTF8String =
    if (s.isFullAscii) s.toLowerCaseAscii else mapped(s)(appendLower)

  def upper(s: UTF8String): UTF8String =
    if (s.isFullAscii) s.toUpperCaseAscii
    else mapped(s)((points, i, out) => toUpper.append(points(i), out))

  def casefold(s: UTF8String): UTF8String =
    if (s.isFullAscii) s.toLowerCaseAscii
    else mapped(s)((points, i, out) => toFold.append(points(i), out))

  /** CPython's `do_swapcase`. */
  def swapcase(s: UTF8String): UTF8String = mapped(s) { (points, i, out) =>
    val f = flags(points(i))
    if ((f & Upper) != 0) appendLower(points, i, out)
    else if ((f & Lower) != 0) toUpper.append(points(i), out)
    else out.appendCodePoint(points(i))
  }

  /** CPython's `do_capitalize`: the first character titled, the rest lowered. */
  def capitalize(s: UTF8String): UTF8String = mapped(s) { (points, i, out) =>
    if (i == 0) toTitle.append(points(i), out) else appendLower(points, i, out)
  }

  /** CPython's `do_title`: a character titled after an uncased one, else lowered. */
  def title(s: UTF8String): UTF8String = mapped(s) { (points, i, out) =>
    if (i > 0 && has(points(i - 1), Cased)) appendLower(points, i, out)
    else toTitle.append(points(i), out)
  }
}
