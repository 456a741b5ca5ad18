package org.apache.spark.sql.mapwithstate

import io.mapwithstate.{LocalSpark, MapWithState, StateSpec}
import io.mapwithstate.execution.MapWithStateStreamExec
import io.mapwithstate.functions._
import io.mapwithstate.state.{DeltaChainStateStoreProvider, ExecutorStateProviders}
import org.apache.spark.sql.Encoders
import org.apache.spark.sql.execution.streaming.runtime.{MemoryStream, StreamingQueryWrapper}
import org.apache.spark.sql.execution.streaming.state.{StateStoreId, StateStoreProviderId}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.streaming.StreamingQuery
import org.scalatest.funsuite.AnyFunSuite

/**
 * Running-count streaming queries on the heap state, and the ids of their state partitions,
 * for the suites of how an executor holds those partitions' providers.
 */
trait StateProviderQueries extends LocalSpark { self: AnyFunSuite =>

  protected val runningCount = StateSpec.function("n BIGINT",
    update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
    emit = struct(col("value").as("word"), newState("n").as("n")))

  /** A running count query on `checkpoint` and its input; `body` runs while it is active. */
  protected def withQuery(checkpoint: String)(
      body: (MemoryStream[String], StreamingQuery) => Unit): Unit = {
    implicit val sqlContext: org.apache.spark.sql.SQLContext = spark.sqlContext
    val input = MemoryStream[String](Encoders.STRING, sqlContext)
    val query = MapWithState.mapWithState(input.toDF(), Seq(col("value")), runningCount)
      .writeStream.format("memory").queryName(s"counts_${System.nanoTime()}")
      .outputMode("append").option("checkpointLocation", checkpoint).start()
    try body(input, query)
    finally query.stop()
  }

  /**
   * Runs a query on `checkpoint` for one batch of `words`, then stops it: its partitions' ids,
   * loaded here while it ran, and how many heap state providers this JVM had open then.
   */
  protected def runStopped(checkpoint: String, words: String*): (Seq[StateStoreProviderId], Int) = {
    var ids = Seq.empty[StateStoreProviderId]
    var opened = 0
    withQuery(checkpoint) { (input, query) =>
      input.addData(words: _*)
      query.processAllAvailable()
      ids = partitions(query)
      assert(ids.forall(ExecutorStateProviders.isLoaded))
      opened = DeltaChainStateStoreProvider.openProviders
    }
    (ids, opened)
  }

  /** What `query` (a [[withQuery]]) has emitted: (word, count) rows, sorted. */
  protected def counts(query: StreamingQuery): Seq[(String, Long)] =
    spark.table(query.name).collect().map(r => (r.getString(0), r.getLong(1))).toSeq.sorted

  /** The provider ids of `query`'s mapWithState state partitions. */
  protected def partitions(query: StreamingQuery): Seq[StateStoreProviderId] = {
    val execution = query.asInstanceOf[StreamingQueryWrapper].streamingQuery.lastExecution
    val info = execution.executedPlan.collectFirst {
      case op: MapWithStateStreamExec => op.stateInfo.get
    }.getOrElse(fail("no mapWithState operator in the executed plan"))
    (0 until info.numPartitions).map { p =>
      StateStoreProviderId(StateStoreId(info.checkpointLocation, info.operatorId, p),
        info.queryRunId)
    }
  }
}
