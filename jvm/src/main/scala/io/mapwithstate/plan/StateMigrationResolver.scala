package io.mapwithstate.plan

import io.mapwithstate.MapWithStateException
import io.mapwithstate.state.StoredStateConversion
import org.apache.spark.sql.catalyst.expressions.{
  Attribute,
  AttributeReference,
  AttributeSeq,
  BindReferences,
  Expression
}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.StructType

/**
 * Resolves a streaming query's `StateSpec.migrate` on a restart whose state schema changed:
 * against the key columns and `__mws_state` of the schema the checkpoint holds (the OLD state),
 * with Spark's analyzer as the state function's expressions are, into the conversion each key's
 * stored state goes through in the restart's first micro-batch. It must give a struct with the
 * new state's fields, by name and in order (a field may safely widen, as `update`'s may); a
 * null struct removes the key. Resolution waits for the restart because only then is the old
 * schema known: a field it does not have is refused then, listing the fields it has.
 */
object StateMigrationResolver {

  def resolve(
      session: SparkSession,
      keys: Seq[Attribute],
      storedStateType: StructType,
      stateType: StructType,
      migrate: Expression): StoredStateConversion = {
    val keyColumns = keys.map(_.newInstance())
    val oldState =
      AttributeReference(StateFunctionInput.State, storedStateType, nullable = false)()
    val input = keyColumns :+ oldState
    val resolver = new StateFunctionResolver(session)
    UnsupportedExpressions.beforeAnalysis(migrate, "migrate")
    val resolved =
      try resolver.castToState(resolver.analyze(migrate, input, "migrate"), stateType, "migrate")
      catch {
        case e: MapWithStateException =>
          throw new MapWithStateException(e.condition,
            s"${e.detail}; migrate reads the " +
              s"state the checkpoint holds, ${storedStateType.simpleString} (its fields: " +
              s"${storedStateType.fieldNames.mkString(", ")}), and the key columns " +
              s"${keyColumns.map(_.name).mkString(", ")}", e)
      }
    StoredStateConversion(storedStateType,
      BindReferences.bindReference(resolved, AttributeSeq(input)),
      DataTypeUtils.fromAttributes(keyColumns), "migrate")
  }
}
