package io.mapwithstate.reader

import io.mapwithstate.state.{KeyStateColumns, OperatorMetadata}
import org.apache.spark.{Partition, SparkContext, TaskContext}
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, JoinedRow, UnsafeProjection}
import org.apache.spark.unsafe.types.UTF8String
import org.apache.spark.util.SerializableConfiguration

/**
 * The rows of a [[StateRead]], one RDD partition per state partition. Each task opens its
 * partition's files read-only and reads them as the checkpoint's backend wrote them
 * ([[StoredStateFormat]]): the keys of a version, or the changes of each batch of a range;
 * either way the same rows, whichever the backend.
 */
final class StateReadRDD(
    sc: SparkContext,
    checkpoint: QueryCheckpoint,
    read: StateRead,
    hadoopConf: Broadcast[SerializableConfiguration]) extends RDD[InternalRow](sc, Nil) {

  override protected def getPartitions: Array[Partition] =
    Array.tabulate[Partition](checkpoint.numPartitions)(i => StateReadRDD.StatePartition(i))

  override def compute(split: Partition, context: TaskContext): Iterator[InternalRow] = {
    val partition = split.index
    val conf = hadoopConf.value.value
    val stateFields = checkpoint.valueSchema.length
    val project = UnsafeProjection.create(read.schema(checkpoint).fields.map(_.dataType))
    read match {
      case StateRead.At(version, timerOnlyKeys) =>
        val columns = new KeyStateColumns.Rows(stateFields,
          timers = checkpoint.timeSlot == OperatorMetadata.Timers, timerOnlyKeys)
        val partitionColumn = new GenericInternalRow(Array[Any](partition))
        val row = new JoinedRow
        // A key holding only a timer is shown only when asked for (see KeyStateColumns).
        checkpoint.format.state(checkpoint, partition, version, conf)
          .filter(entry => columns.shows(entry.state))
          .map { entry =>
            project(row(columns.of(entry.key, entry.state, entry.updateTime), partitionColumn))
          }
      case StateRead.Changes(first, last) =>
        val noState = new GenericInternalRow(stateFields)
        val prefix = new GenericInternalRow(2)
        val update = UTF8String.fromString(StateRead.Update)
        val delete = UTF8String.fromString(StateRead.Delete)
        val row = new JoinedRow
        val prefixAndKey = new JoinedRow
        checkpoint.format.changes(checkpoint, partition, first, last, conf).map { change =>
          // A key left holding only a timer no longer has a state: a delete, as for the
          // state read at that batch (also when only its timer changed).
          val deleted = change.state == null
          prefix.setLong(0, change.batch)
          prefix.update(1, if (deleted) delete else update)
          project(row(prefixAndKey(prefix, change.key), if (deleted) noState else change.state))
        }
    }
  }
}

object StateReadRDD {

  /** A task of the read: the state partition it reads. */
  final case class StatePartition(index: Int) extends Partition
}
