package io.mapwithstate.execution

import java.util.concurrent.{ArrayBlockingQueue, TimeUnit}

import org.apache.spark.TaskContext
import org.apache.spark.internal.Logging
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue

/**
 * A real-time task's records, read by a thread of their own into a small bounded queue, so
 * that the task's thread can wait for its next record with a timeout ([[await]]) and time out
 * the keys falling due while its state partition gets no records ([[BatchReplayIterator]]).
 *
 * In a long batch of Real-Time Mode the stateful task reads the pipelined shuffle, which holds
 * the reading thread until the partition's next record arrives: on the task's thread, every
 * key due in a quiet partition would wait for the batch's end. So, as Spark's continuous
 * processing reads its source (`ContinuousQueuedDataReader`), a reader thread pulls `records`
 * (the shuffle read and the narrow operators above it) and blocks there, and the task's thread
 * alone runs the records, reads and writes the state and hands the output on. It owns:
 *
 *  - the reader thread, which runs as part of the task: it sees the task's `TaskContext`
 *    (Spark's shuffle reader, `SQLConf.get` and its fetch-failure reporting look it up), and
 *    copies each row, since a reader may reuse its row for the next;
 *  - the queue, which keeps the records' order and ends with the input's end or the reader's
 *    failure, after the records read before it;
 *  - failures: whatever the reader throws is rethrown, the same exception, on the task's thread
 *    when it reaches it, which fails the task with it (as Spark's streaming shuffle reader
 *    surfaces its background errors on the task's thread); nothing escapes the reader thread,
 *    whose uncaught exception would end the executor;
 *  - the thread's end with the task: before the task's completion listeners run (succeeded,
 *    failed or killed: Spark's pre-completion listener), the reader is told to stop,
 *    interrupted out of its wait in the shuffle, and joined, so that no thread outlives the task
 *    and no completion listener (the shuffle reader's, which releases the buffers the reader
 *    reads rows from; the state store's abort) runs while it still reads;
 *  - the task's kill: the task's thread, interrupted in its wait, or finding the task killed
 *    when it wakes, ends the task as it would have waiting in the shuffle.
 *
 * Built only in a real-time batch whose keys can time out (micro-batches and replays read
 * their records on the task's thread). What a record pays for the hand-off: a copy, a put and
 * a take of a lock-based queue and, when the task's thread was waiting, its wake-up
 * (`RecordHandOffBench` times both).
 */
final class RecordHandOff private (
    records: Iterator[InternalRow],
    context: TaskContext,
    capacity: Int) extends scala.collection.BufferedIterator[InternalRow] with Logging {
  import RecordHandOff._

  private val queue = new ArrayBlockingQueue[AnyRef](capacity)
  // The task thread's own: the entry taken from the queue and not yet consumed (a row, the
  // input's End or the reader's Failed); null: none.
  private var taken: AnyRef = null
  @volatile private var stopping = false

  private val reader = new Thread(() => read(),
    s"mapwithstate-records-${context.stageId()}.${context.partitionId()}-" +
      s"${context.taskAttemptId()}")
  reader.setDaemon(true)
  StreamingQueryGlue.beforeTaskCompletes(context)(stop())
  reader.start()

  /** The reader thread: every record, copied, then End; or the failure that ended it. */
  private def read(): Unit =
    try {
      StreamingQueryGlue.runAsPartOf(context) {
        try {
          while (!stopping && records.hasNext) queue.put(records.next().copy())
          if (!stopping) queue.put(End)
        } catch {
          // Stopped with the task, out of its wait in the input or the queue: nothing to hand.
          case _: Throwable if stopping =>
          case failure: Throwable => queue.put(Failed(failure))
        }
      }
    } catch {
      // Only the queue's put of a failure, interrupted as the task stops without taking it.
      case e: Throwable => if (!stopping) logWarning("records' reader thread failed", e)
    }

  /** Whether a record, or the input's end, waits to be taken: never blocks. */
  def ready: Boolean = taken != null || { taken = queue.poll(); taken != null }

  /**
   * Whether a record, or the input's end (or the reader's failure), waits to be taken, after
   * waiting up to `timeoutMs` for one. Throws if the task was killed.
   */
  def await(timeoutMs: Long): Boolean = ready || {
    StreamingQueryGlue.killTaskIfInterrupted(context)
    taken = queue.poll(timeoutMs, TimeUnit.MILLISECONDS)
    taken != null
  }

  /** Waits for the next record or the input's end; rethrows the reader's failure. */
  override def hasNext: Boolean = {
    while (!await(KillCheckMs)) {}
    taken match {
      case End => false
      case Failed(failure) => throw failure
      case _ => true
    }
  }

  override def head: InternalRow =
    if (hasNext) taken.asInstanceOf[InternalRow] else throw new NoSuchElementException

  override def next(): InternalRow = {
    val row = head
    taken = null
    row
  }

  /** Stops the reader and waits for it to end: at the task's end, on the task's thread. */
  private def stop(): Unit = {
    stopping = true
    reader.interrupt()
    var interrupted = false
    val deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(StopWaitMs)
    while (reader.isAlive && System.nanoTime() < deadline) {
      try reader.join(math.max(1L, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())))
      catch { case _: InterruptedException => interrupted = true }
    }
    if (interrupted) Thread.currentThread().interrupt()
    if (reader.isAlive) {
      logWarning(s"${reader.getName} did not stop within $StopWaitMs ms of its task's end")
    }
  }

  /** The reader thread's name, unique to the task attempt (for tests). */
  private[execution] def readerName: String = reader.getName
}

object RecordHandOff {

  /** How many records the reader may read ahead of the one the task's thread runs. */
  val Capacity = 256

  /** While waiting without a deadline, how often the task's thread checks for its kill. */
  private val KillCheckMs = 100L

  /** How long the task's end waits for the reader to stop before it warns and goes on. */
  private val StopWaitMs = 10000L

  /** The entry after the input's last record. */
  private case object End

  /** The entry the reader's failure leaves, after the records read before it. */
  private final case class Failed(failure: Throwable)

  /** Starts reading `records` on a thread of `context`'s task (see the class doc). */
  def start(records: Iterator[InternalRow], context: TaskContext): RecordHandOff = {
    require(context != null, "records are handed off only within a task")
    new RecordHandOff(records, context, Capacity)
  }
}
