package io.mapwithstate

import io.mapwithstate.execution.{MapWithStateStrategy, RealTimeMode}
import io.mapwithstate.plan.{NumberStateOperators, StreamingWriteCheck}
import io.mapwithstate.pyfunc.PythonFunctions
import io.mapwithstate.reader.StateReadStrategy
import org.apache.spark.sql.SparkSessionExtensions

/**
 * Installs mapWithState's physical planning into a Spark session, the numbering of a streaming
 * query's map_with_state operators (each keeps its own state), and the check that refuses
 * streaming writes it cannot serve; and admits the streaming operator to Spark's Real-Time Mode
 * (see [[io.mapwithstate.execution.RealTimeMode]]); and registers the reserved functions the
 * Python state function compiler emits ([[PythonFunctions]]). Registered with
 * `spark.sql.extensions=io.mapwithstate.MapWithStateExtensions`, beside the Connect plugin
 * (`spark.connect.extensions.relation.classes=io.mapwithstate.connect.MapWithStateRelationPlugin`).
 */
class MapWithStateExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    RealTimeMode.admitOperator()
    extensions.injectPlannerStrategy(_ => MapWithStateStrategy)
    extensions.injectPlannerStrategy(_ => StateReadStrategy)
    extensions.injectResolutionRule(_ => NumberStateOperators)
    extensions.injectCheckRule(_ => StreamingWriteCheck)
    PythonFunctions.register(extensions)
  }
}
