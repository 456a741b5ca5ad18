package io.mapwithstate.plan

import scala.collection.mutable
import scala.util.control.NonFatal

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  Attribute,
  AttributeReference,
  AttributeSet,
  Expression,
  WindowExpression
}
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, LocalRelation, Project}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.StructType

/**
 * Resolves the state function of a map_groups_with_state, which is called once per key per
 * batch: its expressions may hold aggregates over the key's records of the batch (`count(*)`,
 * `sum(v)`, `collect_list(v)`, any Spark aggregate) beside key columns and the context columns.
 *
 * Each expression is resolved by Spark's analyzer over the key and value columns plus the
 * context; its aggregates are then taken out — computed by a plan step before the stateful
 * operator, one row per key per batch — and replaced by columns of that row, so the function
 * the operator runs is an ordinary per-record function over (keys, aggregate results). The
 * same aggregate in several expressions is computed once.
 *
 * Outside aggregates only key and context columns may appear, as in `groupBy().agg()`; an
 * aggregate reads only the key's records (not the state), and may not nest another aggregate
 * or be a window function.
 */
class GroupFunctionResolver(session: SparkSession) {

  /**
   * The function, and the aggregates it reads (aliases named `__mws_agg_<i>`, over `keys ++
   * values`, in the order of the function's data columns after the keys).
   */
  def resolve(
      keys: Seq[Attribute],
      values: Seq[Attribute],
      stateType: StructType,
      update: Option[Expression],
      remove: Option[Expression],
      emit: Option[Expression],
      timeoutAt: Option[Expression] = None): (StateFunction, Seq[Alias]) = {
    val keyColumns = keys.map(_.newInstance())
    val valueColumns = values.map(_.newInstance())
    val aggregates = mutable.ArrayBuffer.empty[(AggregateExpression, AttributeReference)]

    def analyzeOne(e: Expression, scope: Seq[Attribute], what: String): Expression = {
      val resolved = resolveWithAggregates(e, scope, what)
      val valueSet = AttributeSet(valueColumns)
      val rewritten = resolved.transformDown {
        case agg: AggregateExpression =>
          checkAggregate(agg, valueSet ++ AttributeSet(keyColumns), what)
          aggregates.find(_._1.canonicalized == agg.canonicalized).map(_._2).getOrElse {
            val column = AttributeReference(s"${GroupFunctionResolver.AggregatePrefix}" +
                aggregates.size, agg.dataType, agg.nullable)()
            aggregates += ((agg, column))
            column
          }
      }
      val allowed = AttributeSet(keyColumns ++ aggregates.map(_._2) ++ scope.filter(
        _.name.startsWith(StateFunctionInput.ReservedPrefix)))
      rewritten.references.filterNot(allowed.contains).headOption.foreach { a =>
        throw MapWithStateException(ErrorCondition.MissingAggregation,
          s"$what: [MISSING_AGGREGATION] the non-aggregating expression \"${a.name}\" is a " +
            s"column that is neither a key nor inside an aggregate: a group function sees the " +
            s"key's records of the batch only through aggregates; aggregate it (e.g. " +
            s"F.first(\"${a.name}\"), F.sum(\"${a.name}\")) or make it a key column (in ${e.sql})")
      }
      // Type checks of what is left (remove must be a boolean, ...) follow in the caller.
      new StateFunctionResolver(session).analyze(rewritten,
        scope.filterNot(valueSet.contains) ++
          aggregates.map(_._2), what)
    }

    val function = new StateFunctionResolver(session).resolveWith(
      keyColumns ++ valueColumns, keyColumns ++ aggregates.map(_._2),
      StateFunctionInput.contextAttributes(stateType), stateType, update, remove, emit,
      timeoutAt)(analyzeOne)
    val data = keyColumns ++ valueColumns
    val toPlan = data.zip(keys ++ values).map { case (c, p) => c.exprId -> p }.toMap
    val aggregatesOverPlan = aggregates.toSeq.map { case (agg, column) =>
      Alias(agg.transform { case a: Attribute if toPlan.contains(a.exprId) => toPlan(a.exprId) },
        column.name)()
    }
    (function, aggregatesOverPlan)
  }

  /**
   * The expression resolved, aggregates included. Spark's analyzer turns a projection with
   * aggregates into a global aggregate and its check would then refuse the key and context
   * columns beside them; so the resolution runs without the check, which the rewritten
   * function goes through afterwards. Whatever fails to resolve is reported by the full
   * analysis of the original expression, with Spark's own error.
   */
  private def resolveWithAggregates(e: Expression, scope: Seq[Attribute], what: String)
      : Expression = {
    val plan = Project(Seq(Alias(e, what)()), LocalRelation(scope))
    val analyzed =
      try session.sessionState.analyzer.execute(plan)
      catch {
        case e: MapWithStateException => throw e
        case NonFatal(err) =>
          throw Analysis.failed(what, err, plan)
      }
    // The aggregates are evaluated by this plugin too (GroupAggregation), so they take the
    // same rewrites as the rest (count_if, bool_and and the like are placeholders).
    val resolved = (if (analyzed.resolved) ExecutableExpressions(session, analyzed, what)
                    else analyzed) match {
      case Project(Seq(Alias(r, _)), _: LocalRelation) if analyzed.resolved => Some(r)
      case Aggregate(Nil, Seq(Alias(r, _)), _: LocalRelation, _) if analyzed.resolved => Some(r)
      case _ => None
    }
    if (e.exists(_.isInstanceOf[WindowExpression]) ||
      resolved.isEmpty && analyzed.exists(_.expressions.exists(_.exists(
            _.isInstanceOf[WindowExpression])))) {
      throw MapWithStateException(ErrorCondition.WindowFunction,
        s"$what: a group function cannot use window functions (${e.sql}); it sees the key's " +
          "records of the batch through aggregates only")
    }
    resolved.getOrElse {
      Analysis.analyze(session, plan, what)
      throw MapWithStateException(ErrorCondition.AnalysisFailed,
        s"$what: cannot be resolved as a group function: ${e.sql}")
    }
  }

  private def checkAggregate(agg: AggregateExpression, records: AttributeSet, what: String)
      : Unit = {
    agg.aggregateFunction.children.foreach { child =>
      child.find(_.isInstanceOf[AggregateExpression]).foreach { inner =>
        throw MapWithStateException(ErrorCondition.NestedAggregate,
          s"$what: [NESTED_AGGREGATE_FUNCTION] an aggregate cannot be inside another aggregate: " +
            s"${inner.sql} in ${agg.sql}")
      }
    }
    agg.references.filterNot(records.contains).headOption.foreach { a =>
      throw MapWithStateException(ErrorCondition.AggregateReadsContext,
        s"$what: the aggregate ${agg.sql} reads '${a.name}', but aggregates read only the key's " +
          "records of the batch (key and value columns), not the state or the other context " +
          "columns; use those outside the aggregate")
    }
    if (agg.isDistinct) {
      throw MapWithStateException(ErrorCondition.UnsupportedAggregate,
        s"$what: distinct aggregates (${agg.sql}) are not supported in a group function; " +
          "use e.g. F.size(F.collect_set(...)) instead of F.count_distinct(...)")
    }
    if (agg.filter.isDefined) {
      throw MapWithStateException(ErrorCondition.UnsupportedAggregate,
        s"$what: aggregates with a FILTER clause (${agg.sql}) are not supported in a group " +
          "function; use F.when(...) inside the aggregate instead")
    }
  }
}

object GroupFunctionResolver {

  /** The columns of the aggregated row, one per distinct aggregate of the function. */
  val AggregatePrefix: String = StateFunctionInput.ReservedPrefix + "agg_"
}
