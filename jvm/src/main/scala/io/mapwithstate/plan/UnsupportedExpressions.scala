package io.mapwithstate.plan

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.SparkThrowable
import org.apache.spark.sql.catalyst.analysis.UnresolvedPlanId
import org.apache.spark.sql.catalyst.expressions.{
  Attribute,
  Expression,
  Generator,
  PythonFuncExpression,
  SubqueryExpression,
  Unevaluable,
  UnresolvedWindowExpression,
  WindowExpression
}
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Generate, LogicalPlan, Window}

/**
 * Refuses, when the query is planned, the expressions a state function cannot run, saying why
 * and what to write instead; each would otherwise fail every task ("Cannot evaluate
 * expression") or the analysis with words about a plan the caller never wrote.
 *
 * A state function's expressions are compiled by this plugin into one projection evaluated per
 * call on the JVM executors. What Spark plans into an operator of its own cannot be in it:
 * Python UDFs and pandas UDFs (run by a Python worker beside a projection), generators (one
 * row in, several out), window functions (over other rows of the input), aggregates in a
 * per-record function (over several records) and unevaluable expressions such as subqueries.
 * [[beforeAnalysis]] looks at the expression as the caller sent it, [[afterAnalysis]] at what
 * Spark's analyzer made of it.
 */
private[plan] object UnsupportedExpressions {

  /** `e`, as sent for the argument `what`, before Spark's analyzer rewrites it. */
  def beforeAnalysis(e: Expression, what: String): Unit = {
    e.find(_.isInstanceOf[PythonFuncExpression]).foreach(pythonUdf(_, what))
    e.find(w => w.isInstanceOf[WindowExpression] || w.isInstanceOf[UnresolvedWindowExpression])
      .foreach(windowFunction(_, what))
    e.find(_.isInstanceOf[Generator]).foreach(generator(_, what))
    // A DataFrame's scalar() or exists() refers to another plan, which the state function's
    // own analysis does not have.
    e.find(q => q.isInstanceOf[SubqueryExpression] || q.isInstanceOf[UnresolvedPlanId])
      .foreach(unevaluable(_, what))
  }

  /**
   * The analyzed plan of `what` alone: a projection over the function's inputs, or what the
   * analyzer turned it into. A group function's aggregates are taken out before (they are
   * computed by an aggregation of their own), so an aggregate left is one a per-record
   * function holds.
   */
  def afterAnalysis(plan: LogicalPlan, what: String): Unit = {
    plan.foreach {
      case g: Generate => generator(g.generator, what)
      case w: Window => windowFunction(w.windowExpressions.head, what)
      case a: Aggregate =>
        a.aggregateExpressions.flatMap(_.find(_.isInstanceOf[AggregateExpression]))
          .headOption.foreach(aggregate(_, what))
      case _ =>
    }
    plan.expressions.foreach(_.foreach {
      case p: PythonFuncExpression => pythonUdf(p, what)
      case a: AggregateExpression => aggregate(a, what)
      case w: WindowExpression => windowFunction(w, what)
      case g: Generator => generator(g, what)
      case _: Attribute =>
      case u @ (_: Unevaluable | _: SubqueryExpression) => unevaluable(u, what)
      case _ =>
    })
  }

  /**
   * `e`, which Spark's analyzer made into operators of their own rather than one projection
   * (which a state function's expression must stay), for what it holds that none of the
   * checks above names.
   */
  def notAProjection(e: Expression, what: String): Nothing = unevaluable(e, what)

  /**
   * Spark's analyzer refused `e`, the expression of `what`, with `error`: a generator nested
   * in other expressions ([[afterAnalysis]] sees one that is not, as Spark's `Generate`) is
   * refused here, with the reason a state function has; other errors are not this object's.
   */
  def refusedByAnalysis(e: Expression, what: String, error: Throwable): Unit = error match {
    case t: SparkThrowable
        if Option(t.getCondition).exists(_.startsWith("UNSUPPORTED_GENERATOR")) =>
      generator(e, what)
    case _ =>
  }

  private def pythonUdf(e: Expression, what: String): Nothing =
    refuse(ErrorCondition.PythonUdf, e, what,
      s"${e.sql} is a Python UDF (F.udf or pandas_udf), and no Python runs in a state " +
        "function: its expressions are compiled into JVM code that runs on the executors " +
        "beside the state. Write it with Spark's functions (pyspark.sql.functions), or compute " +
        "it with the UDF in a column of the input DataFrame, where Python UDFs run, and read " +
        "that column")

  private def generator(e: Expression, what: String): Nothing =
    refuse(ErrorCondition.Generator, e, what,
      s"a generator (in ${e.sql}) makes several rows of one, and a state " +
        "function's expressions give one value per call. To emit several rows, make emit an " +
        "array of structs (F.array(...), F.transform(...)); to go through an array, use " +
        "F.transform, F.filter or F.aggregate; or explode the input before the state function")

  private def windowFunction(e: Expression, what: String): Nothing =
    refuse(ErrorCondition.WindowFunction, e, what,
      s"${e.sql} is a window function, which reads other rows of the input, and a " +
        "state function sees only its key's record (map_with_state) or its key's records of " +
        "the batch through aggregates (map_groups_with_state). Compute it in a column of the " +
        "input DataFrame, or keep what it needs in the state")

  private def aggregate(e: Expression, what: String): Nothing =
    refuse(ErrorCondition.AggregateInPerRecordFunction, e, what,
      s"${e.sql} is an aggregate, and map_with_state calls its state function once " +
        "per record. Keep a running value in the state (e.g. update n to S.state(\"n\") + 1), " +
        "or use map_groups_with_state, whose functions see aggregates over a key's records of " +
        "the batch")

  private def unevaluable(e: Expression, what: String): Nothing =
    refuse(ErrorCondition.Unevaluable, e, what,
      s"${e.sql} cannot be evaluated in a state function: Spark runs it as an operator " +
        "of its own, not row by row. Compute it in a column of the input DataFrame")

  /** Refuses `e`, the expression (or part) of the argument `what`, saying `why`. */
  private def refuse(condition: ErrorCondition, e: Expression, what: String, why: String)
      : Nothing =
    throw new MapWithStateException(condition, s"$what: $why",
      parameters = Map("argument" -> what, "expression" -> e.sql))
}
