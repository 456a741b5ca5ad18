package io.mapwithstate.pyfunc

import java.util.concurrent.ConcurrentHashMap
import java.util.regex.{Matcher, Pattern}

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, GenericInternalRow}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.catalyst.util.{ArrayData, GenericArrayData}
import org.apache.spark.sql.types.{
  ArrayType,
  DataType,
  LongType,
  StringType,
  StructField,
  StructType
}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Python's `re` functions of a str, which the Python state function compiler emits as the
 * reserved functions `__mws_python_re_<function>(pattern, s, ...)` (registered by
 * [[PythonFunctions]]) for `re.match`, `re.search`, `re.fullmatch`, `re.findall`, `re.split`
 * and `re.sub` and the compiled pattern's methods.
 *
 * `pattern` is a Java pattern the compiler translated from the Python one
 * (`mapwithstate.pyfunc.regex_syntax`): its classes spelled out as code point ranges, its
 * anchors as lookarounds, so that one step of Java's engine matches what one of CPython's sre
 * does. What is left to this file is the part of sre that lies outside the engine, written once
 * as CPython 3.11's `Modules/_sre/sre.c` does it: where a search starts after an empty match
 * (`must_advance`: the next search may not end an empty match where it starts, but may match
 * something longer there, which Java's `find` skips), how `findall`, `split` and `sub` step,
 * what an unmatched group gives each of them, and offsets counted in code points rather than
 * Java's UTF-16 units. A search never starts between a surrogate pair's halves (the compiler's
 * pattern begins with a guard), where Java's `find` would try.
 *
 * Every function is null where an argument is (the compiler fails the query on a `None`
 * first). The compiled `Pattern`s are cached per pattern text, per JVM.
 */
case class PythonRegex(function: PythonRegex.Function, children: Seq[Expression])
  extends Expression
  with CodegenFallback {

  override def dataType: DataType = function.dataType
  override def nullable: Boolean = true
  override def prettyName: String = function.functionName

  /** The pattern compiled once where it is a constant, as the compiler always sends it. */
  @transient private lazy val constantPattern: PythonRegex.Compiled = children.head match {
    case p if p.foldable => Option(p.eval()).map(t => PythonRegex.compile(t.toString)).orNull
    case _ => null
  }

  override def eval(input: InternalRow): Any = {
    val values = children.map(_.eval(input))
    if (values.contains(null)) null
    else {
      val compiled =
        if (constantPattern != null) constantPattern else PythonRegex.compile(values.head.toString)
      function.compute(compiled, values(1).toString, values.drop(2))
    }
  }

  override protected def withNewChildrenInternal(
      newChildren: IndexedSeq[Expression]): PythonRegex = copy(children = newChildren)
}

object PythonRegex {

  /** A function: its Python name, arity (the pattern and the string first), result type. */
  abstract class Function(val name: String, val arity: Int, val dataType: DataType)
    extends Serializable {
    def functionName: String = s"__mws_python_re_$name"

    /** The function of the string `s` (its other arguments in `args`), not null. */
    def compute(compiled: Compiled, s: String, args: Seq[Any]): Any
  }

  /** What a match gives the compiler: `g` the groups (0 the whole match, null unmatched) and
   * `p` each group's start and end in code points (-1 unmatched), as `span(n)`. */
  val MatchType: StructType = StructType(Seq(
      StructField("g", ArrayType(StringType, containsNull = true)),
      StructField("p", ArrayType(LongType, containsNull = false))))

  /** `re.match` (`lookingAt`), `re.search` (`find`) or `re.fullmatch` (`matches`). */
  private final class MatchFunction(name: String) extends Function(name, 2, MatchType) {
    def compute(compiled: Compiled, s: String, args: Seq[Any]): Any = {
      val m = matcher(compiled.pattern, s, 0)
      val found = name match {
        case "match" => m.lookingAt()
        case "search" => m.find()
        case _ => m.matches()
      }
      if (!found) null else matchRow(s, m)
    }
  }

  private def matchRow(s: String, m: Matcher): InternalRow = {
    val n = m.groupCount()
    val groups = new Array[Any](n + 1)
    val spans = new Array[Any](2 * (n + 1))
    for (i <- 0 to n) {
      val start = m.start(i)
      groups(i) = if (start < 0) null else UTF8String.fromString(m.group(i))
      spans(2 * i) = if (start < 0) -1L else s.codePointCount(0, start).toLong
      spans(2 * i + 1) = if (start < 0) -1L else s.codePointCount(0, m.end(i)).toLong
    }
    new GenericInternalRow(Array[Any](new GenericArrayData(groups), new GenericArrayData(spans)))
  }

  /** `re.findall`: per match, its groups from 1 ('' for an unmatched one), or the match. */
  private object Findall
    extends Function("findall", 2, ArrayType(ArrayType(StringType, containsNull = false))) {
    def compute(compiled: Compiled, s: String, args: Seq[Any]): Any = {
      val found = ArrayBuffer[Any]()
      steps(compiled, s, Long.MaxValue) { m =>
        val n = m.groupCount()
        val items = if (n == 0) Array[Any](UTF8String.fromString(m.group()))
        else {
          Array.tabulate[Any](n)(i =>
            UTF8String.fromString(Option(m.group(i + 1)).getOrElse("")))
        }
        found += new GenericArrayData(items)
      }
      new GenericArrayData(found.toArray)
    }
  }

  /** `re.split(pattern, s, maxsplit)`: the pieces, each match's groups (null unmatched)
   * between them; no split for a negative `maxsplit`, any number for 0. */
  private object Split extends Function("split", 3, ArrayType(StringType, containsNull = true)) {
    def compute(compiled: Compiled, s: String, args: Seq[Any]): Any = {
      val maxsplit = args(0).asInstanceOf[Long]
      val out = ArrayBuffer[Any]()
      var last = 0
      if (maxsplit >= 0) {
        steps(compiled, s, if (maxsplit == 0) Long.MaxValue else maxsplit) { m =>
          out += UTF8String.fromString(s.substring(last, m.start()))
          for (i <- 1 to m.groupCount()) {
            out += Option(m.group(i)).map(UTF8String.fromString).orNull
          }
          last = m.end()
        }
      }
      out += UTF8String.fromString(s.substring(last))
      new GenericArrayData(out.toArray)
    }
  }

  /** `re.sub(pattern, template, s, count)`: `template` alternates literal text and group
   * numbers (as text), the expansion of a replacement the compiler parsed; an unmatched group
   * gives ''. No substitution for a negative `count`, any number for 0. */
  private object Sub extends Function("sub", 4, StringType) {
    def compute(compiled: Compiled, s: String, args: Seq[Any]): Any = {
      val template = args(0).asInstanceOf[ArrayData]
      val parts = Array.tabulate(template.numElements())(i => template.getUTF8String(i).toString)
      val count = args(1).asInstanceOf[Long]
      val out = new java.lang.StringBuilder
      var last = 0
      if (count >= 0) {
        steps(compiled, s, if (count == 0) Long.MaxValue else count) { m =>
          out.append(s, last, m.start())
          for (i <- parts.indices) {
            if (i % 2 == 0) out.append(parts(i))
            else Option(m.group(parts(i).toInt)).foreach(g => out.append(g))
          }
          last = m.end()
        }
      }
      out.append(s, last, s.length)
      UTF8String.fromString(out.toString)
    }
  }

  val Functions: Seq[Function] =
    Seq(new MatchFunction("match"), new MatchFunction("search"), new MatchFunction("fullmatch"),
      Findall, Split, Sub)

  /** A Python pattern's translation: `pattern` itself, and `nonEmpty`, which matches what it
   * does except an empty match where the search starts (sre's `must_advance`). */
  final case class Compiled(pattern: Pattern, nonEmpty: Pattern)

  private val cache = new ConcurrentHashMap[String, Compiled]()

  def compile(java: String): Compiled = cache.computeIfAbsent(java,
    { text =>
      val expanded = Classes.foldLeft(text) { case (t, (token, expansion)) =>
        t.replace(token, expansion.value)
      }
      Compiled(Pattern.compile(expanded), Pattern.compile(s"(?:$expanded)(?!\\G)"))
    })

  /** A class spelled out once, when a pattern first uses it. */
  private final class Expansion(in: Int => Boolean) {
    lazy val value: String = codePointClass(in)
  }

  /**
   * What the compiler writes for Python's `\w`, `\d` and `\s` and their complements (large
   * classes, spelled out here from [[PythonUnicode]]'s tables rather than in every plan):
   * `\p{MwsPythonWord}` and `\P{MwsPythonWord}` and so on, no Java syntax, so an unexpanded
   * one fails to compile.
   */
  private val Classes: Seq[(String, Expansion)] = Seq(
    "Word" -> (PythonUnicode.isWord _),
    "Digit" -> (PythonUnicode.isDecimalDigit _),
    "Space" -> (PythonUnicode.isWhitespace _)).flatMap { case (name, in) =>
    Seq(s"\\p{MwsPython$name}" -> new Expansion(in),
      s"\\P{MwsPython$name}" -> new Expansion(cp => !in(cp)))
  }

  /** A Java class of the code points with (or without) `isWord`, by [[PythonUnicode]]. */
  private def codePointClass(in: Int => Boolean): String = {
    val out = new java.lang.StringBuilder("[")
    var cp = 0
    def member(cp: Int): Boolean = in(cp) && (cp < 0xd800 || cp > 0xdfff)
    while (cp <= Character.MAX_CODE_POINT) {
      if (member(cp)) {
        val first = cp
        while (cp < Character.MAX_CODE_POINT && member(cp + 1)) cp += 1
        out.append(f"\\x{$first%x}")
        if (cp > first) out.append(f"-\\x{$cp%x}")
      }
      cp += 1
    }
    out.append("]").toString
  }

  /** A matcher over `s` from `start` that sees all of `s`: lookbehinds and `\b` before
   * `start`, and `\A` only at 0. */
  private def matcher(pattern: Pattern, s: String, start: Int): Matcher =
    pattern.matcher(s).region(start, s.length).useTransparentBounds(true)
      .useAnchoringBounds(false)

  /**
   * CPython's search from `start`; with `mustAdvance`, an empty match at `start` does not count
   * (the engine backtracks into a longer one there, or the search goes on from the next code
   * point). The match, or null.
   */
  private def search(compiled: Compiled, s: String, start: Int, mustAdvance: Boolean): Matcher =
    if (!mustAdvance) {
      val m = matcher(compiled.pattern, s, start)
      if (m.find()) m else null
    } else {
      val here = matcher(compiled.nonEmpty, s, start)
      if (here.lookingAt()) here
      else if (start >= s.length) null
      else search(compiled, s, start + Character.charCount(s.codePointAt(start)), false)
    }

  /** The loop of `findall`, `split` and `sub` (sre.c's): up to `limit` matches, in order,
   * each handed to `each`; after an empty match the next may not be empty where it starts. */
  private def steps(compiled: Compiled, s: String, limit: Long)(each: Matcher => Unit): Unit = {
    var start = 0
    var mustAdvance = false
    var n = 0L
    while (n < limit && start <= s.length) {
      val m = search(compiled, s, start, mustAdvance)
      if (m == null) return
      each(m)
      n += 1
      mustAdvance = m.end() == m.start()
      start = m.end()
    }
  }
}
