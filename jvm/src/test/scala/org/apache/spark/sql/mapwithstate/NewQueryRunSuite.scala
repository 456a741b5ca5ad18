package org.apache.spark.sql.mapwithstate

import io.mapwithstate.TempDirs
import io.mapwithstate.state.{DeltaChainStateStoreProvider, ExecutorStateProviders}
import org.scalatest.concurrent.Eventually._
import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.time.SpanSugar._

/**
 * (In Spark's package, as [[ExecutorStateProvidersSuite]].)
 *
 * What a new query run's first task does about the providers other runs left loaded on this
 * executor: those of stopped runs are unloaded before it goes on, so that they no longer count
 * against its heap budget (which divides the heap among the partitions loaded); those of a
 * running query stay. Maintenance runs every ten minutes here, so it cannot be what unloads them.
 */
class NewQueryRunSuite extends AnyFunSuite with StateProviderQueries with TempDirs {

  override def beforeAll(): Unit = {
    super.beforeAll()
    spark.conf.set("spark.sql.streaming.stateStore.maintenanceInterval", "10min")
  }

  test(
    "a query stopped and a new one started: the old run's partitions go before its first batch") {
    withDir { dir =>
      val (first, opened) = runStopped(new java.io.File(dir, "one").getPath, "a", "b", "a")
      // Stopped, and nothing but the next run unloads its partitions for ten minutes.
      Thread.sleep(300)
      assert(first.forall(ExecutorStateProviders.isLoaded))
      withQuery(new java.io.File(dir, "two").getPath) { (input, query) =>
        input.addData("a", "c")
        query.processAllAvailable()
        val second = partitions(query)
        assert(second.map(_.queryRunId).toSet.intersect(first.map(_.queryRunId).toSet).isEmpty)
        assert(!first.exists(ExecutorStateProviders.isLoaded))
        assert(second.forall(ExecutorStateProviders.isLoaded))
        // Closed, not just forgotten: the heap budget counts the second run's two only.
        assert(DeltaChainStateStoreProvider.openProviders === opened)
        assert(counts(query) === Seq(("a", 1L), ("c", 1L)))
      }
    }
  }

  test("a running query's partitions stay loaded when another query starts") {
    withDir { dir =>
      withQuery(new java.io.File(dir, "one").getPath) { (input1, query1) =>
        input1.addData("a")
        query1.processAllAvailable()
        val running = partitions(query1)
        // Reported to the coordinator (queued, then sent) before the other query starts.
        val coordinator = spark.streams.stateStoreCoordinator
        eventually(timeout(10.seconds)) {
          running.foreach(id => assert(coordinator.getLocation(id).isDefined, id))
        }
        val providers = running.map(ExecutorStateProviders.loaded)
        withQuery(new java.io.File(dir, "two").getPath) { (input2, query2) =>
          input2.addData("b")
          query2.processAllAvailable()
          assert(partitions(query2).forall(ExecutorStateProviders.isLoaded))
          // The same providers: not unloaded and loaded again.
          assert(running.map(ExecutorStateProviders.loaded).zip(providers).forall {
            case (now, before) => now.isDefined && (now.get eq before.get)
          })
          input1.addData("a")
          query1.processAllAvailable()
          assert(counts(query1) === Seq(("a", 1L), ("a", 2L)))
        }
      }
    }
  }
}
