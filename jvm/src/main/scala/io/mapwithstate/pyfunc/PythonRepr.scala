package io.mapwithstate.pyfunc

import org.apache.spark.sql.catalyst.expressions.{Expression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{DataType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Python's `repr(s)` of a str, which the Python state function compiler emits as
 * `__mws_python_repr(s)` for `repr(s)`, `f"{s!r}"` and `"%r" % s`: quoted with `'` (`"` when
 * the text holds a `'` and no `"`), the quote and backslash escaped, `\t \n \r` as such, other
 * ASCII controls as `\xhh`, and a non-ASCII character Python deems not printable (a control,
 * format, surrogate, private-use, unassigned or separator other than the space) as `\xhh`,
 * `\uhhhh` or `\Uhhhhhhhh`. Printability comes from the JVM's Unicode tables, which may be an
 * older Unicode version than the Python's: a character assigned between the two is printable
 * in Python and escaped here.
 */
case class PythonRepr(child: Expression) extends UnaryExpression {

  override def dataType: DataType = StringType
  override def prettyName: String = PythonRepr.Name

  override protected def nullSafeEval(s: Any): Any =
    UTF8String.fromString(PythonRepr.repr(s.toString))

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val repr = PythonRepr.getClass.getName.stripSuffix("$")
    val utf8 = classOf[UTF8String].getName
    defineCodeGen(ctx, ev, s => s"$utf8.fromString($repr.repr($s.toString()))")
  }

  override protected def withNewChildInternal(newChild: Expression): PythonRepr =
    copy(child = newChild)
}

object PythonRepr {
  val Name = "__mws_python_repr"

  private def printable(cp: Int): Boolean = Character.getType(cp) match {
    case Character.CONTROL | Character.FORMAT | Character.SURROGATE | Character.PRIVATE_USE |
        Character.UNASSIGNED | Character.LINE_SEPARATOR | Character.PARAGRAPH_SEPARATOR =>
      false
    case Character.SPACE_SEPARATOR => cp == ' '
    case _ => true
  }

  /** CPython's `unicode_repr`. */
  def repr(s: String): String = {
    val quote = if (s.indexOf('\'') >= 0 && s.indexOf('"') < 0) '"' else '\''
    val out = new StringBuilder
    out.append(quote)
    s.codePoints().forEach { cp =>
      if (cp == quote || cp == '\\') out.append('\\').append(cp.toChar)
      else if (cp == '\t') out.append("\\t")
      else if (cp == '\n') out.append("\\n")
      else if (cp == '\r') out.append("\\r")
      else if (cp < ' ' || cp == 0x7f) out.append(f"\\x$cp%02x")
      else if (cp < 0x7f || printable(cp)) out.appendAll(Character.toChars(cp))
      else if (cp <= 0xff) out.append(f"\\x$cp%02x")
      else if (cp <= 0xffff) out.append(f"\\u$cp%04x")
      else out.append(f"\\U$cp%08x")
    }
    out.append(quote)
    out.toString
  }
}
