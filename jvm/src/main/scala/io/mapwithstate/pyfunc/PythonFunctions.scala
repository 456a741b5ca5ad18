package io.mapwithstate.pyfunc

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Cast, Expression, ExpressionInfo}
import org.apache.spark.sql.types.{DataType, DoubleType, IntegerType}

/**
 * The reserved functions (`__mws_python_*`) that the Python state function compiler
 * (`mapwithstate.pyfunc`) emits where Python's semantics has no exact equivalent among Spark's
 * functions. They are registered in every session with the plugin's extensions, so a compiled
 * Column resolves like any function call, from Spark Connect and from classic PySpark alike,
 * in the state function and in the client's own type probes and `explain`.
 */
object PythonFunctions {

  private case class Reserved(name: String, arity: Int, expression: Class[_], usage: String,
      build: Seq[Expression] => Expression)

  private val All = Seq(
    Reserved(PythonRound.Name, 2, classOf[PythonRound],
      "_FUNC_(x, ndigits) - Python's round(x, ndigits) of a double: its exact binary value " +
        "rounded half to even (the state function compiler's, not for direct use).",
      args => PythonRound(typed(args(0), DoubleType), typed(args(1), IntegerType))))

  /** `e` as `dataType`: the compiler sends it so; SQL text may give another number type. */
  private def typed(e: Expression, dataType: DataType): Expression =
    if (e.resolved && e.dataType == dataType) e else Cast(e, dataType)

  def register(extensions: SparkSessionExtensions): Unit = All.foreach { f =>
    val info = new ExpressionInfo(f.expression.getName, null, f.name, f.usage, "", "", "", "",
      "", "", "internal")
    extensions.injectFunction((FunctionIdentifier(f.name), info,
        (args: Seq[Expression]) => {
          if (args.length != f.arity) {
            throw MapWithStateException(ErrorCondition.AnalysisFailed,
              s"${f.name} takes ${f.arity} arguments, but ${args.length} were given")
          }
          f.build(args)
        }))
  }
}
