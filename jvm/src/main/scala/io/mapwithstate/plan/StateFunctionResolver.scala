package io.mapwithstate.plan

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  Attribute,
  Cast,
  CreateNamedStruct,
  Expression,
  GetStructField,
  If,
  IsNull,
  Literal
}
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, Project}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.{
  ArrayType,
  BooleanType,
  StructType,
  TimestampNTZType,
  TimestampType
}

/**
 * Resolves and type-checks the expressions of a state function against its input (the key and
 * value columns plus [[StateFunctionInput]]), with Spark's own analyzer, so that everything a
 * DataFrame expression can do works inside `update`, `remove` and `emit`.
 *
 * `timeout_at`, when given, is resolved like `emit` (after the state changed) and must be a
 * TIMESTAMP.
 *
 * Type errors are found here, before any data is read, and name the expression and the field.
 */
class StateFunctionResolver(session: SparkSession) {

  def resolve(
      dataColumns: Seq[Attribute],
      stateType: StructType,
      update: Option[Expression],
      remove: Option[Expression],
      emit: Option[Expression],
      timeoutAt: Option[Expression] = None): StateFunction = {
    val data = dataColumns.map(_.newInstance())
    resolveWith(data, data, StateFunctionInput.contextAttributes(stateType), stateType, update,
      remove, emit, timeoutAt)(analyze)
  }

  /**
   * Resolves each expression with `analyzeOne` over `scope` and the context columns (the
   * state's new value for `emit` only), then checks what each must be. The resulting function
   * reads `data`: for a per-record function the same columns as `scope`; for a group function
   * ([[GroupFunctionResolver]]) the keys and the aggregates `analyzeOne` replaced.
   */
  private[plan] def resolveWith(
      scope: Seq[Attribute],
      data: => Seq[Attribute],
      context: Seq[Attribute],
      stateType: StructType,
      update: Option[Expression],
      remove: Option[Expression],
      emit: Option[Expression],
      timeoutAt: Option[Expression])(
      analyzeOne: (Expression, Seq[Attribute], String) => Expression): StateFunction = {
    val beforeRecord = scope ++ context.filterNot(_.name == StateFunctionInput.NewState)
    Seq("update" -> update, "remove" -> remove, "emit" -> emit, "timeout_at" -> timeoutAt)
      .foreach { case (what, e) =>
        e.foreach(UnsupportedExpressions.beforeAnalysis(_, what))
      }

    val resolvedUpdate = update.map { e =>
      refuseNewState(e, "update")
      castToState(analyzeOne(e, beforeRecord, "update"), stateType, "update")
    }
    val resolvedRemove = remove.map { e =>
      refuseNewState(e, "remove")
      val r = analyzeOne(e, beforeRecord, "remove")
      if (r.dataType != BooleanType) {
        throw MapWithStateException(ErrorCondition.TypeMismatch,
          s"remove must be a BOOLEAN expression, but it is ${r.dataType.sql}: ${r.sql}")
      }
      r
    }
    val resolvedEmit = emit.map { e =>
      val r = analyzeOne(e, scope ++ context, "emit")
      r.dataType match {
        case s: StructType if s.nonEmpty => r
        case ArrayType(s: StructType, _) if s.nonEmpty => r
        case other =>
          throw MapWithStateException(ErrorCondition.TypeMismatch,
            s"emit must be a struct whose fields are the output columns (e.g. F.struct(...)), " +
              s"or an array of such structs (e.g. F.array(F.struct(...), ...)), but it is " +
              s"${other.sql}: ${r.sql}")
      }
    }
    // Evaluated after update and remove, like emit: the state after the call is in scope.
    val resolvedTimeoutAt = timeoutAt.map { e =>
      val r = analyzeOne(e, scope ++ context, "timeout_at")
      if (r.dataType != TimestampType) {
        throw MapWithStateException(ErrorCondition.TypeMismatch,
          s"timeout_at must be a TIMESTAMP expression (the key's timer), but it is " +
            s"${r.dataType.sql}: ${r.sql}" +
            (if (r.dataType == TimestampNTZType) " (cast it to TIMESTAMP)" else ""))
      }
      r
    }
    StateFunction(stateType, data, context, resolvedUpdate, resolvedRemove, resolvedEmit,
      resolvedTimeoutAt)
  }

  private def refuseNewState(e: Expression, what: String): Unit = {
    val usesNewState = e.exists {
      case u: UnresolvedAttribute => u.nameParts.headOption.contains(StateFunctionInput.NewState)
      case _ => false
    }
    if (usesNewState) {
      throw MapWithStateException(ErrorCondition.NewStateBeforeUpdate,
        s"$what uses new_state(), which exists only after update and remove: use it in emit")
    }
  }

  private[plan] def analyze(e: Expression, input: Seq[Attribute], what: String): Expression = {
    val analyzed =
      Analysis.analyze(session, Project(Seq(Alias(e, what)()), LocalRelation(input)), what)
    val executable = ExecutableExpressions(session, analyzed, what)
    UnsupportedExpressions.afterAnalysis(executable, what)
    executable match {
      case Project(Seq(Alias(resolved, _)), _: LocalRelation) => resolved
      case _ => UnsupportedExpressions.notAProjection(e, what)
    }
  }

  /**
   * `update` (or `what`, as errors name it) must be a struct with the state's fields, by name
   * and in order; a field may be of a type that safely widens to the state's (an INT for a
   * BIGINT), never one that narrows.
   */
  private[plan] def castToState(update: Expression, stateType: StructType, what: String)
      : Expression = {
    val schema = stateType.toDDL
    val fields = update.dataType match {
      case s: StructType => s.fields
      case other =>
        throw MapWithStateException(ErrorCondition.TypeMismatch,
          s"$what must be a struct with the state's fields ($schema), but it is ${other.sql}: " +
            update.sql)
    }
    val resolver = session.sessionState.conf.resolver
    val names = fields.map(_.name)
    stateType.fields.zipWithIndex.foreach { case (field, i) =>
      if (i >= fields.length || !resolver(fields(i).name, field.name)) {
        val found = if (names.isEmpty) "no fields" else names.mkString("fields ", ", ", "")
        throw MapWithStateException(ErrorCondition.TypeMismatch,
          s"$what must be a struct with the state's fields ($schema), in that order: " +
            s"field '${field.name}' is missing at position ${i + 1} ($what has $found)")
      }
    }
    if (fields.length > stateType.length) {
      throw MapWithStateException(ErrorCondition.TypeMismatch,
        s"$what has field '${fields(stateType.length).name}', which is not in the state " +
          s"schema ($schema)")
    }
    val needsCast = fields.zip(stateType.fields).exists { case (from, to) =>
      !DataTypeUtils.sameType(from.dataType, to.dataType)
    }
    fields.zip(stateType.fields).foreach { case (from, to) =>
      if (!DataTypeUtils.sameType(from.dataType, to.dataType) &&
        !Cast.canUpCast(from.dataType, to.dataType)) {
        throw MapWithStateException(ErrorCondition.TypeMismatch,
          s"$what's field '${to.name}' is ${from.dataType.sql}, which cannot be safely cast to " +
            s"the state's ${to.dataType.sql}; cast it explicitly")
      }
    }
    if (!needsCast) {
      update
    } else {
      val widened = CreateNamedStruct(stateType.fields.zipWithIndex.toSeq.flatMap { case (f, i) =>
        Seq(Literal(f.name), Cast(GetStructField(update, i), f.dataType))
      })
      If(IsNull(update), Literal(null, stateType), widened)
    }
  }
}
