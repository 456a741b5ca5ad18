package io.mapwithstate.reader

import io.mapwithstate.state.KeyStateColumns
import org.apache.spark.sql.types.{IntegerType, LongType, StringType, StructField, StructType}

/**
 * What a state reader reads from a [[QueryCheckpoint]], and the columns it gives: the state at
 * one version, or the changes of a range of batches. The checkpoint supplies the key and state
 * columns, so the caller names no types.
 */
sealed trait StateRead extends Serializable {
  def schema(checkpoint: QueryCheckpoint): StructType
}

object StateRead {

  /**
   * Every key's state at a store version: the key columns, the state's fields, `last_updated`
   * (the batch time of the key's last update), `timeout_at` (its pending timer, null without
   * one) and `partition` (the state partition that holds it): [[KeyStateColumns]], which a
   * replay's `output="final_state"` shares, and the partition. With `timerOnlyKeys` also the
   * keys holding only a timer, and `has_state` before the partition.
   */
  final case class At(version: Long, timerOnlyKeys: Boolean = false) extends StateRead {
    override def schema(checkpoint: QueryCheckpoint): StructType =
      StructType(KeyStateColumns.fields(checkpoint.keySchema.fields.toSeq,
        checkpoint.valueSchema.fields.toSeq, timerOnlyKeys) :+
        StructField("partition", IntegerType, nullable = false))
  }

  /**
   * One row per change of a key in the batches `first` to `last`: `batch_id`, `change`
   * ("update" or "delete"), the key columns and the state's fields (null for a delete).
   */
  final case class Changes(first: Long, last: Long) extends StateRead {
    override def schema(checkpoint: QueryCheckpoint): StructType =
      StructType(Seq(
        StructField("batch_id", LongType, nullable = false),
        StructField("change", StringType, nullable = false)) ++
        checkpoint.keySchema.fields ++ checkpoint.valueSchema.fields.map(_.copy(nullable = true)))
  }

  val Update = "update"
  val Delete = "delete"
}
