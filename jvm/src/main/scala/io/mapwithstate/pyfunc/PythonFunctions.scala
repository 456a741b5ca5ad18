package io.mapwithstate.pyfunc

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult.DataTypeMismatch
import org.apache.spark.sql.catalyst.expressions.{Cast, Expression, ExpressionInfo, LambdaFunction}
import org.apache.spark.sql.types.{
  ArrayType,
  DataType,
  DoubleType,
  IntegerType,
  LongType,
  StringType
}

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
      args => PythonRound(typed(args(0), DoubleType), typed(args(1), IntegerType))),
    Reserved(PythonIntPower.Name, 2, classOf[PythonIntPower],
      "_FUNC_(a, b) - Python's a ** b of ints: struct<i, f>, the int for b >= 0 (null " +
        "beyond 64 bits), else the float (the state function compiler's, not for direct use).",
      args => PythonIntPower(typed(args(0), LongType), typed(args(1), LongType))),
    Reserved(PythonFormat.Name, 2, classOf[PythonFormat],
      "_FUNC_(value, spec) - Python's format(value, spec) of a float, int or str: the " +
        "format-spec mini-language, a float's exact value rounded half to even (the state " +
        "function compiler's, not for direct use).",
      args => PythonFormat(args(0), typed(args(1), StringType))),
    Reserved(PythonRepr.Name, 1, classOf[PythonRepr],
      "_FUNC_(s) - Python's repr(s) of a str (the state function compiler's, not for " +
        "direct use).",
      args => PythonRepr(typed(args(0), StringType))),
    Reserved(PythonLet.Name, 2, classOf[PythonLet],
      "_FUNC_(value, x -> body) - body with x bound to value, which is evaluated once (the " +
        "state function compiler's, not for direct use).",
      args => PythonLet(args(0), lambda(PythonLet.Name, args(1)))),
    Reserved(PythonModPow.Name, 3, classOf[PythonModPow],
      "_FUNC_(a, b, m) - Python's pow(a, b, m) of ints, exact, with m's sign; null where " +
        "Python raises ValueError (the state function compiler's, not for direct use).",
      args =>
        PythonModPow(typed(args(0), LongType), typed(args(1), LongType),
          typed(args(2), LongType))),
    Reserved(PythonStrptime.Name, 2, classOf[PythonStrptime],
      "_FUNC_(s, format) - Python's datetime.strptime(s, format) in the C locale: the " +
        "fields, or Python's ValueError (the state function compiler's, not for direct use).",
      args => PythonStrptime(typed(args(0), StringType), typed(args(1), StringType))),
    Reserved(PythonIntParse.Name, 2, classOf[PythonIntParse],
      "_FUNC_(s, base) - Python's int(s, base) of a str, base 0 or 2 to 36: struct<n, " +
        "error> (the state function compiler's, not for direct use).",
      args => PythonIntParse(typed(args(0), StringType), typed(args(1), LongType))),
    Reserved(PythonTimedeltaFloats.MultiplyName, 3, classOf[PythonTimedeltaByFloat],
      "_FUNC_(micros, x, n) - Python's timedelta * float (or * int n), exact: " +
        "struct<micros, error> (the " +
        "state function compiler's, not for direct use).",
      args =>
        PythonTimedeltaByFloat(divide = false, typed(args(0), LongType),
          typed(args(1), DoubleType), typed(args(2), LongType))),
    Reserved(PythonTimedeltaFloats.DivideName, 3, classOf[PythonTimedeltaByFloat],
      "_FUNC_(micros, x, n) - Python's timedelta / float (or / int n), exact: " +
        "struct<micros, error> (the " +
        "state function compiler's, not for direct use).",
      args =>
        PythonTimedeltaByFloat(divide = true, typed(args(0), LongType),
          typed(args(1), DoubleType), typed(args(2), LongType))),
    Reserved(PythonTimedeltaFloats.ConstructorName, 3, classOf[PythonTimedeltaOfFloats],
      "_FUNC_(units, ints, floats) - Python's timedelta(...) of ints and floats, exact: " +
        "struct<micros, error> (the state function compiler's, not for direct use).",
      args =>
        PythonTimedeltaOfFloats(typed(args(0), StringType),
          typed(args(1), ArrayType(LongType)), typed(args(2), ArrayType(DoubleType))))) ++
    Seq(true, false).map { dateOnly =>
      Reserved(PythonIsoFormat.name(dateOnly), 1, classOf[PythonIsoFormat],
        s"_FUNC_(s) - Python's ${if (dateOnly) "date" else "datetime"}.fromisoformat(s): " +
          "the fields, or Python's ValueError (the state function compiler's, not for " +
          "direct use).",
        args => PythonIsoFormat(dateOnly, typed(args(0), StringType)))
    } ++
    PythonStrMethod.Methods.map { method =>
      Reserved(method.functionName, 1, classOf[PythonStrMethod],
        s"_FUNC_(s) - Python's s.${method.name}() of a str, by Python's Unicode tables (the " +
          "state function compiler's, not for direct use).",
        args => PythonStrMethod(method, typed(args(0), StringType)))
    } ++
    PythonStatistics.Functions.map { function =>
      Reserved(PythonStatistics.functionName(function), 1, classOf[PythonStatistics],
        s"_FUNC_(values) - Python's statistics.$function(values) of ints or floats, exact as " +
          "CPython's (the state function compiler's, not for direct use).",
        args => PythonStatistics(function, args(0)))
    } ++
    PythonRegex.Functions.map { function =>
      Reserved(function.functionName, function.arity, classOf[PythonRegex],
        s"_FUNC_(pattern, s, ...) - Python's re.${function.name} of a str, with a pattern the " +
          "compiler translated (the state function compiler's, not for direct use).",
        args =>
          PythonRegex(function,
            args.zipWithIndex.map {
              case (a, i) if i < 2 => typed(a, StringType)
              case (a, 2) if function.name == "sub" => a
              case (a, _) => typed(a, LongType)
            }))
    } ++
    PythonExactArithmetic.Operators.map { operator =>
      Reserved(operator.name, 3, classOf[PythonExactArithmetic],
        s"_FUNC_(a, b, message) - Python's a ${operator.symbol} b of ints, failing with " +
          "message beyond 64 bits (the state function compiler's, not for direct use).",
        args =>
          PythonExactArithmetic(operator, typed(args(0), LongType),
            typed(args(1), LongType), typed(args(2), StringType)))
    }

  /** Success if `left` and `right` are BIGINTs, as the int functions take them. */
  private[pyfunc] def checkBigints(left: Expression, right: Expression): TypeCheckResult =
    if (left.dataType != LongType || right.dataType != LongType) {
      DataTypeMismatch("UNEXPECTED_INPUT_TYPE",
        Map("paramIndex" -> "first or second", "requiredType" -> "BIGINT, BIGINT",
          "inputSql" -> s"${left.sql}, ${right.sql}",
          "inputType" -> s"${left.dataType.sql}, ${right.dataType.sql}"))
    } else {
      TypeCheckResult.TypeCheckSuccess
    }

  /** `e`, a lambda function as `name`'s last argument must be. */
  private def lambda(name: String, e: Expression): Expression = e match {
    case _: LambdaFunction => e
    case _ =>
      throw MapWithStateException(ErrorCondition.AnalysisFailed,
        s"$name takes a lambda function (x -> body) as its last argument, not ${e.sql}")
  }

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
