package io.mapwithstate.execution

import scala.jdk.CollectionConverters._

import io.mapwithstate.{LocalSpark, MapWithState, StateSpec, TempDirs}
import io.mapwithstate.functions._
import io.mapwithstate.plan.MapWithStateBuilder
import io.mapwithstate.state.DeferredCloses
import org.apache.spark.SparkEnv
import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.execution.{ProjectExec, SortExec}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.execution.streaming.runtime.{
  MemoryStream,
  StreamExecution,
  StreamingQueryWrapper
}
import org.apache.spark.sql.functions._
import org.scalatest.funsuite.AnyFunSuite

/**
 * What the streaming operator ships to its tasks, in real micro-batches of a local session:
 * the operator without the plan below it, one Hadoop configuration broadcast per query run,
 * and the state partitions each task serves.
 */
class MapWithStateStreamExecSuite extends AnyFunSuite with LocalSpark with TempDirs {

  private val runningCount = StateSpec.function("n BIGINT",
    update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
    emit = struct(col("value").as("word"), newState("n").as("n")))

  /**
   * Runs the running count over `batches` as one query run on `checkpoint`, each batch a
   * micro-batch; returns every emitted (word, n) and the query's execution. The first `done`
   * batches are those an earlier run on the checkpoint processed: in the stream before the
   * query starts, they are not run again.
   */
  private def run(
      checkpoint: String,
      batches: Seq[Seq[String]],
      settings: Map[String, String] = Map.empty,
      done: Int = 0,
      spec: StateSpec = runningCount): (Seq[(String, Long)], StreamExecution) = {
    val session = spark
    implicit val sqlContext: org.apache.spark.sql.SQLContext = session.sqlContext
    val input = MemoryStream[String](Encoders.STRING, sqlContext)
    batches.take(done).foreach(words => input.addData(words: _*))
    // foreachBatch rather than the memory sink, which cannot restart from a checkpoint.
    val emitted = new java.util.concurrent.ConcurrentLinkedQueue[(String, Long)]()
    val before = settings.keys.map(k => k -> session.conf.getOption(k)).toMap
    settings.foreach { case (k, v) => session.conf.set(k, v) }
    val query =
      try {
        MapWithState.mapWithState(input.toDF(), Seq(col("value")), spec)
          .writeStream.outputMode("append").option("checkpointLocation", checkpoint)
          .foreachBatch { (batch: DataFrame, _: Long) =>
            batch.collect().foreach(r => emitted.add((r.getString(0), r.getLong(1))))
          }.start()
      } finally before.foreach {
          case (k, Some(v)) => session.conf.set(k, v)
          case (k, None) => session.conf.unset(k)
        }
    try {
      batches.drop(done).foreach { words =>
        input.addData(words: _*)
        query.processAllAvailable()
      }
      (emitted.asScala.toSeq.sorted, query.asInstanceOf[StreamingQueryWrapper].streamingQuery)
    } finally query.stop()
  }

  test("a query run broadcasts its stores' Hadoop configuration once, not once per micro-batch") {
    withDir { dir =>
      val before = HadoopConfBroadcasts.broadcasts
      val batches = Seq(Seq("a", "b"), Seq("a"), Seq("a", "c"))
      val (rows, _) = run(new java.io.File(dir, "cp").getPath, batches)
      assert(rows == Seq(("a", 1L), ("a", 2L), ("a", 3L), ("b", 1L), ("c", 1L)))
      assert(HadoopConfBroadcasts.broadcasts == before + 1)
      // Another query run has its own.
      val (more, _) = run(new java.io.File(dir, "cp2").getPath, Seq(Seq("b"), Seq("b")))
      assert(more == Seq(("b", 1L), ("b", 2L)))
      assert(HadoopConfBroadcasts.broadcasts == before + 2)
    }
  }

  test("the operator ships to its tasks without the plan below it") {
    withDir { dir =>
      val (_, execution) = run(new java.io.File(dir, "cp").getPath, Seq(Seq("a")))
      val operator = execution.lastExecution.executedPlan.collectFirst {
        case op: MapWithStateStreamExec => op
      }.getOrElse(fail("no mapWithState operator in the executed plan"))
      assert(operator.child != null)
      val serializer = SparkEnv.get.closureSerializer.newInstance()
      val shipped = serializer.deserialize[MapWithStateStreamExec](serializer.serialize(operator))
      assert(shipped.child == null && shipped.initialState == null)
      assert(shipped.function == operator.function && shipped.stateInfo == operator.stateInfo)
    }
  }

  test("in local mode a stateful stage runs a task per core, each serving a run of partitions") {
    withDir { dir =>
      val words = (0 until 24).map(i => s"w$i")
      val batches = Seq(words, words.take(12))
      val expected = (words.map(w => (w, 1L)) ++ words.take(12).map(w => (w, 2L))).sorted
      val fourPartitions = Map("spark.sql.shuffle.partitions" -> "4")
      val grouped = new java.io.File(dir, "grouped")
      val deferredBefore = DeferredCloses.deferredCount
      val (rows, execution) = run(grouped.getPath, batches, fourPartitions)
      assert(rows == expected)
      // Each partition's delta but a task's last was made durable in the background while its
      // task went on (the last closes in place: nothing follows it), and the task waited for
      // them before its output counted (the files are all there below): two tasks of two
      // partitions, two micro-batches.
      assert(DeferredCloses.deferredCount - deferredBefore == 2 * 2)
      val operator = execution.lastExecution.executedPlan.collectFirst {
        case op: MapWithStateStreamExec => op
      }.get
      // local[2]: two tasks over four state partitions, the plan saying so too.
      assert(operator.stateInfo.get.numPartitions == 4)
      assert(operator.execute().getNumPartitions == 2)
      assert(operator.outputPartitioning.numPartitions == 2)
      // Each partition keeps its own store: a delta per micro-batch (a version) per partition.
      val state = new java.io.File(grouped, s"state/${MapWithStateStreamExec.FirstOperatorId}")
      assert((0 until 4).forall(p =>
          (1 to 2).forall(v => new java.io.File(state, s"$p/$v.delta").isFile)))

      // Off: a task per partition, the same answer; the grouping may change across a restart.
      val off =
        fourPartitions + (io.mapwithstate.MapWithStateConf.CoalesceLocalStoreTasks -> "false")
      val singleBefore = DeferredCloses.deferredCount
      val (alone, perPartition) = run(new java.io.File(dir, "single").getPath, batches, off)
      assert(alone == expected)
      // A task of one partition has nothing to go on to: its commit makes its delta durable.
      assert(DeferredCloses.deferredCount == singleBefore)
      assert(perPartition.lastExecution.executedPlan.collectFirst {
        case op: MapWithStateStreamExec => op.execute().getNumPartitions
      }.contains(4))
      // The restarted run emits the new micro-batch's rows only.
      val (restarted, _) = run(grouped.getPath, batches ++ Seq(words.take(1)), off, done = 2)
      assert(restarted == Seq(("w0", 3L)))
    }
  }

  test("a task serving several partitions compiles the state function once, not once each") {
    withDir { dir =>
      // A function no earlier query compiled, so the pool has no idle instance of it.
      val function = StateSpec.function("n BIGINT",
        update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
        emit = struct(col("value").as("word"), newState("n").as("count_once")))
      val words = (0 until 40).map(i => s"w$i")
      val before = CompiledStateFunctionPool.compilations
      val (rows, execution) = run(new java.io.File(dir, "cp").getPath, Seq(words, words),
        Map("spark.sql.shuffle.partitions" -> "8"), spec = function)
      assert(rows == (words.map((_, 1L)) ++ words.map((_, 2L))).sorted)
      assert(execution.lastExecution.executedPlan.collectFirst {
        case op: MapWithStateStreamExec => op.execute().getNumPartitions
      }.contains(2))
      // Two tasks (local[2]) of four partitions each: at most one instance per task.
      val compiled = CompiledStateFunctionPool.compilations - before
      assert(compiled >= 1 && compiled <= 2, s"$compiled instances compiled")
    }
  }

  test("over a stream, order_by is a sort within each state partition, after the one shuffle") {
    withDir { dir =>
      implicit val sqlContext: org.apache.spark.sql.SQLContext = spark.sqlContext
      val input = MemoryStream[String](Encoders.STRING, sqlContext)
      val fields = split(col("value"), ",")
      val records = input.toDF().select(fields.getItem(0).as("word"),
        fields.getItem(1).cast("int").as("t"))
      // Each record emits the t of the key's record before it: in order, always the one before.
      val spec = StateSpec.function("last INT",
        update = struct(col("t").as("last")),
        emit = struct(col("word"), state("last").as("before"), col("t")))
      val emitted = new java.util.concurrent.ConcurrentLinkedQueue[(String, Option[Int], Int)]()
      val query = MapWithState.mapWithState(records, Seq(col("word")), spec,
        orderBy = Seq(col("t")))
        .writeStream.outputMode("append")
        .option("checkpointLocation", new java.io.File(dir, "cp").getPath)
        .foreachBatch { (batch: DataFrame, _: Long) =>
          batch.collect().foreach(r =>
            emitted.add((r.getString(0), Option(r.get(1)).map(_.asInstanceOf[Int]), r.getInt(2))))
        }.start()
      try {
        input.addData("a,3", "b,2", "a,1", "a,2", "b,1")
        query.processAllAvailable()
        input.addData("a,5", "a,4")
        query.processAllAvailable()
        assert(emitted.asScala.toSeq.sortBy(r => (r._1, r._3)) === Seq(
          ("a", None, 1), ("a", Some(1), 2), ("a", Some(2), 3), ("a", Some(3), 4),
          ("a", Some(4), 5), ("b", None, 1), ("b", Some(1), 2)))
        val plan = query.asInstanceOf[StreamingQueryWrapper].streamingQuery.lastExecution
          .executedPlan
        val operator = plan.collectFirst { case op: MapWithStateStreamExec => op }.get
        val sorts = operator.child.collect { case s: SortExec => s }
        assert(sorts.size === 1 && !sorts.head.global)
        assert(sorts.head.sortOrder.map(_.child.references.head.name) ===
          Seq(s"${MapWithStateBuilder.OrderColumnPrefix}0", WithinBatchOrder.ArrivalColumn))
        // The sort is above the shuffle the state partitions need anyway, and adds none.
        assert(sorts.head.collect { case e: ShuffleExchangeExec => e }.size === 1)
        assert(plan.collect { case e: ShuffleExchangeExec => e }.size === 1)
      } finally query.stop()

      // Without order_by: neither sort nor arrival numbers.
      val (_, unordered) = run(new java.io.File(dir, "unordered").getPath, Seq(Seq("a")))
      val plain = unordered.lastExecution.executedPlan
      assert(plain.collect { case s: SortExec => s }.isEmpty)
      assert(!plain.collect { case p: ProjectExec => p }
          .exists(_.output.exists(_.name == WithinBatchOrder.ArrivalColumn)))
    }
  }

  test("state task groups cover the partitions in order, in runs that differ by at most one") {
    for (partitions <- 0 to 9; tasks <- 1 to 5) {
      val groups = StateTaskGroups.split(partitions, tasks)
      assert(groups.flatten.toSeq == (0 until partitions), s"$partitions over $tasks")
      assert(groups.length == math.min(partitions, tasks))
      if (groups.nonEmpty) assert(groups.map(_.length).max - groups.map(_.length).min <= 1)
    }
    assert(StateTaskGroups.split(4, 2).map(_.toSeq).toSeq == Seq(Seq(0, 1), Seq(2, 3)))
    assert(StateTaskGroups.split(5, 2).map(_.toSeq).toSeq == Seq(Seq(0, 1, 2), Seq(3, 4)))
    assert(StateTaskGroups.single(3).map(_.toSeq).toSeq == Seq(Seq(0), Seq(1), Seq(2)))
  }
}
