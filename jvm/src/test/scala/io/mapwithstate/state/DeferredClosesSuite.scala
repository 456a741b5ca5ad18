package io.mapwithstate.state

import java.io.IOException
import java.util.concurrent.{CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.AtomicInteger

import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

class DeferredClosesSuite extends AnyFunSuite {

  private def path(name: String): Path = new Path(s"/nowhere/$name")

  test("a deferred close runs off the caller's thread and awaitAll waits for it") {
    val closes = new DeferredCloses(DeferredCloses.MaxPending)
    val release = new CountDownLatch(1)
    val closedOn = new java.util.concurrent.atomic.AtomicReference[String]()
    closes.defer(path("1.delta")) { () =>
      release.await(10, TimeUnit.SECONDS)
      closedOn.set(Thread.currentThread().getName)
    }
    // defer returned although the close is blocked: it is under way in the background.
    assert(closes.underWay == 1)
    assert(closedOn.get == null)
    release.countDown()
    closes.awaitAll()
    assert(closedOn.get.startsWith("mapwithstate-file-close-"))
    assert(closes.underWay == 0)
  }

  test("at most MaxPending closes are under way: the next one waits for the oldest") {
    val closes = new DeferredCloses(2)
    val release = new CountDownLatch(1)
    val done = new AtomicInteger()
    (1 to 2).foreach(v =>
      closes.defer(path(s"$v.delta")) { () =>
        release.await(10, TimeUnit.SECONDS)
        done.incrementAndGet()
      })
    val third = new Thread(() => closes.defer(path("3.delta"))(() => done.incrementAndGet()))
    third.start()
    third.join(300)
    assert(third.isAlive, "the third close did not wait for room")
    release.countDown()
    third.join(10000)
    assert(!third.isAlive)
    closes.awaitAll()
    assert(done.get == 3)
  }

  test("awaitAll waits for every close, then throws the first failure, naming its file") {
    val closes = new DeferredCloses(DeferredCloses.MaxPending)
    val done = new AtomicInteger()
    closes.defer(path("1.delta"))(() => throw new IllegalStateException("disk gone"))
    closes.defer(path("2.delta"))(() => throw new IllegalStateException("disk gone too"))
    closes.defer(path("3.delta")) { () => Thread.sleep(200); done.incrementAndGet() }
    val e = intercept[IOException](closes.awaitAll())
    assert(e.getMessage.contains("1.delta") && e.getMessage.contains("disk gone"), e.getMessage)
    assert(done.get == 1, "awaitAll threw before every close had finished")
    closes.awaitAll() // reported once
  }

  test("an interrupted wait still waits for the close, and leaves the thread interrupted") {
    val closes = new DeferredCloses(DeferredCloses.MaxPending)
    val finished = new AtomicInteger()
    closes.defer(path("1.delta")) { () => Thread.sleep(300); finished.incrementAndGet() }
    Thread.currentThread().interrupt()
    closes.awaitAll()
    assert(Thread.interrupted(), "the interrupt was swallowed")
    assert(finished.get == 1)
  }
}
