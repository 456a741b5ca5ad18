package io.mapwithstate.reader

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import io.mapwithstate.state.StateSchemaEvolution
import org.apache.spark.sql.catalyst.expressions.{Alias, BoundReference, Expression}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project}
import org.apache.spark.sql.types.StructType

/**
 * A state read of a batch written in an older state schema, given in the checkpoint's current
 * one (its newest, in which its query now runs): the state's columns converted by the
 * schema-evolution rules ([[StateSchemaEvolution]]) through each schema the checkpoint has held
 * since the batch, one step after the other, as the restarts converted the state — so a field
 * dropped and later added again reads null, as the restart made it. A batch whose state a
 * migration (`StateSpec.migrate`) carried over, which the rules alone cannot, is refused
 * naming the step: its values in the current schema are whatever the migration made of them,
 * which the checkpoint does not keep; read it in its own schema.
 */
object InCurrentStateSchema {

  /**
   * `relation` (a read of `checkpoint` at a version held in `schemas.head`) projected to
   * `schemas.last`, where `schemas` are the state schemas from the batch's to the current
   * one, in order; the relation itself when they are one. The state's columns are the
   * relation's `stateOffset`-th on.
   */
  def apply(
      relation: StateReadRelation,
      stateOffset: Int,
      schemas: Seq[StructType],
      batch: String): LogicalPlan = {
    if (schemas.size < 2) return relation
    val steps = schemas.sliding(2).map { case Seq(from, to) =>
      StateSchemaEvolution.plan(from, to) match {
        case Right(conversion) => conversion.expressions
        case Left(problems) => throw MapWithStateException(ErrorCondition.StateSchemaChanged,
            s"$batch of ${relation.checkpoint.location} is in the state schema " +
              s"${from.simpleString}, which the schema-evolution rules cannot convert to " +
              s"${to.simpleString} (a restart's StateSpec.migrate carried the state over): " +
              problems.map(_.describe).mkString("; ") + "; read it in its own schema " +
              "(in_current_schema=False)")
      }
    }.toSeq
    // Each step's expressions read the previous step's fields by ordinal.
    val composed = steps.reduceLeft { (before, after) =>
      after.map(_.transformUp { case b: BoundReference => before(b.ordinal) })
    }
    val stateColumns = relation.output.slice(stateOffset, stateOffset + schemas.head.size)
    val current = schemas.last
    val converted = composed.zip(current.fields).map { case (expr, field) =>
      Alias(expr.transformUp { case b: BoundReference => stateColumns(b.ordinal) }: Expression,
        field.name)()
    }
    Project(relation.output.take(stateOffset) ++ converted ++
        relation.output.drop(stateOffset + schemas.head.size), relation)
  }
}
