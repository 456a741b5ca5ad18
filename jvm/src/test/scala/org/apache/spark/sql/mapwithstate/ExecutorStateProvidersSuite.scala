package org.apache.spark.sql.mapwithstate

import io.mapwithstate.TempDirs
import io.mapwithstate.state.{DeltaChainStateStoreProvider, ExecutorStateProviders}
import org.scalatest.concurrent.Eventually._
import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.time.SpanSugar._

/**
 * (In Spark's package, to ask the query's state store coordinator where a partition is.)
 *
 * How an executor holds the heap state's providers between micro-batches, in real streaming
 * queries of a local session: loaded once per query run and partition, their location known to
 * Spark's coordinator, closed when their query stops (by maintenance, every 200 ms here) or
 * after each task when the store conf says so.
 */
class ExecutorStateProvidersSuite extends AnyFunSuite with StateProviderQueries with TempDirs {

  private val MaintenanceInterval = "spark.sql.streaming.stateStore.maintenanceInterval"
  private val UnloadOnCommit = "spark.sql.streaming.stateStore.unloadOnCommit"

  override def beforeAll(): Unit = {
    super.beforeAll()
    // Before the suite's first query: an executor's maintenance runs at its first store's interval.
    spark.conf.set(MaintenanceInterval, "200ms")
  }

  test("a query's partitions stay loaded between micro-batches, located by the coordinator") {
    withDir { dir =>
      withQuery(new java.io.File(dir, "cp").getPath) { (input, query) =>
        input.addData("a", "b", "c", "d")
        query.processAllAvailable()
        val ids = partitions(query)
        assert(ids.size === 2)
        assert(ids.forall(ExecutorStateProviders.isLoaded))
        val coordinator = spark.streams.stateStoreCoordinator
        eventually(timeout(10.seconds)) {
          ids.foreach(id => assert(coordinator.getLocation(id).isDefined, id))
        }
        val opened = DeltaChainStateStoreProvider.openProviders
        input.addData("a", "b", "c", "d")
        query.processAllAvailable()
        // The same providers: none made for the second batch.
        assert(DeltaChainStateStoreProvider.openProviders === opened)
        assert(ids.forall(ExecutorStateProviders.isLoaded))
        assert(counts(query) === Seq("a", "b", "c", "d").flatMap(w => Seq((w, 1L), (w, 2L))).sorted)
      }
    }
  }

  test("a partition is reported once per load; again only when another executor claimed it " +
    "while it is in use here") {
    withDir { dir =>
      withQuery(new java.io.File(dir, "cp").getPath) { (input, query) =>
        var batches = 0
        def batch(): Unit = {
          input.addData("a", "b", "c", "d")
          query.processAllAvailable()
          batches += 1
        }
        batch()
        val ids = partitions(query)
        val coordinator = spark.streams.stateStoreCoordinator
        eventually(timeout(10.seconds)) {
          ids.foreach(id => assert(coordinator.getLocation(id).isDefined, id))
        }
        val here = coordinator.getLocation(ids.head).get
        val reported = ExecutorStateProviders.reports
        for (_ <- 1 to 3) batch()
        // Several maintenance rounds too (every 200 ms): none of them reports an active partition.
        Thread.sleep(700)
        assert(ExecutorStateProviders.reports === reported)
        val providers = ids.map(ExecutorStateProviders.loaded)
        assert(providers.forall(_.isDefined))

        // Another executor reports both partitions, which tasks took here since they were last
        // reported: maintenance claims them back, the same providers, with no reload.
        val elsewhere = "executor_otherhost_other"
        ids.foreach(id => coordinator.reportActiveInstance(id, "otherhost", "other", Seq.empty))
        assert(ids.forall(id => coordinator.getLocation(id).contains(elsewhere)))
        eventually(timeout(10.seconds)) {
          assert(ids.forall(id => coordinator.getLocation(id).contains(here)))
        }
        assert(ids.map(ExecutorStateProviders.loaded).zip(providers).forall {
          case (now, before) => now.get eq before.get
        })

        // Reported elsewhere again with no task here since the claim: the other executor's
        // report is the newer, and the partition is unloaded here; the other one stays.
        coordinator.reportActiveInstance(ids.head, "otherhost", "other", Seq.empty)
        eventually(timeout(10.seconds)) {
          assert(!ExecutorStateProviders.isLoaded(ids.head))
        }
        assert(ExecutorStateProviders.loaded(ids(1)).get eq providers(1).get)
        // (No batch while only one partition prefers the made-up executor: a local scheduler
        // offers its one executor again only when a task ends, and would wait for it forever.)
        coordinator.reportActiveInstance(ids(1), "otherhost", "other", Seq.empty)
        eventually(timeout(10.seconds)) {
          assert(!ExecutorStateProviders.isLoaded(ids(1)))
        }
        // Their next tasks load them again here, from their files, and report them.
        batch()
        eventually(timeout(10.seconds)) {
          assert(ids.forall(id => coordinator.getLocation(id).contains(here)))
        }
        // Every key's count went on from its state through every batch, reloads included.
        assert(counts(query).filter(_._2 == batches.toLong).map(_._1) === Seq("a", "b", "c", "d"))
      }
    }
  }

  test("a stopped query's partitions are unloaded by the next maintenance") {
    withDir { dir =>
      val (ids, opened) = runStopped(new java.io.File(dir, "cp").getPath, "a", "b", "a")
      eventually(timeout(10.seconds)) {
        ids.foreach(id => assert(!ExecutorStateProviders.isLoaded(id), id))
        // Closed, not just forgotten (an earlier test's may be closed meanwhile too).
        assert(DeltaChainStateStoreProvider.openProviders <= opened - 2)
      }
    }
  }

  test("with unloadOnCommit, a partition is unloaded after each task and reloaded by the next") {
    withDir { dir =>
      spark.conf.set(UnloadOnCommit, "true")
      try {
        withQuery(new java.io.File(dir, "cp").getPath) { (input, query) =>
          input.addData("a", "b")
          query.processAllAvailable()
          val ids = partitions(query)
          assert(ids.forall(id => !ExecutorStateProviders.isLoaded(id)))
          input.addData("a", "b", "b")
          query.processAllAvailable()
          assert(ids.forall(id => !ExecutorStateProviders.isLoaded(id)))
          assert(counts(query) === Seq(("a", 1L), ("a", 2L), ("b", 1L), ("b", 2L), ("b", 3L)))
        }
      } finally spark.conf.unset(UnloadOnCommit)
    }
  }
}
