package io.mapwithstate.execution

import java.util.concurrent.{LinkedBlockingQueue, TimeUnit}
import java.util.concurrent.locks.LockSupport

import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.LongType

/**
 * What a record pays for [[RecordHandOff]], in a task of a local job, against the task's
 * thread reading its input itself. Prints only; nothing is asserted, since timings depend on
 * the machine.
 *
 *  - Throughput: ns per record of an input that always has the next one ready, reusing its
 *    row (so each is copied): the copy, the queue's put and take.
 *  - Latency at a steady rate: a producer thread puts a row stamped with its time into a
 *    blocking queue every `gapMicros`, as the streaming shuffle's network threads fill its
 *    reader's queue, and the input polls that queue as the shuffle reader does; the latency is
 *    from the put to the task's thread having the row: with the hand-off, one more thread
 *    wakes up on the way.
 *
 * `Test/runMain io.mapwithstate.execution.RecordHandOffBench [records] [rounds] [gapMicros]`
 */
object RecordHandOffBench {

  def main(args: Array[String]): Unit = {
    val records = if (args.length > 0) args(0).toInt else 2000000
    val rounds = if (args.length > 1) args(1).toInt else 5
    val gapMicros = if (args.length > 2) args(2).toLong else 200L
    val spark = SparkSession.builder().master("local[2]").appName("RecordHandOffBench")
      .config("spark.ui.enabled", "false").getOrCreate()
    try {
      val lines = spark.sparkContext.parallelize(Seq(0), 1).mapPartitions { _ =>
        val task = TaskContext.get()
        val throughput = for (handOff <- Seq(false, true)) yield {
          val ns = (1 to rounds).map(_ => nsPerRecord(records, handOff, task)).sorted
          f"throughput, hand-off=$handOff%-5s: median ${ns(ns.size / 2)}%.1f ns/record " +
            s"(all ${ns.map(n => f"$n%.1f").mkString(", ")})"
        }
        val latency = for (handOff <- Seq(false, true)) yield {
          val micros = latencies(records / 200, gapMicros, handOff, task).sorted
          def at(q: Double) = micros(math.min(micros.length - 1, (q * micros.length).toInt))
          f"latency every $gapMicros µs, hand-off=$handOff%-5s: p50 ${at(0.5)}%.1f µs, " +
            f"p99 ${at(0.99)}%.1f µs, max ${micros.last}%.1f µs"
        }
        (throughput ++ latency).iterator
      }.collect()
      lines.foreach(println)
    } finally {
      spark.stop()
    }
  }

  private val stamp = UnsafeProjection.create(Seq(BoundReference(0, LongType, nullable = false)))

  private def through(
      input: Iterator[InternalRow],
      handOff: Boolean,
      task: TaskContext): Iterator[InternalRow] =
    if (handOff) RecordHandOff.start(input, task) else input

  /** ns per record, reading `records` rows of one reused row. */
  private def nsPerRecord(records: Int, handOff: Boolean, task: TaskContext): Double = {
    val row = stamp(InternalRow(0L))
    val input = Iterator.range(0, records).map { i =>
      row.setLong(0, i.toLong)
      row: InternalRow
    }
    val started = System.nanoTime()
    val rows = through(input, handOff, task)
    var sum = 0L
    while (rows.hasNext) sum += rows.next().getLong(0)
    require(sum == records.toLong * (records - 1) / 2, "records lost")
    (System.nanoTime() - started).toDouble / records
  }

  /** µs from each row's put by a producer to the task's thread having it, a row every gap. */
  private def latencies(
      records: Int,
      gapMicros: Long,
      handOff: Boolean,
      task: TaskContext): Array[Double] = {
    val queue = new LinkedBlockingQueue[java.lang.Long]()
    val producer = new Thread(() => {
      for (_ <- 0 until records) {
        LockSupport.parkNanos(gapMicros * 1000L)
        queue.put(System.nanoTime())
      }
      queue.put(-1L)
    })
    val row = stamp(InternalRow(0L))
    // As the streaming shuffle reader waits for its next message: a poll every 10 ms.
    val input = new Iterator[InternalRow] {
      private var next_ : java.lang.Long = null
      override def hasNext: Boolean = {
        while (next_ == null) next_ = queue.poll(10, TimeUnit.MILLISECONDS)
        next_ != -1L
      }
      override def next(): InternalRow = {
        row.setLong(0, next_)
        next_ = null
        row
      }
    }
    producer.start()
    val rows = through(input, handOff, task)
    val micros = new Array[Double](records)
    var i = 0
    while (rows.hasNext) {
      val put = rows.next().getLong(0)
      micros(i) = (System.nanoTime() - put) / 1000.0
      i += 1
    }
    producer.join()
    micros
  }
}
