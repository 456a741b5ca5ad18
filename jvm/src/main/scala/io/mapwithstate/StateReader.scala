package io.mapwithstate

import io.mapwithstate.reader.StateReadRequest
import org.apache.spark.sql.{DataFrame, Encoders, Row, SparkSession}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.classic

/**
 * Reading a map_with_state query's state back from its checkpoint, from Scala, Java or classic
 * PySpark: the DataFrames Python's `read_state` / `read_state_changes` give.
 * {{{
 *   val state = StateReader.readState(spark, "ck/")
 *   val after3 = StateReader.readState(spark, "ck/", batchId = 3L)
 *   val deletes = StateReader.readStateChanges(spark, "ck/", startBatch = 2)
 *     .where("change = 'delete'")
 * }}}
 * It needs a classic session with `spark.sql.extensions=io.mapwithstate.MapWithStateExtensions`
 * (the planner of the read). The Spark Connect plugin comes through [[plan]] too, so every door
 * resolves and checks the checkpoint the same way. Optional arguments are `java.lang.Long`, null
 * when not wanted (Java and py4j callers pass null).
 */
object StateReader {

  /**
   * Every key's state as committed after one micro-batch: the key columns, the state's fields,
   * `last_updated`, `timeout_at` and `partition`.
   *
   * @param checkpoint the query's `checkpointLocation`
   * @param batchId    the micro-batch after which to read the state; null: the last committed
   * @param operatorId which map_with_state operator (its `state/<id>/` directory); null: the
   *                   checkpoint's only one
   * @param inCurrentSchema the state in the checkpoint's current state schema (its newest,
   *                   converted by the schema-evolution rules), not in the one the batch was
   *                   written in
   * @param includeTimerOnlyKeys also the keys holding only a timer (null state fields), and a
   *                   `has_state` column (false for them) before `partition`
   */
  def readState(
      spark: SparkSession,
      checkpoint: String,
      batchId: java.lang.Long = null,
      operatorId: java.lang.Long = null,
      inCurrentSchema: Boolean = false,
      includeTimerOnlyKeys: Boolean = false): DataFrame =
    dataFrame(spark,
      StateReadRequest.State(checkpoint, option(batchId), option(operatorId), inCurrentSchema,
        includeTimerOnlyKeys))

  /**
   * The change feed of the state: one row per change of a key in micro-batches `startBatch` to
   * `endBatch` (null: the last committed one), with `batch_id`, `change` (`update` or `delete`),
   * the key columns and the state's fields (in the current state schema when
   * `inCurrentSchema`, as [[readState]]'s).
   */
  def readStateChanges(
      spark: SparkSession,
      checkpoint: String,
      startBatch: Long,
      endBatch: java.lang.Long = null,
      operatorId: java.lang.Long = null,
      inCurrentSchema: Boolean = false): DataFrame =
    dataFrame(spark,
      StateReadRequest.Changes(checkpoint, startBatch, option(endBatch),
        option(operatorId), inCurrentSchema))

  /**
   * The resolved, checked plan of a read: the one function every door goes through (this API,
   * the Spark Connect plugin).
   */
  def plan(session: classic.SparkSession, request: StateReadRequest): LogicalPlan =
    request.relation(session)

  private def dataFrame(spark: SparkSession, request: StateReadRequest): DataFrame =
    classicDataFrame(spark, "reads the state")(plan(_, request))

  /**
   * The DataFrame of the plan `build` makes in `spark`, which must be a classic session (a
   * Spark Connect client, which `does` what is asked through the Connect plugin, is refused).
   */
  private[mapwithstate] def classicDataFrame(spark: SparkSession, does: String)(
      build: classic.SparkSession => LogicalPlan): DataFrame = {
    val session = spark match {
      case s: classic.SparkSession => s
      case null => throw MapWithStateException(ErrorCondition.InvalidArgument,
          "spark: a SparkSession is needed, got null")
      case other => throw MapWithStateException(ErrorCondition.InvalidArgument,
          s"spark must be a classic SparkSession, got ${other.getClass.getName} (a Spark Connect " +
            s"client $does through the Connect plugin instead)")
    }
    val built = build(session)
    new classic.Dataset[Row](session, built, Encoders.row(built.schema))
  }

  private def option(value: java.lang.Long): Option[Long] = Option(value).map(_.longValue)
}
