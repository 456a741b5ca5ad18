package io.mapwithstate.plan

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.catalyst.expressions.{CommonExpressionRef, With}
import org.apache.spark.sql.catalyst.optimizer.{
  ReplaceCurrentLike,
  ReplaceExpressions,
  ReplaceUpdateFieldsExpression
}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic.SparkSession

/**
 * A state function's analyzed expressions rewritten into what execution can evaluate: the
 * rewrites Spark's optimizer makes to every DataFrame projection before it runs, which a state
 * function's expressions never go through (they are compiled by this plugin, not planned).
 *
 * Why: many of Spark's functions are only placeholders after analysis. `ifnull`, `nvl`,
 * `to_date`, `left`, `try_add`, `timestamp - interval`, `count_if` and the other
 * `RuntimeReplaceable`s stand for their `replacement`; `Column.withField` is an `UpdateFields`;
 * `current_user()` and its kin are filled in by the optimizer; `nullif` is a `With` over a
 * common expression. Evaluated as they are, each fails the task (an assertion, or "Cannot
 * evaluate expression").
 *
 * `current_timestamp()` and `current_date()` are deliberately left as they are (Spark's
 * `ComputeCurrentTime` would fix them to the time of planning, for every micro-batch to come).
 */
private[plan] object ExecutableExpressions {

  /** `analyzed` with its expressions rewritten; `what` names the argument in errors. */
  def apply(session: SparkSession, analyzed: LogicalPlan, what: String): LogicalPlan = {
    val rules = Seq(ReplaceExpressions, ReplaceUpdateFieldsExpression,
      new ReplaceCurrentLike(session.sessionState.catalogManager))
    inlineCommonExpressions(rules.foldLeft(analyzed)((plan, rule) => rule(plan)), what)
  }

  /**
   * Each `With` replaced by its body, every reference to a common expression by the expression
   * itself. Spark's `RewriteWithExpression` evaluates a common expression once, in a projection
   * of its own below; inlined, a deterministic one gives the same answer, evaluated once per
   * reference. A nondeterministic one would not, so it is refused.
   */
  private def inlineCommonExpressions(plan: LogicalPlan, what: String): LogicalPlan =
    plan.transformAllExpressions { case w: With =>
      w.transformUp { case With(body, defs) =>
        defs.find(!_.child.deterministic).foreach { d =>
          throw new MapWithStateException(ErrorCondition.Nondeterministic,
            s"$what: ${d.child.sql} is nondeterministic and used more than once by a function " +
              "over it (such as nullif); compute it in a column of the input first",
            parameters = Map("argument" -> what, "expression" -> d.child.sql))
        }
        val byId = defs.map(d => d.id -> d.child).toMap
        body.transformUp { case ref: CommonExpressionRef if byId.contains(ref.id) => byId(ref.id) }
      }
    }
}
