package io.mapwithstate.bench

import org.apache.spark.sql.{DataFrame, Encoder, Encoders}
import org.apache.spark.sql.streaming.{OutputMode, StatefulProcessor, TimeMode}

/**
 * How every transformWithState system is built, so they differ only in their processor: the
 * scenario's records grouped by key, through `processor` in processing time
 * (`TimeMode.ProcessingTime()`, for its timers) and `OutputMode.Update()`, as
 * flatMapGroupsWithState's systems.
 */
object TransformWithStateQuery {
  def apply[O](processor: StatefulProcessor[Long, RunningCount.Record, O], output: Encoder[O])(
      source: DataFrame): DataFrame =
    source.as(Encoders.product[RunningCount.Record])
      .groupByKey(_.key)(Encoders.scalaLong)
      .transformWithState(processor, TimeMode.ProcessingTime(), OutputMode.Update())(output)
      .toDF()
}
