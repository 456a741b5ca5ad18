package io.mapwithstate.execution

import scala.reflect.ClassTag

import io.mapwithstate.state.{DeferredCloses, StateBackend, StoredStateConversion}
import org.apache.spark.{NarrowDependency, Partition, SparkEnv, TaskContext}
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperatorStateInfo
import org.apache.spark.sql.execution.streaming.state.{StateStore, StateStoreConf}
import org.apache.spark.sql.execution.streaming.state.{StateStoreId, StateStoreProviderId}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue
import org.apache.spark.sql.types.StructType
import org.apache.spark.util.SerializableConfiguration

/**
 * The stateful stage of a streaming mapWithState: runs `f` over each state partition of `data`
 * with the partition's state store, opened by the operator's [[StateBackend]] whatever the
 * session's provider is. As Spark's `StateStoreRDD` does, a task opens its store at the
 * version before the micro-batch, prefers the executor the coordinator says has it loaded,
 * aborts it if the task ends uncommitted, and unloads it after the task when the store conf
 * says so. It differs from Spark's in three ways.
 *
 * A task may serve several state partitions: its [[StateTaskPartition]]'s members, one of
 * `groups` ([[StateTaskGroups]]), read through a narrow dependency as Spark's `CoalescedRDD`
 * reads its parents. Each member's store is opened once the previous member's output is
 * exhausted, which is when `f`'s output commits it; `f` learns the partition from its store's
 * id. The commit of every member but the last hands the close of its delta file to the task's
 * [[DeferredCloses]], so that the file becomes durable while the next member runs; the last
 * member has nothing to go on to and closes its delta in place. The task's output ends once
 * every member's delta is durable, and a task that fails or stops early still waits for them,
 * and fails if one failed.
 *
 * The Hadoop configuration the stores are opened with is a broadcast made once per query run
 * ([[HadoopConfBroadcasts]]) rather than once per micro-batch. And it never looks for a read
 * store opened earlier in the task (Spark's `StateStoreThreadLocalTracker`): each member opens
 * exactly one store. In the first micro-batch after a restart with a changed state schema,
 * each store opens with its state converted (`conversion`, see [[StateBackend.openStore]]).
 *
 * When Spark counts the micro-batch's store commits (`reportCommits`, see
 * `StreamingQueryGlue.tracksStoreCommits`), each member's commit is reported once its output
 * is done: the heap stores do not report their commits as Spark's do (a RocksDB store may
 * report too: the coordinator counts a partition once).
 */
private[execution] class StateTaskRDD[T: ClassTag, U: ClassTag](
    data: RDD[T],
    groups: Array[Array[Int]],
    f: (StateStore, Iterator[T]) => Iterator[U],
    info: StatefulOperatorStateInfo,
    backend: StateBackend,
    keySchema: StructType,
    stateType: StructType,
    storeConf: StateStoreConf,
    hadoopConf: Broadcast[SerializableConfiguration],
    reportCommits: Boolean,
    @transient storeLocation: StateStoreProviderId => Option[String],
    conversion: Option[StoredStateConversion])
  extends RDD[U](data.context,
    Seq(new NarrowDependency[T](data) {
      override def getParents(partitionId: Int): Seq[Int] = groups(partitionId).toSeq
    })) {
  import StateTaskRDD._

  require(groups.flatten.sameElements(data.partitions.indices),
    s"state task groups " +
      s"${groups.map(_.mkString("[", ",", "]")).mkString} do not cover ${data.partitions.length} " +
      "partitions in order")

  private def providerId(partition: Partition): StateStoreProviderId = StateStoreProviderId(
    StateStoreId(info.checkpointLocation, info.operatorId, partition.index), info.queryRunId)

  override protected def getPartitions: Array[Partition] = {
    val parents = firstParent[T].partitions
    groups.zipWithIndex.map { case (members, i) =>
      StateTaskPartition(i, members.map(parents(_))): Partition
    }
  }

  override def getPreferredLocations(partition: Partition): Seq[String] =
    partition.asInstanceOf[StateTaskPartition].members.iterator
      .flatMap(m => storeLocation(providerId(m)))
      .take(1).toSeq

  override def compute(partition: Partition, context: TaskContext): Iterator[U] =
    partition.asInstanceOf[StateTaskPartition].members match {
      case Array(member) => computeMember(member, None, context)
      case members =>
        val closes = DeferredCloses.forTask()
        context.addTaskCompletionListener[Unit](_ => closes.awaitAll())
        val last = members.last
        onExhausted(members.iterator.flatMap { member =>
          computeMember(member, if (member eq last) None else Some(closes), context)
        })(closes.awaitAll())
    }

  /** `f` over one state partition's input, with its store; its commit defers to `closes`. */
  private def computeMember(
      partition: Partition,
      closes: Option[DeferredCloses],
      context: TaskContext): Iterator[U] = {
    val id = providerId(partition)
    val input = firstParent[T].iterator(partition, context)
    val store = backend.openStore(id, info, keySchema, stateType, storeConf,
      hadoopConf.value.value, closes, conversion)
    // Completion listeners run last-registered first: the abort, then the unload.
    if (storeConf.unloadOnCommit) {
      context.addTaskCompletionListener[Unit](_ => backend.unloadStore(id))
    }
    context.addTaskCompletionListener[Unit](_ => if (!store.hasCommitted) store.abort())
    val output = f(store, input)
    if (!reportCommits) output
    else onExhausted(output) {
      if (store.hasCommitted) {
        StreamingQueryGlue.reportStoreCommit(SparkEnv.get, id, info.storeVersion + 1)
      }
    }
  }
}

private[execution] object StateTaskRDD {

  /**
   * `f` over each partition of `data` with its state store of `backend`, a task serving each
   * of `groups` ([[StateTaskGroups]]): the stateful stage of micro-batch `info` of the query
   * running in `session`. `f` is not run through `sc.clean`, as Spark's `StateStoreRDD` does
   * with its function: its one caller's function is a compiled lambda with nothing for the
   * cleaner to null out, and the cleaner's check (reading class files, then serializing the
   * function and the operator it captures) is driver time before each batch's job can start.
   * Serializing the stage's tasks still fails clearly on anything unserializable.
   */
  def apply[T: ClassTag, U: ClassTag](
      data: RDD[T],
      session: SparkSession,
      info: StatefulOperatorStateInfo,
      backend: StateBackend,
      keySchema: StructType,
      stateType: StructType,
      groups: Array[Array[Int]],
      conversion: Option[StoredStateConversion] = None)(
      f: (StateStore, Iterator[T]) => Iterator[U]): RDD[U] =
    new StateTaskRDD(data, groups, f, info, backend, keySchema, stateType,
      storeConf(session, backend),
      HadoopConfBroadcasts.of(data.sparkContext, info.queryRunId,
        session.sessionState.newHadoopConf()),
      StreamingQueryGlue.tracksStoreCommits(session),
      StreamingQueryGlue.storeLocations(session), conversion)

  /**
   * The store conf of `backend`'s stores: from a copy of the session's SQL conf naming its
   * provider, with its SQL settings and store options. A copy: a cloned SessionState shares
   * its session's SQLConf (Spark 4.3's BaseSessionStateBuilder), so setting the provider there
   * would hand it to every stateful operator planned after this one in the micro-batch (a
   * streaming aggregation over our rows would keep its state in our store).
   */
  private def storeConf(session: SparkSession, backend: StateBackend): StateStoreConf = {
    val sqlConf = session.sessionState.conf.clone()
    sqlConf.setConfString(SQLConf.STATE_STORE_PROVIDER_CLASS.key, backend.providerClassName)
    backend.storeSqlConfs.foreach { case (k, v) => sqlConf.setConfString(k, v) }
    new StateStoreConf(sqlConf, backend.storeOptions)
  }

  /** `it`, then `done`, once, when `it` is exhausted. */
  private def onExhausted[U](it: Iterator[U])(done: => Unit): Iterator[U] = new Iterator[U] {
    private var finished = false

    override def hasNext: Boolean = it.hasNext || {
      if (!finished) {
        finished = true
        done
      }
      false
    }

    override def next(): U = it.next()
  }
}

/** A task of [[StateTaskRDD]]: the input partitions (state partitions) it serves, in order. */
private[execution] case class StateTaskPartition(index: Int, members: Array[Partition])
  extends Partition
