package io.mapwithstate.state

import java.io.IOException
import java.util.concurrent.{
  ExecutionException,
  Future,
  LinkedBlockingQueue,
  ThreadPoolExecutor,
  TimeUnit
}
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong}

import org.apache.hadoop.fs.Path

/**
 * The closes of one task's delta files that finish in the background while the task goes on.
 * A close is what makes a written file durable and visible: on a local disk the fsync, the
 * rename and the directory's fsync ([[LocalCheckpointFileManager]]); elsewhere the file
 * system's own upload or rename. It is mostly waiting on the disk, a large part of a stateful
 * task's wall time on little CPU.
 *
 * A task that serves several state partitions one after another
 * ([[io.mapwithstate.execution.StateTaskRDD]]) commits each in turn. With its deltas'
 * closes deferred here (the task hands them to each store it opens but the last), the next
 * partition's records run while the disk syncs the previous partition's delta, and the task
 * waits for them all once, at its end ([[awaitAll]]), before its output counts; the last
 * partition's close is not deferred, as nothing runs after it. So
 * a task still never succeeds with a state file that is not durable, and a failed close fails
 * the task with the error a failed commit gives, naming the file.
 *
 * At most [[MaxPending]] closes of one task are under way: a later one first waits for the
 * oldest, so a task over many partitions (200, Spark's default, on two cores) keeps a bounded
 * number of open files and buffers. The closes run on a few daemon threads shared by the JVM
 * ([[Threads]]), so that one slow close does not hold up the closes of the partitions after it
 * or of the executor's other tasks.
 *
 * Used from one task's thread (its `defer`s and `awaitAll`s), and from its completion listener.
 */
final class DeferredCloses private[state] (maxPending: Int) {
  require(maxPending >= 1, s"at least one pending close: $maxPending")

  private final class Pending(val path: Path, val close: Future[_])

  private val pending = new java.util.ArrayDeque[Pending]()

  /** The first close that failed and has not been thrown yet. */
  private var failure: IOException = _

  /**
   * Runs `close` (which makes `path` durable) in the background. Waits first for the oldest
   * close while [[MaxPending]] are under way; a failure among those is thrown by [[awaitAll]].
   */
  def defer(path: Path)(close: () => Unit): Unit = synchronized {
    while (pending.size >= maxPending) awaitOldest()
    pending.add(new Pending(path, DeferredCloses.pool.submit((() => close()): Runnable)))
    DeferredCloses.deferred.incrementAndGet()
  }

  /**
   * Waits for every deferred close, even when interrupted (a close is a bounded wait on the
   * disk, and the task must not end, nor a retry of it start, with one still writing), and
   * throws the first that failed. The task's thread is left interrupted if it was.
   */
  def awaitAll(): Unit = synchronized {
    while (!pending.isEmpty) awaitOldest()
    val failed = failure
    failure = null
    if (failed != null) throw failed
  }

  /** The number of closes under way (for tests). */
  private[state] def underWay: Int = synchronized(pending.size)

  private def awaitOldest(): Unit = {
    val oldest = pending.poll()
    var interrupted = false
    var done = false
    while (!done) {
      try {
        oldest.close.get()
        done = true
      } catch {
        case _: InterruptedException => interrupted = true
        case e: ExecutionException =>
          done = true
          if (failure == null) failure = DeferredCloses.failureOf(oldest.path, e.getCause)
      }
    }
    if (interrupted) Thread.currentThread().interrupt()
  }
}

object DeferredCloses {

  /** How many of one task's closes may be under way at once. */
  val MaxPending = 8

  /** The threads running closes, for the whole JVM. */
  val Threads = 4

  /** New closes for one task, at most [[MaxPending]] under way. */
  def forTask(): DeferredCloses = new DeferredCloses(MaxPending)

  private val deferred = new AtomicLong()

  /** How many closes this JVM has deferred (for tests). */
  def deferredCount: Long = deferred.get()

  /** A close's own error when it names the file (a state file's close does), else one that does. */
  private def failureOf(path: Path, cause: Throwable): IOException = cause match {
    case e: IOException if e.getMessage != null && e.getMessage.contains(path.toString) => e
    case e => StateCheckpointFiles.writeFailure(path, e)
  }

  private val threadNumber = new AtomicInteger()

  private lazy val pool: ThreadPoolExecutor = {
    val p = new ThreadPoolExecutor(Threads, Threads, 60L, TimeUnit.SECONDS,
      new LinkedBlockingQueue[Runnable](),
      (r: Runnable) => {
        val t = new Thread(r, s"mapwithstate-file-close-${threadNumber.incrementAndGet()}")
        t.setDaemon(true)
        t
      })
    p.allowCoreThreadTimeOut(true)
    p
  }
}
