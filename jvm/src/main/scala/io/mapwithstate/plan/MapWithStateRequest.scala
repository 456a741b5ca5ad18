package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.expressions.{Expression, SortOrder}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.DataType

/**
 * A mapWithState as a client asked for it: plans and expressions still unresolved, options
 * still as sent. The Connect plugin translates its proto into this; [[MapWithStateBuilder]]
 * checks it and turns it into a [[MapWithState]] plan.
 *
 * @param watermark the input's `withWatermark` (event-time column, delay) as sent
 * @param until     a replay's end: an expression that folds to a timestamp
 */
case class MapWithStateRequest(
    input: LogicalPlan,
    keys: Seq[Expression],
    values: Seq[Expression],
    spec: StateSpecRequest,
    batchTime: Option[Expression] = None,
    batchInterval: Option[String] = None,
    orderBy: Seq[SortOrder] = Nil,
    outputKind: OutputKind = OutputKind.Emitted,
    watermark: Option[(String, String)] = None,
    groups: Boolean = false,
    until: Option[Expression] = None) {

  /** The batch interval in milliseconds, checked to be a positive duration. */
  def batchIntervalMs: Option[Long] =
    batchInterval.map(Durations.positiveMillis(_, "batch_interval"))
}

/** The state function and its settings, as sent (see `state_spec.proto`). */
case class StateSpecRequest(
    stateSchema: Either[String, DataType],
    update: Option[Expression] = None,
    remove: Option[Expression] = None,
    emit: Option[Expression] = None,
    initialState: Option[LogicalPlan] = None,
    numPartitions: Option[Int] = None,
    timeout: Option[String] = None,
    checkpointInterval: Option[Int] = None,
    timeoutAt: Option[Expression] = None,
    timeoutDomain: Option[String] = None,
    initialStateTimeoutAt: Option[String] = None,
    backend: Option[String] = None,
    initialStateLastUpdated: Option[String] = None,
    migrate: Option[Expression] = None,
    initialStateWatermark: Option[Expression] = None,
    initialStateHasState: Option[String] = None)
