package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.expressions.AttributeReference
import org.apache.spark.sql.types.{BooleanType, StructType, TimestampType}

/**
 * The columns a state function sees besides its key and value columns: the key's state before
 * the record, whether it exists, whether the call is for a timing-out key, the batch time,
 * (for `emit` and `timeout_at`) the state after the record, the key's timer before the call and
 * the event-time watermark. Their names are the contract with clients, written
 * down in `state_spec.proto`; the Python client's `mapwithstate.functions` refers to them.
 *
 * At run time they are one context row beside the input row, in [[contextAttributes]] order.
 */
object StateFunctionInput {
  val State = "__mws_state"
  val StateExists = "__mws_state_exists"
  val IsTimingOut = "__mws_is_timing_out"
  val BatchTime = "__mws_batch_time"
  val NewState = "__mws_new_state"
  val TimeoutAt = "__mws_timeout_at"
  val Watermark = "__mws_watermark"

  /** Input columns may not start with this: they would shadow the names above. */
  val ReservedPrefix = "__mws_"

  val StateOrdinal = 0
  val StateExistsOrdinal = 1
  val IsTimingOutOrdinal = 2
  val BatchTimeOrdinal = 3
  val NewStateOrdinal = 4
  val TimeoutAtOrdinal = 5
  val WatermarkOrdinal = 6

  /** Fresh attributes for the context row of a function whose state has this type. */
  def contextAttributes(stateType: StructType): Seq[AttributeReference] = Seq(
    AttributeReference(State, stateType, nullable = true)(),
    AttributeReference(StateExists, BooleanType, nullable = false)(),
    AttributeReference(IsTimingOut, BooleanType, nullable = false)(),
    AttributeReference(BatchTime, TimestampType, nullable = false)(),
    AttributeReference(NewState, stateType, nullable = true)(),
    AttributeReference(TimeoutAt, TimestampType, nullable = true)(),
    AttributeReference(Watermark, TimestampType, nullable = true)())
}
