package io.mapwithstate.repartition

import java.io.FileNotFoundException

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import io.mapwithstate.execution.MapWithStateStreamExec
import io.mapwithstate.plan.RequestLimits
import io.mapwithstate.reader.QueryCheckpoint
import io.mapwithstate.state.{
  OperatorMetadata,
  PartitionStateRewrite,
  RepartitionMarker,
  StateBackend,
  StateSchemaHistory
}
import io.mapwithstate.testing.RepartitionInterruption
import org.apache.hadoop.fs.{FileSystem, Path}
import org.apache.spark.Partitioner
import org.apache.spark.sql.catalyst.expressions.{BindReferences, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.checkpointing.{
  CommitLog,
  OffsetMap,
  OffsetSeq,
  OffsetSeqBase,
  OffsetSeqLog,
  OffsetSeqMetadata
}
import org.apache.spark.sql.execution.streaming.state.StateSchemaCompatibilityChecker
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue
import org.apache.spark.sql.types.StructType

/**
 * Rewrites the state of a stopped streaming query's map_with_state / map_groups_with_state
 * operators into another number of partitions: what `repartition_state` does, on the driver,
 * with one Spark job per operator. It owns the protocol that keeps the checkpoint usable
 * whatever step is interrupted, which is Spark's own for its operators
 * (`OfflineStateRepartitionRunner`): the rewrite is a micro-batch of its own, `B` = the last
 * committed batch + 1, reading no input (its offsets are the last batch's) and with
 * `spark.sql.shuffle.partitions` set to the new count in its offset log entry, so that the
 * restarted query plans every later batch with it. In order:
 *
 *  1. a mark in each operator's directory ([[RepartitionMarker]]), which makes a restart of
 *     the query refuse to run until the repartition is finished;
 *  2. version `B + 1` of every new partition, each key where the query's shuffle will send it
 *     (`pmod(murmur3(key columns), n)`, Spark's `HashPartitioning`, evaluated by Spark's own
 *     expression), timers and idle clocks as they were; the old versions stay;
 *  3. `offsets/B`, then `commits/B`: the commit is the one point after which the new layout is
 *     the checkpoint's. Before it the old layout is whole, and running `repartition_state`
 *     again (with the same count) redoes the interrupted batch;
 *  4. the marks removed, and the partitions beyond the new count (when fewer) deleted.
 *
 * A checkpoint with checkpoint ids (Spark's state checkpoint format v2, as Real-Time Mode
 * writes it; the last commit-log entry records them) is rewritten in that format: each old
 * partition is read at the id its commit names, each new one written under a new id, and
 * `commits/B` records those, so that the restarted query opens every new partition by its id.
 * (Spark's own runner copies the last entry's ids unchanged, which names files of the old
 * layout.)
 *
 * A checkpoint whose query runs in this application, or whose last batch is planned but not
 * committed (a query running elsewhere, or stopped mid-batch), is refused, as is one holding the
 * state of Spark's own stateful operators (whose state this does not rewrite).
 */
object CheckpointRepartition {

  /** What a repartition did. `keys` is None when there was nothing to do. */
  final case class Summary(
      operators: Seq[Long],
      keys: Option[Long],
      batchId: Long,
      oldPartitions: Int,
      newPartitions: Int)

  def run(session: SparkSession, checkpoint: String, numPartitions: Int): Summary = {
    val conf = session.sessionState.conf
    if (numPartitions < 1) {
      throw MapWithStateException(ErrorCondition.InvalidArgument,
        s"num_partitions must be at least 1, got $numPartitions")
    }
    val limit = RequestLimits.value(RequestLimits.MaxNumPartitions, conf)
    if (numPartitions > limit) {
      throw MapWithStateException(ErrorCondition.LimitExceeded,
        s"num_partitions $numPartitions is above the limit of $limit " +
          s"(${RequestLimits.MaxNumPartitions.key})")
    }
    val hadoopConf = session.sessionState.newHadoopConf()
    val (fs, root) = open(checkpoint, hadoopConf)
    val operators = stateOperators(fs, root, checkpoint)
    refuseActive(session, root, checkpoint)

    val offsets = new OffsetSeqLog(session, new Path(root, "offsets").toString)
    val commits = new CommitLog(session, new Path(root, "commits").toString)
    val lastCommitted = commits.getLatestBatchId().getOrElse(throw MapWithStateException(
        ErrorCondition.BatchUnavailable,
        s"checkpoint $checkpoint has no committed batch yet: run its query until it finishes a " +
          "micro-batch before repartitioning its state"))
    val lastPlanned = offsets.getLatestBatchId().getOrElse(lastCommitted)
    val committedEntry = offsets.get(lastCommitted).getOrElse(throw MapWithStateException(
        ErrorCondition.CheckpointUnreadable,
        s"checkpoint $checkpoint has no offset log entry for its last committed batch " +
          s"$lastCommitted"))
    val oldPartitions = partitionsOf(committedEntry, checkpoint, lastCommitted)

    val marked = isUnfinishedRepartition(fs, root, operators, lastPlanned, hadoopConf)
    val plannedCount = Option.when(lastPlanned == lastCommitted + 1)(lastPlanned)
      .flatMap(offsets.get).map(partitionsOf(_, checkpoint, lastPlanned))
    if (marked && plannedCount.contains(oldPartitions)) {
      // Not the repartition's entry (which has another count): a restart of the query planned
      // it, and the unfinished repartition refused to run it, so it never ran. Dropped, its
      // input is planned again by the query's next batch.
      offsets.purgeAfter(lastCommitted)
    }
    val lastEntry = offsets.getLatestBatchId().getOrElse(lastCommitted)
    val batch =
      if (lastEntry == lastCommitted) lastCommitted + 1
      // Marked by this code, or an entry with another count after the last committed batch:
      // Spark's criterion for a repartition batch (its own runner logs it first, and fails on
      // these operators' state, leaving it for this one to finish).
      else if (lastEntry == lastCommitted + 1 &&
        (marked || plannedCount.exists(_ != oldPartitions))) {
        val planned = partitionsOf(offsets.get(lastEntry).get, checkpoint, lastEntry)
        if (planned != numPartitions) {
          throw MapWithStateException(ErrorCondition.QueryActive,
            s"checkpoint $checkpoint holds an unfinished repartition into $planned " +
              s"partitions (batch $lastEntry): finish it first, with num_partitions=$planned")
        }
        lastEntry
      } else {
        throw MapWithStateException(ErrorCondition.QueryActive,
          s"checkpoint $checkpoint: batch $lastEntry is planned but not committed (the " +
            s"last committed is $lastCommitted): its query is running, or stopped in the " +
            "middle of a batch; stop it, or restart it to finish the batch and stop it, then " +
            "repartition")
      }
    val resuming = batch == lastEntry
    if (!resuming && oldPartitions == numPartitions) {
      abandon(fs, root, operators, lastCommitted, hadoopConf)
      cleanUp(fs, root, operators, numPartitions, hadoopConf)
      return Summary(operators, None, lastCommitted, oldPartitions, numPartitions)
    }

    // The store settings the query runs with: the session's, under those its log recorded.
    val queryConf = conf.clone()
    committedEntry.metadataOpt.foreach(OffsetSeqMetadata.setSessionConf(_, queryConf))
    operators.foreach { op =>
      RepartitionMarker.write(operatorDir(root, op), batch, hadoopConf)
      OperatorMetadata.recordRepartitionBatch(operatorDir(root, op), batch, hadoopConf)
    }
    val written = operators.map { op =>
      val readIds =
        QueryCheckpoint.committedIds(root, lastCommitted, op, oldPartitions, hadoopConf)
      op -> rewrite(session, operatorDir(root, op), queryConf, oldPartitions, numPartitions,
        readVersion = lastCommitted + 1, readIds, writeVersion = batch + 1)
    }

    RepartitionInterruption.after("state", conf)
    if (!resuming) {
      val entry = withPartitions(committedEntry, numPartitions)
      if (!offsets.add(batch, entry)) concurrentUpdate(checkpoint, "offsets", batch)
    }
    RepartitionInterruption.after("offsets", conf)
    // The ids of the versions written, for the operators whose state has them.
    val writtenIds = written.flatMap { case (op, partitions) =>
      Option.when(partitions.forall(_.id.isDefined))(op -> partitions.map(_.id.get))
    }.toMap
    val commit = StreamingQueryGlue.withCommittedStateIds(commits.get(lastCommitted).get,
      writtenIds)
    if (!commits.add(batch, commit)) concurrentUpdate(checkpoint, "commits", batch)
    val keys = written.map(_._2.map(_.keys).sum).sum
    cleanUp(fs, root, operators, numPartitions, hadoopConf)
    Summary(operators, Some(keys), batch, oldPartitions, numPartitions)
  }

  private def operatorDir(root: Path, operator: Long): Path =
    new Path(new Path(root, "state"), operator.toString)

  private def open(checkpoint: String, hadoopConf: org.apache.hadoop.conf.Configuration)
      : (FileSystem, Path) = {
    val (fs, root) = QueryCheckpoint.open(checkpoint, hadoopConf)
    if (!fs.exists(new Path(root, "offsets")) || !fs.exists(new Path(root, "commits"))) {
      throw MapWithStateException(ErrorCondition.NotACheckpoint,
        s"checkpoint $checkpoint is not a streaming query's checkpoint: it has no offsets/ " +
          "and commits/")
    }
    (fs, root)
  }

  /** The checkpoint's map_with_state operators; refuses one with other stateful operators. */
  private def stateOperators(fs: FileSystem, root: Path, checkpoint: String): Seq[Long] = {
    val ids =
      (try fs.listStatus(new Path(root, "state")).toSeq
      catch { case _: FileNotFoundException => Nil })
        .filter(_.isDirectory).flatMap(_.getPath.getName.toLongOption).sorted
    val (ours, sparks) = ids.partition(_ >= MapWithStateStreamExec.FirstOperatorId)
    if (ours.isEmpty) {
      throw MapWithStateException(ErrorCondition.NotACheckpoint,
        s"checkpoint $checkpoint holds no map_with_state state " +
          (if (ids.isEmpty) "(a stateless query?)"
           else s"(only the state of Spark's stateful operators ${ids.mkString(", ")})"))
    }
    if (sparks.nonEmpty) {
      throw MapWithStateException(ErrorCondition.NotACheckpoint,
        s"checkpoint $checkpoint also holds the state of Spark's stateful operators " +
          s"${sparks.mkString(", ")}, which repartition_state does not rewrite (changing the " +
          "partitions would lose it); only a query whose stateful operators are all " +
          "map_with_state / map_groups_with_state can be repartitioned")
    }
    ours
  }

  private def refuseActive(session: SparkSession, root: Path, checkpoint: String): Unit =
    StreamingQueryGlue.activeQueryCheckpoints(session)
      .find { case (_, location) => new Path(location) == root }
      .foreach { case (id, _) =>
        throw MapWithStateException(ErrorCondition.QueryActive,
          s"checkpoint $checkpoint belongs to streaming query $id, running in this " +
            "application: stop it (query.stop()) before repartitioning its state")
      }

  private def partitionsOf(entry: OffsetSeqBase, checkpoint: String, batch: Long): Int =
    entry.metadataOpt.flatMap(_.conf.get(SQLConf.SHUFFLE_PARTITIONS.key)).map(_.toInt)
      .getOrElse(throw MapWithStateException(ErrorCondition.CheckpointUnreadable,
          s"the offset log entry of batch $batch of $checkpoint records no " +
            s"${SQLConf.SHUFFLE_PARTITIONS.key}"))

  /** Whether uncommitted `batch` is a repartition this left unfinished (its marks name it). */
  private def isUnfinishedRepartition(fs: FileSystem, root: Path, operators: Seq[Long],
      batch: Long, hadoopConf: org.apache.hadoop.conf.Configuration): Boolean =
    operators.exists(op =>
      RepartitionMarker.read(operatorDir(root, op), hadoopConf)
        .contains(batch))

  private def withPartitions(entry: OffsetSeqBase, n: Int): OffsetSeqBase = {
    val key = SQLConf.SHUFFLE_PARTITIONS.key
    entry match {
      case v1: OffsetSeq =>
        val metadata = v1.metadataOpt.get
        v1.copy(metadataOpt = Some(metadata.copy(conf = metadata.conf + (key -> n.toString))))
      case v2: OffsetMap =>
        v2.copy(metadata = v2.metadata.copy(conf = v2.metadata.conf + (key -> n.toString)))
    }
  }

  private def concurrentUpdate(checkpoint: String, log: String, batch: Long): Nothing =
    throw MapWithStateException(ErrorCondition.QueryActive,
      s"checkpoint $checkpoint: $log/$batch appeared while repartitioning: another query or " +
        "repartition is writing this checkpoint")

  /**
   * Undoes what a repartition abandoned before its batch was logged wrote (its mark names a
   * batch after `lastCommitted`): the version after that batch in every partition, which a
   * query running that batch would otherwise find there, and the batch among the
   * repartitions'.
   */
  private def abandon(fs: FileSystem, root: Path, operators: Seq[Long], lastCommitted: Long,
      hadoopConf: org.apache.hadoop.conf.Configuration): Unit =
    operators.foreach { op =>
      val dir = operatorDir(root, op)
      RepartitionMarker.read(dir, hadoopConf).filter(_ > lastCommitted).foreach { batch =>
        // `<version>.<suffix>`, or `<version>_<checkpoint id>.<suffix>` in a checkpoint with
        // ids, and their hidden temporary files.
        val version = Seq(s"${batch + 1}.", s"${batch + 1}_")
        fs.listStatus(dir).toSeq
          .filter(s => s.isDirectory && s.getPath.getName.toIntOption.isDefined)
          .flatMap(partition => fs.listStatus(partition.getPath).toSeq)
          .filter { file =>
            val name = file.getPath.getName.stripPrefix(".")
            version.exists(name.startsWith)
          }
          .foreach(file => fs.delete(file.getPath, false))
        OperatorMetadata.forgetRepartitionBatch(dir, batch, hadoopConf)
      }
    }

  /** Removes the marks, then the partitions beyond `numPartitions`. */
  private def cleanUp(fs: FileSystem, root: Path, operators: Seq[Long], numPartitions: Int,
      hadoopConf: org.apache.hadoop.conf.Configuration): Unit =
    operators.foreach { op =>
      val dir = operatorDir(root, op)
      RepartitionMarker.remove(dir, hadoopConf)
      fs.listStatus(dir).toSeq.filter(_.isDirectory)
        .flatMap(s => s.getPath.getName.toIntOption.map(_ -> s.getPath))
        .filter(_._1 >= numPartitions).sortBy(-_._1)
        .foreach { case (_, path) => fs.delete(path, true) }
    }

  /**
   * Rewrites one operator's state from `oldPartitions` partitions at `readVersion` (each
   * partition's with the checkpoint id of `readIds`, in a checkpoint with ids) into
   * `newPartitions` at `writeVersion` (in the same format); returns what each new partition
   * holds, in order.
   */
  private def rewrite(session: SparkSession, dir: Path, queryConf: SQLConf, oldPartitions: Int,
      newPartitions: Int, readVersion: Long, readIds: Option[IndexedSeq[String]],
      writeVersion: Long): Seq[PartitionStateRewrite.Written] = {
    val hadoopConf = session.sessionState.newHadoopConf()
    val backendName = OperatorMetadata.backend(dir, hadoopConf)
    val (keySchema, valueSchema) = readSchema(dir, hadoopConf)
    val backend = StateBackend.of(backendName, queryConf)
    // The state's type at the version read, which the version written keeps.
    val stateType = StateSchemaHistory.stateTypeAt(StateSchemaHistory.read(dir, hadoopConf),
      readVersion, backend.stateTypeOf(valueSchema))
    val rewriter: PartitionStateRewrite = backend match {
      case _: StateBackend.Memory =>
        PartitionStateRewrite.Memory(keySchema, stateType, readIds.isDefined,
          queryConf.getConf(SQLConf.STATE_STORE_COMPRESSION_CODEC),
          hadoopConf.iterator().asScala.map(e => e.getKey -> e.getValue).toMap)
      case rocks: StateBackend.RocksDB =>
        PartitionStateRewrite.RocksDB(keySchema, stateType, readIds.isDefined,
          queryConf.getAllConfs ++ rocks.storeSqlConfs +
            (SQLConf.STATE_STORE_PROVIDER_CLASS.key -> rocks.providerClassName))
    }
    val location = dir.toString
    val keyFields = keySchema.length
    session.sparkContext.parallelize(0 until oldPartitions, oldPartitions)
      .mapPartitionsWithIndex { (partition, _) =>
        val partitionOf = newPartitionOf(keySchema, newPartitions)
        rewriter.read(location, partition, readVersion, readIds.map(_(partition))).map { r =>
          val key = new UnsafeRow(keyFields)
          key.pointTo(r.key, r.key.length)
          (partitionOf(key), r)
        }
      }
      .partitionBy(new IdentityPartitioner(newPartitions))
      .mapPartitionsWithIndex { (partition, records) =>
        Iterator(rewriter.write(location, partition, writeVersion, records.map(_._2)))
      }
      .collect().toSeq
  }

  /** The partition the query's shuffle sends a key row to: Spark's `HashPartitioning`. */
  private def newPartitionOf(keySchema: StructType, n: Int): UnsafeRow => Int = {
    val attributes = DataTypeUtils.toAttributes(keySchema)
    val expression = BindReferences.bindReference(
      HashPartitioning(attributes, n).partitionIdExpression, attributes)
    val projection = UnsafeProjection.create(Seq(expression))
    key => projection(key).getInt(0)
  }

  /** The key and value schemas Spark's schema check recorded for the operator. */
  private def readSchema(dir: Path, hadoopConf: org.apache.hadoop.conf.Configuration)
      : (StructType, StructType) = {
    val file = new Path(new Path(new Path(dir, "0"), "_metadata"), "schema")
    val fs = file.getFileSystem(hadoopConf)
    val schemas =
      try StateSchemaCompatibilityChecker.readSchemaFile(fs.open(file))
      catch {
        case NonFatal(e) => throw new MapWithStateException(ErrorCondition.CheckpointUnreadable,
            s"cannot read the state schema file $file: ${MapWithStateException.describe(e)}", e)
      }
    (schemas.head.keySchema, schemas.head.valueSchema)
  }

  /** Sends each record to the partition its key already names. */
  private final class IdentityPartitioner(n: Int) extends Partitioner {
    override def numPartitions: Int = n
    override def getPartition(key: Any): Int = key.asInstanceOf[Int]
  }
}
