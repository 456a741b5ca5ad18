package io.mapwithstate.reader

import io.mapwithstate.state.{
  CommitLineage,
  KeyStateColumns,
  OperatorMetadata,
  StateMap,
  StateMapSerde
}
import org.apache.spark.{Partition, SparkContext, TaskContext}
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, JoinedRow, UnsafeProjection}
import org.apache.spark.unsafe.types.UTF8String
import org.apache.spark.util.SerializableConfiguration

/**
 * The rows of a [[StateRead]], one RDD partition per state partition. Each task opens its
 * partition's files read-only and goes through the same code as the store: the state at a
 * version is loaded by [[CommitLineage]] (newest snapshot at or below it, then deltas; with
 * checkpoint ids, of the lineage the version's commit names),
 * a batch's changes are the records of its delta file ([[StateMapSerde.readDeltaRecords]]);
 * both check every file and fail naming a damaged or missing one.
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
    val files = checkpoint.partitionFiles(partition, hadoopConf.value.value)
    val keyFields = checkpoint.keySchema.length
    val stateFields = checkpoint.valueSchema.length
    val project = UnsafeProjection.create(read.schema(checkpoint).fields.map(_.dataType))
    read match {
      case StateRead.At(version) =>
        // Along the lineage its commit names, in a checkpoint with checkpoint ids.
        val map = CommitLineage.load(files, checkpoint.commitOf(version, partition), keyFields,
          stateFields, StateMap.DefaultDeltaChainThreshold).map
        val times = new KeyStateColumns.Times(checkpoint.timeSlot == OperatorMetadata.Timers)
        val partitionColumn = new GenericInternalRow(Array[Any](partition))
        val row = new JoinedRow
        val keyAndState = new JoinedRow
        val withTimes = new JoinedRow
        // A key holding only a timer has no state to show (nor do a stream's snapshots).
        map.getAll().filter(_.state != null).map { entry =>
          project(row(withTimes(keyAndState(entry.key, entry.state), times.of(entry.updateTime)),
              partitionColumn))
        }
      case StateRead.Changes(first, last) =>
        val noState = new GenericInternalRow(stateFields)
        val prefix = new GenericInternalRow(2)
        val update = UTF8String.fromString(StateRead.Update)
        val delete = UTF8String.fromString(StateRead.Delete)
        val row = new JoinedRow
        val prefixAndKey = new JoinedRow
        // One batch's delta at a time: a feed over many batches holds one delta in memory.
        Iterator.range(0, (last - first + 1).toInt).map(first + _).flatMap { batch =>
          val delta = files.deltaFile(batch + 1, checkpoint.commitOf(batch + 1, partition).id)
          files.read(delta)(in => StateMapSerde.readDeltaRecords(in, keyFields, stateFields))
            .iterator.map { record =>
              // A key left holding only a timer no longer has a state: a delete, as for the
              // state read at that batch (also when only its timer changed).
              val deleted = record.state == null
              prefix.setLong(0, batch)
              prefix.update(1, if (deleted) delete else update)
              project(row(prefixAndKey(prefix, record.key), if (deleted) noState else record.state))
            }
        }
    }
  }
}

object StateReadRDD {

  /** A task of the read: the state partition it reads. */
  final case class StatePartition(index: Int) extends Partition
}
