package io.mapwithstate.execution

import java.util.concurrent.{CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicLong, AtomicReference}

import scala.concurrent.{Await, Future}
import scala.concurrent.ExecutionContext.Implicits.global
import scala.concurrent.duration._
import scala.jdk.CollectionConverters._
import scala.reflect.ClassTag

import io.mapwithstate.LocalSpark
import org.apache.spark.{SparkException, TaskContext}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.concurrent.Eventually._
import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.time.{Seconds, Span}

/**
 * A real-time task's records read by a thread of their own ([[RecordHandOff]]), in real tasks
 * of a local Spark job: a key falls due and times out while its partition's input gives
 * nothing, the reader runs as part of the task, keeps the records' order and copies rows its
 * input reuses, its failure fails the task with the same exception, and it ends with the task,
 * killed or not.
 *
 * The function is [[BatchReplayIteratorSuite.counting]]: (key, count, timing out, batch time)
 * per call, over records (key, ts), on the wall clock of a real-time batch.
 */
class RecordHandOffSuite extends AnyFunSuite with LocalSpark {
  import RecordHandOffSuite._

  /** `task`'s result, run as the one task of a job. */
  private def inATask[T: ClassTag](task: () => T): T =
    spark.sparkContext.parallelize(Seq(0), 1).mapPartitions(_ => Iterator.single(task()))
      .collect().head

  private def threadAlive(name: String): Boolean =
    Thread.getAllStackTraces.keySet.asScala.exists(t => t.getName == name && t.isAlive)

  test("a key due while its partition's input waits times out within the interval, its " +
    "output handed on before the input gives anything more; the reader ends with the task") {
    val intervalMs = 50L
    val idle = TimeoutPolicy.Idle(timeoutMicros = 200000L, scanEvery = 10)
    val function = BatchReplayIteratorSuite.counting(spark, idle)
    val (outputs, readerName, readerInTask) = inATask { () =>
      val task = TaskContext.get()
      // The input's one record, then nothing until the key's timeout is handed on (or a
      // minute, when the test fails), then its end.
      val timedOut = new CountDownLatch(1)
      val readerTask = new AtomicLong(-1L)
      val input = new Iterator[InternalRow] {
        private var sent = false
        override def hasNext: Boolean = !sent || {
          timedOut.await(60, TimeUnit.SECONDS)
          false
        }
        override def next(): InternalRow = {
          sent = true
          readerTask.set(Option(TaskContext.get()).map(_.taskAttemptId()).getOrElse(-1L))
          InternalRow(UTF8String.fromString("a"), 0L)
        }
      }
      val clock = BatchClock.WallClock(intervalMs, () => System.currentTimeMillis())
      val handOff = RecordHandOff.start(input, task)
      val rows = new BatchReplayIterator(handOff, _ => 0L, BatchTimeline.single(0L), 1,
        BatchReplayIteratorSuite.updater(function, idle, clock = clock), idle, None, () => (),
        readAhead = false, clock = clock)
      val outputs = rows.map { row =>
        val output = Output(row, inputWaiting = timedOut.getCount > 0)
        if (output.timingOut) timedOut.countDown()
        output
      }.toList
      (outputs, handOff.readerName, readerTask.get == task.taskAttemptId())
    }
    assert(outputs.map(o => (o.key, o.n, o.timingOut, o.inputWaiting)) ===
      Seq(("a", 1L, false, true), ("a", 1L, true, true)))
    // Due 200 ms after its record; looked for every 50 ms while the input waits. The bound
    // leaves a second for a busy machine: the input's wait it did not need was a minute.
    val late = outputs(1).time - outputs(0).time - 200000L
    assert(late >= 0 && late <= (intervalMs + 1000L) * 1000L, s"timed out $late µs late")
    assert(readerInTask, "the reader thread did not see the task's TaskContext")
    assert(!threadAlive(readerName), s"$readerName outlived its task")
  }

  test("records keep their order, each copied from an input that reuses its row") {
    val policy = TimeoutPolicy.Idle(timeoutMicros = 60000000L, scanEvery = 1)
    val function = BatchReplayIteratorSuite.counting(spark, policy)
    val count = 3 * RecordHandOff.Capacity
    val keys = (0 until count).map(i => s"k${i % 7}")
    val outputs = inATask { () =>
      val reused = new GenericInternalRow(2)
      val input = keys.iterator.map { key =>
        reused.update(0, UTF8String.fromString(key))
        reused.update(1, 0L)
        reused: InternalRow
      }
      val clock = BatchClock.WallClock(0L, () => System.currentTimeMillis())
      new BatchReplayIterator(RecordHandOff.start(input, TaskContext.get()), _ => 0L,
        BatchTimeline.single(0L), 1,
        BatchReplayIteratorSuite.updater(function, policy,
          clock = clock), policy, None, () => (), readAhead = false, clock = clock)
        .map(row => (row.getUTF8String(0).toString, row.getLong(1))).toList
    }
    val expected = keys.zipWithIndex.map { case (key, i) =>
      (key, keys.take(i + 1).count(_ == key).toLong)
    }
    assert(outputs === expected)
  }

  test("the reader's failure fails the task with that exception, after the records it read") {
    val policy = TimeoutPolicy.Timers(eventTime = false)
    val function = BatchReplayIteratorSuite.counting(spark, policy)
    def run(catchIt: Boolean): (Seq[String], Boolean, String) = inATask { () =>
      val thrown = new AtomicReference[Throwable]()
      val input = Iterator("a", "b").map(k => InternalRow(UTF8String.fromString(k), 0L)) ++
        new Iterator[InternalRow] {
          override def hasNext: Boolean = {
            thrown.set(new IllegalStateException("the input broke after b"))
            throw thrown.get
          }
          override def next(): InternalRow = throw new NoSuchElementException
        }
      val clock = BatchClock.WallClock(1000L, () => System.currentTimeMillis())
      val handOff = RecordHandOff.start(input, TaskContext.get())
      val rows = new BatchReplayIterator(handOff, _ => 0L, BatchTimeline.single(0L), 1,
        BatchReplayIteratorSuite.updater(function, policy, clock = clock), policy, None,
        () => (), readAhead = false, clock = clock)
      val keys = Seq.newBuilder[String]
      val failedWithIt =
        try {
          rows.foreach(row => keys += row.getUTF8String(0).toString)
          false
        } catch {
          case e: Throwable if catchIt => e eq thrown.get
        }
      (keys.result(), failedWithIt, handOff.readerName)
    }
    val (keys, failedWithIt, readerName) = run(catchIt = true)
    assert(keys === Seq("a", "b"))
    assert(failedWithIt, "the task's thread did not rethrow the reader's own exception")
    assert(!threadAlive(readerName), s"$readerName outlived its task")
    val failure = intercept[SparkException](run(catchIt = false))
    assert(failure.getMessage.contains("the input broke after b"), failure.getMessage)
  }

  test("a task killed while its partition's input waits ends, and its reader thread with it") {
    val policy = TimeoutPolicy.Idle(timeoutMicros = 60000000L, scanEvery = 1)
    val function = BatchReplayIteratorSuite.counting(spark, policy)
    val running = new CountDownLatch(1)
    killed.set(running)
    val group = s"record-hand-off-${System.nanoTime()}"
    val job = Future {
      spark.sparkContext.setJobGroup(group, "a task waiting for records", interruptOnCancel = true)
      inATask { () =>
        // Its one record, then nothing for a minute, unless the task is killed.
        val never = new CountDownLatch(1)
        val input = Iterator.single(InternalRow(UTF8String.fromString("a"), 0L)) ++
          new Iterator[InternalRow] {
            override def hasNext: Boolean = never.await(60, TimeUnit.SECONDS) && false
            override def next(): InternalRow = throw new NoSuchElementException
          }
        val clock = BatchClock.WallClock(50L, () => System.currentTimeMillis())
        val handOff = RecordHandOff.start(input, TaskContext.get())
        killedReader.set(handOff.readerName)
        new BatchReplayIterator(handOff, _ => 0L, BatchTimeline.single(0L), 1,
          BatchReplayIteratorSuite.updater(function, policy, clock = clock), policy, None,
          () => (), readAhead = false, clock = clock)
          .map { row => killed.get.countDown(); row.getLong(1) }.sum
      }
    }
    assert(running.await(30, TimeUnit.SECONDS), "the task never ran its record")
    spark.sparkContext.cancelJobGroup(group)
    intercept[SparkException](Await.result(job, 30.seconds))
    eventually(timeout(Span(15, Seconds))) {
      assert(!threadAlive(killedReader.get), s"${killedReader.get} outlived its killed task")
    }
  }
}

object RecordHandOffSuite {

  /** One output row of the function, and whether the input was still waiting when it left. */
  final case class Output(key: String, n: Long, timingOut: Boolean, time: Long,
      inputWaiting: Boolean)

  object Output {
    def apply(row: InternalRow, inputWaiting: Boolean): Output = Output(
      row.getUTF8String(0).toString, row.getLong(1), row.getBoolean(2), row.getLong(3),
      inputWaiting)
  }

  // The killed task's, read by the test: local mode runs tasks in the test's JVM.
  private val killed = new AtomicReference[CountDownLatch]()
  private val killedReader = new AtomicReference[String]()
}
