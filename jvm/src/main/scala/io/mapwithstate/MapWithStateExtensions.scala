package io.mapwithstate

import io.mapwithstate.execution.MapWithStateStrategy
import io.mapwithstate.plan.{NumberStateOperators, StreamingWriteCheck}
import io.mapwithstate.reader.StateReadStrategy
import org.apache.spark.sql.SparkSessionExtensions

/**
 * Installs mapWithState's physical planning into a Spark session, the numbering of a streaming
 * query's map_with_state operators (each keeps its own state), and the check that refuses
 * streaming writes it cannot serve. Registered with
 * `spark.sql.extensions=io.mapwithstate.MapWithStateExtensions`, beside the Connect plugin
 * (`spark.connect.extensions.relation.classes=io.mapwithstate.connect.MapWithStateRelationPlugin`).
 */
class MapWithStateExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectPlannerStrategy(_ => MapWithStateStrategy)
    extensions.injectPlannerStrategy(_ => StateReadStrategy)
    extensions.injectResolutionRule(_ => NumberStateOperators)
    extensions.injectCheckRule(_ => StreamingWriteCheck)
  }
}
