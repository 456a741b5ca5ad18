package io.mapwithstate.reader

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.execution.LeafExecNode
import org.apache.spark.util.SerializableConfiguration

/**
 * Executes a [[StateReadRelation]]: a [[StateReadRDD]] with one task per state partition, so
 * the executors read the partitions' files in parallel where they are, through the Hadoop file
 * system of the session's configuration.
 */
final case class StateReadExec(
    checkpoint: QueryCheckpoint,
    read: StateRead,
    output: Seq[Attribute]) extends LeafExecNode {

  override protected def doExecute(): RDD[InternalRow] = {
    val hadoopConf = sparkContext.broadcast(
      new SerializableConfiguration(session.sessionState.newHadoopConf()))
    new StateReadRDD(sparkContext, checkpoint, read, hadoopConf)
  }

  override def simpleString(maxFields: Int): String =
    s"StateRead ${checkpoint.location} $read"
}
