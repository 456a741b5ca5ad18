package io.mapwithstate

import io.mapwithstate.repartition.CheckpointRepartition
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.catalyst.util.GenericArrayData
import org.apache.spark.sql.classic
import org.apache.spark.sql.types.{ArrayType, IntegerType, LongType, StructType}

/**
 * Repartitioning a stopped map_with_state query's state, from Scala, Java or classic PySpark:
 * what Python's `repartition_state` does.
 * {{{
 *   StateRepartitioner.repartition(spark, "ck/", 16).show()
 * }}}
 * The rewrite runs when called (see [[CheckpointRepartition]] for how it keeps the checkpoint
 * usable if interrupted); the DataFrame returned is its one-row summary. The Spark Connect
 * plugin comes through [[plan]] too, so every door runs the same checks and rewrite.
 */
object StateRepartitioner {

  /** The summary's columns. */
  val SummarySchema: StructType = new StructType()
    .add("operators", ArrayType(LongType, containsNull = false), nullable = false)
    .add("keys", LongType)
    .add("batch_id", LongType, nullable = false)
    .add("old_partitions", IntegerType, nullable = false)
    .add("new_partitions", IntegerType, nullable = false)

  /**
   * Rewrites the state of every map_with_state / map_groups_with_state operator of the stopped
   * query whose checkpoint is `checkpoint` into `numPartitions` partitions; the restarted query
   * continues with them. Returns the summary row.
   */
  def repartition(spark: SparkSession, checkpoint: String, numPartitions: Int): DataFrame =
    StateReader.classicDataFrame(spark, "repartitions")(plan(_, checkpoint, numPartitions))

  /** Runs the repartition and plans its summary: the one function every door goes through. */
  def plan(session: classic.SparkSession, checkpoint: String, numPartitions: Int)
      : LogicalPlan = {
    val s = CheckpointRepartition.run(session, checkpoint, numPartitions)
    val row = InternalRow(new GenericArrayData(s.operators.toArray[Any]),
      s.keys.map(Long.box).orNull, s.batchId, s.oldPartitions, s.newPartitions)
    LocalRelation(DataTypeUtils.toAttributes(SummarySchema), Seq(row))
  }
}
