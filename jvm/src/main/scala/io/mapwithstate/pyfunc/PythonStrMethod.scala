package io.mapwithstate.pyfunc

import org.apache.spark.sql.catalyst.expressions.{Expression, UnaryExpression}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode}
import org.apache.spark.sql.types.{BooleanType, DataType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * One of Python's `str` predicates or case methods of a string, which the Python state
 * function compiler emits as the reserved function `__mws_python_str_<method>(s)` (registered
 * by [[PythonFunctions]]) for `s.isdigit()`, `s.lower()`, `s.title()` and the others: Python's
 * answer for every code point, from [[PythonUnicode]]'s tables. Null where `s` is null (the
 * compiler checks `None` first). The generated code calls [[PythonUnicode]]'s method directly.
 */
case class PythonStrMethod(method: PythonStrMethod.Method, child: Expression)
  extends UnaryExpression {

  override def dataType: DataType = if (method.predicate) BooleanType else StringType
  override def prettyName: String = method.functionName

  override protected def nullSafeEval(s: Any): Any = method(s.asInstanceOf[UTF8String])

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode = {
    val unicode = PythonUnicode.getClass.getName.stripSuffix("$")
    defineCodeGen(ctx, ev, s => s"$unicode.${method.name}($s)")
  }

  override protected def withNewChildInternal(newChild: Expression): PythonStrMethod =
    copy(child = newChild)
}

object PythonStrMethod {

  /** A method: its Python name (and [[PythonUnicode]]'s), and what it computes. */
  final case class Method(name: String, predicate: Boolean, compute: UTF8String => Any) {
    def functionName: String = s"__mws_python_str_$name"
    def apply(s: UTF8String): Any = compute(s)
  }

  private def predicate(name: String, test: UTF8String => Boolean): Method =
    Method(name, predicate = true, s => test(s))

  private def caseMethod(name: String, map: UTF8String => UTF8String): Method =
    Method(name, predicate = false, map)

  val Methods: Seq[Method] = Seq(
    predicate("isdecimal", PythonUnicode.isdecimal),
    predicate("isdigit", PythonUnicode.isdigit),
    predicate("isnumeric", PythonUnicode.isnumeric),
    predicate("isalpha", PythonUnicode.isalpha),
    predicate("isalnum", PythonUnicode.isalnum),
    predicate("isspace", PythonUnicode.isspace),
    predicate("isascii", PythonUnicode.isascii),
    predicate("isupper", PythonUnicode.isupper),
    predicate("islower", PythonUnicode.islower),
    predicate("istitle", PythonUnicode.istitle),
    predicate("isprintable", PythonUnicode.isprintable),
    predicate("isidentifier", PythonUnicode.isidentifier),
    caseMethod("lower", PythonUnicode.lower),
    caseMethod("upper", PythonUnicode.upper),
    caseMethod("casefold", PythonUnicode.casefold),
    caseMethod("swapcase", PythonUnicode.swapcase),
    caseMethod("capitalize", PythonUnicode.capitalize),
    caseMethod("title", PythonUnicode.title),
    // Not a str method: the text int() and float() parse (digits and spaces made ASCII).
    caseMethod("ascii_digits", PythonUnicode.ascii_digits))
}
