package io.mapwithstate.pyfunc

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  ExprId,
  Expression,
  LambdaFunction,
  NamedLambdaVariable,
  SimpleHigherOrderFunction
}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, CodegenFallback, ExprCode}
import org.apache.spark.sql.catalyst.expressions.codegen.Block._
import org.apache.spark.sql.types.DataType

/**
 * `let`: `__mws_python_let(value, x -> body)` is `body` with `x` bound to `value`, which is
 * evaluated once, first. The Python state function compiler names a large value read more
 * than once this way (python/mapwithstate/pyfunc/bindings.py), so that each value is in a
 * compiled Column's plan once; a value may use the names bound around it, so the names of a
 * function nest one `let` in the next.
 *
 * It replaces the `transform(array(value), x -> body)[0]` SQL offers for this, for two costs
 * of that form. Spark analyses nested `transform`s in time exponential in their nesting: its
 * `dataType` and `nullable` are `def`s that each ask the lambda's, and so every level asks
 * the level below twice. Here they are computed once per instance (lazy vals: a nest of n
 * lets costs n to type). And the array around the value, and the array of the result, are
 * made and read per row: here the generated code evaluates the value into the variable's
 * fields (class fields, as Spark's lambda variables are, so that the code Spark moves into
 * methods of their own where it is long reads them too) and then the body, inline.
 *
 * A `HigherOrderFunction`, so that Spark's analyzer binds its lambda as it binds
 * `transform`'s (ResolveLambdaVariables) and its common subexpression elimination leaves the
 * body, whose values depend on the variable, alone. Unlike Spark's higher order functions it
 * is not null for a null value: `x` is then null, and the body decides.
 */
case class PythonLet(argument: Expression, function: Expression)
  extends SimpleHigherOrderFunction {

  // Any type, as the function's (Spark's AnyDataType, which is Spark's own to name).
  override def argumentType = functionType
  override def prettyName: String = PythonLet.Name

  // Once per instance: a `def` here makes the analysis of nested lets exponential.
  override lazy val dataType: DataType = function.dataType
  override lazy val nullable: Boolean = function.nullable

  override protected def bindInternal(
      f: (Expression, Seq[(DataType, Boolean)]) => LambdaFunction): PythonLet =
    copy(function = f(function, (argument.dataType, argument.nullable) :: Nil))

  @transient private lazy val variable: NamedLambdaVariable =
    function.asInstanceOf[LambdaFunction].arguments.head.asInstanceOf[NamedLambdaVariable]

  /**
   * The let with its lambda variables numbered in the order they appear, as Spark's higher
   * order functions canonicalize. Theirs renames the whole body at each function and then
   * canonicalizes the children, whose nested functions rename their bodies again: time
   * quadratic in a nest's depth, paid where Spark compares expressions (common subexpressions,
   * on the driver and in each executor generating the code). A let whose variable is already
   * canonical was renamed with the whole body of an enclosing one: its children only are
   * canonicalized.
   */
  override lazy val canonicalized: Expression = function match {
    case LambdaFunction(_, Seq(v: NamedLambdaVariable), _) if v.value == null =>
      withNewChildren(children.map(_.canonicalized))
    case _ =>
      val numbers = function.collect { case v: NamedLambdaVariable => v.exprId }.distinct
        .zipWithIndex.toMap
      val renamed = transformUp {
        case v: NamedLambdaVariable if numbers.contains(v.exprId) =>
          NamedLambdaVariable("none", v.dataType, v.nullable, ExprId(numbers(v.exprId)), null)
      }
      renamed.withNewChildren(renamed.children.map(_.canonicalized))
  }

  override def eval(input: InternalRow): Any = {
    variable.value.set(argument.eval(input))
    functionForEval.eval(input)
  }

  override protected def doGenCode(ctx: CodegenContext, ev: ExprCode): ExprCode =
    ctx.withLambdaVars(Seq(variable),
      bound => {
        val x = bound.head
        val value = argument.genCode(ctx)
        val assignValue = if (variable.nullable) {
          s"${x.isNull} = ${value.isNull};\n${x.value} = ${value.value};"
        } else {
          s"${x.value} = ${value.value};"
        }
        // A part of the body generating no code (CodegenFallback) evaluates the variable
        // through `eval`, which reads its reference: set it too, as Spark's `transform` does.
        val interpreted = functionForEval.exists(_.isInstanceOf[CodegenFallback])
        val assignReference = if (interpreted) {
          val reference = ctx.addReferenceObj(variable.name, variable.value)
          assignAtomic(reference, x.value.toString, x.isNull.toString, variable.nullable)
        } else {
          ""
        }
        val body = functionForEval.genCode(ctx)
        ev.copy(code = code"""
        |${value.code}
        |$assignValue
        |$assignReference
        |${body.code}""".stripMargin, isNull = body.isNull, value = body.value)
      })

  override protected def withNewChildrenInternal(
      newLeft: Expression,
      newRight: Expression): PythonLet =
    copy(argument = newLeft, function = newRight)
}

object PythonLet {
  val Name = "__mws_python_let"
}
