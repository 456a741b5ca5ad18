package io.mapwithstate.state

import java.nio.file.{Files, Paths}
import java.util.concurrent.{LinkedBlockingQueue, ThreadPoolExecutor, TimeUnit}

import scala.util.control.NonFatal

import org.slf4j.LoggerFactory

/**
 * The one thread per JVM that does the O(state) work kept out of tasks: snapshots and chain
 * compactions of the heap state store ([[DeltaChainStateStoreProvider]]). One thread, so that it
 * never takes more than one core from the tasks; work runs in the order it was asked for.
 *
 * Its OS scheduling priority is lowered (nice 10) when it starts: on a small executor (two
 * cores, as in `local[2]`) a snapshot of a large partition competes with the next batch's tasks
 * and the driver for a core, and a batch that runs beside it takes longer. At nice 10 it mostly
 * runs on what the batches leave idle (a batch's critical path is mostly one thread) and still
 * gets about a tenth of a core when the executor is saturated, so snapshots do not starve, as
 * they could at nice 19. Lowering a thread's own priority needs no privilege; it is done by
 * `renice` on the thread's id, once per thread (Java has no API for it), and skipped silently
 * where that is not possible (not Linux, no `renice`).
 */
private[state] object StateBackgroundWorker {
  private val log = LoggerFactory.getLogger(getClass)

  private lazy val pool: ThreadPoolExecutor = {
    val p = new ThreadPoolExecutor(1, 1, 60L, TimeUnit.SECONDS, new LinkedBlockingQueue[Runnable](),
      (r: Runnable) => {
        val t = new Thread(() => {
            lowerOwnPriority()
            r.run()
          }, "mapwithstate-state-background")
        t.setDaemon(true)
        t
      })
    p.allowCoreThreadTimeOut(true)
    p
  }

  /** Runs `task` on the background thread; a failure is logged (the work is an optimization). */
  def execute(task: Runnable): Unit = pool.execute { () =>
    try task.run()
    catch {
      case NonFatal(e) => log.warn(s"mapWithState background state work failed: ${e.getMessage}", e)
    }
  }

  /** 10 steps below the thread's priority (nice 19 at most); never raises it. */
  private def lowerOwnPriority(): Unit =
    try {
      // "<pid>/task/<tid>" on Linux: the calling thread's own entry.
      val self = Paths.get("/proc/thread-self")
      val tid = Files.readSymbolicLink(self).getFileName.toString
      val nice = ownNice(self)
      if (nice < 19) {
        // util-linux's -n sets an absolute value (an increment only in other renices): give one.
        val renice = new ProcessBuilder("renice", "-n", math.min(19, nice + 10).toString, "-p", tid)
          .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
        if (!renice.waitFor(10, TimeUnit.SECONDS)) renice.destroyForcibly()
      }
    } catch {
      case NonFatal(_) => // not Linux, or no renice: the default priority
    }

  /** A thread's nice value: field 19 of its /proc stat line, counted after the command name. */
  private[state] def ownNice(self: java.nio.file.Path): Int = {
    val stat = new String(Files.readAllBytes(self.resolve("stat")))
    stat.substring(stat.lastIndexOf(')') + 2).split(" ")(16).toInt
  }
}
