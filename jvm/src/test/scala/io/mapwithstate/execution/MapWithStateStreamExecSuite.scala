package io.mapwithstate.execution

import io.mapwithstate.{LocalSpark, MapWithState, StateSpec, TempDirs}
import io.mapwithstate.functions._
import org.apache.spark.SparkEnv
import org.apache.spark.sql.Encoders
import org.apache.spark.sql.execution.streaming.runtime.{MemoryStream, StreamExecution, StreamingQueryWrapper}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue
import org.scalatest.funsuite.AnyFunSuite

/**
 * What the streaming operator ships to its tasks, in real micro-batches of a local session:
 * the operator without the plan below it, and one Hadoop configuration broadcast per query run.
 */
class MapWithStateStreamExecSuite extends AnyFunSuite with LocalSpark with TempDirs {

  private val runningCount = StateSpec.function("n BIGINT",
    update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
    emit = struct(col("value").as("word"), newState("n").as("n")))

  /**
   * Runs the running count over `batches` as one query run on `checkpoint`, each batch a
   * micro-batch; returns every emitted (word, n) and the query's execution.
   */
  private def run(
      checkpoint: String,
      batches: Seq[Seq[String]]): (Seq[(String, Long)], StreamExecution) = {
    val session = spark
    implicit val sqlContext: org.apache.spark.sql.SQLContext = session.sqlContext
    val input = MemoryStream[String](Encoders.STRING, sqlContext)
    val sink = s"counts_${System.nanoTime()}"
    val query = MapWithState.mapWithState(input.toDF(), Seq(col("value")), runningCount)
      .writeStream.format("memory").queryName(sink).outputMode("append")
      .option("checkpointLocation", checkpoint).start()
    try {
      batches.foreach { words =>
        input.addData(words: _*)
        query.processAllAvailable()
      }
      val rows = session.table(sink).collect().map(r => (r.getString(0), r.getLong(1))).toSeq
      (rows.sorted, query.asInstanceOf[StreamingQueryWrapper].streamingQuery)
    } finally query.stop()
  }

  test("a query run broadcasts its stores' Hadoop configuration once, not once per micro-batch") {
    withDir { dir =>
      val before = StreamingQueryGlue.HadoopConfBroadcasts.broadcasts
      val batches = Seq(Seq("a", "b"), Seq("a"), Seq("a", "c"))
      val (rows, _) = run(new java.io.File(dir, "cp").getPath, batches)
      assert(rows == Seq(("a", 1L), ("a", 2L), ("a", 3L), ("b", 1L), ("c", 1L)))
      assert(StreamingQueryGlue.HadoopConfBroadcasts.broadcasts == before + 1)
      // Another query run has its own.
      val (more, _) = run(new java.io.File(dir, "cp2").getPath, Seq(Seq("b"), Seq("b")))
      assert(more == Seq(("b", 1L), ("b", 2L)))
      assert(StreamingQueryGlue.HadoopConfBroadcasts.broadcasts == before + 2)
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
}
