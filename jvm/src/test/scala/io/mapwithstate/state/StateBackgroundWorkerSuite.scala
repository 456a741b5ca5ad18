package io.mapwithstate.state

import java.nio.file.{Files, Paths}
import java.util.concurrent.{CompletableFuture, TimeUnit}

import org.scalatest.funsuite.AnyFunSuite

class StateBackgroundWorkerSuite extends AnyFunSuite {

  private def ownNice(): Int = StateBackgroundWorker.ownNice(Paths.get("/proc/thread-self"))

  test("background work runs in order on one thread with a lowered OS priority") {
    assume(Files.exists(Paths.get("/proc/thread-self/stat")), "needs Linux's /proc")
    val seen = new java.util.concurrent.ConcurrentLinkedQueue[(String, Int, Int)]()
    val done = new CompletableFuture[Unit]()
    (1 to 3).foreach { i =>
      StateBackgroundWorker.execute { () =>
        seen.add((Thread.currentThread().getName, ownNice(), i))
        if (i == 3) done.complete(())
      }
    }
    done.get(60, TimeUnit.SECONDS)
    val runs = seen.toArray(Array.empty[(String, Int, Int)]).toSeq
    assert(runs.map(_._3) == Seq(1, 2, 3))
    assert(runs.map(_._1).toSet == Set("mapwithstate-state-background"))
    assert(runs.forall(_._2 == math.min(19, ownNice() + 10)), runs)
  }

  test("a failing task is logged and the worker goes on with the next") {
    val done = new CompletableFuture[Unit]()
    StateBackgroundWorker.execute(() => throw new RuntimeException("boom"))
    StateBackgroundWorker.execute(() => done.complete(()))
    done.get(60, TimeUnit.SECONDS)
  }
}
