package io.mapwithstate.execution

import java.util.concurrent.atomic.{AtomicBoolean, AtomicLong}

import io.mapwithstate.execution.CompiledStateFunction.Code
import io.mapwithstate.plan.StateFunction
import org.apache.spark.TaskContext
import org.apache.spark.sql.types.DataType

/**
 * The compiled state functions of this JVM (an executor), kept between tasks. Compiling one
 * generates the Java source of its projections and predicate, which Spark's compiler cache does
 * not save (it caches the bytecode of a source, not the making of the source): a few
 * milliseconds of CPU that every task would pay, a large share of a small stateful task.
 *
 * An instance owns mutable buffers, so it serves one partition at a time: a partition's run
 * takes an idle one of an equal function (equal [[CompiledStateFunction.Code]]: the same
 * expressions bound to the same input layout and key columns, whatever the attributes' ids) or
 * compiles a new one, and gives it back once the partition's output is exhausted
 * ([[Lease.release]]) or else when its task completes; one whose task failed is dropped. A task
 * that serves many partitions one after another ([[StateTaskGroups]]) so reuses one instance
 * for all of them, rather than compiling one per partition it serves. A reused instance is
 * initialized for its new partition by the caller, as a new one is (nondeterministic
 * expressions reseed). At most [[MaxFunctions]] functions are kept, the least recently used
 * dropped first, each with at most [[MaxIdlePerFunction]] idle instances (about one per
 * executor core).
 */
private[execution] object CompiledStateFunctionPool {

  private val MaxFunctions = 32
  private val MaxIdlePerFunction = 16

  /** Idle instances by function, least recently used first. Guarded by itself. */
  private val idle = new java.util.LinkedHashMap[Code, java.util.ArrayDeque[CompiledStateFunction]](
    16, 0.75f, true) {
    override def removeEldestEntry(
        eldest: java.util.Map.Entry[Code, java.util.ArrayDeque[CompiledStateFunction]]): Boolean =
      size > MaxFunctions
  }

  private val compiled = new AtomicLong()

  /** How many instances this JVM has compiled (for tests). */
  def compilations: Long = compiled.get()

  /**
   * An instance of `function` for one partition's run in the task `task`; given back to the
   * pool by [[Lease.release]], or when the task completes without failing, whichever is first.
   * Without a task (a caller outside Spark's tasks), a new instance that is never given back.
   */
  def acquire(
      function: StateFunction,
      dataOrdinals: Seq[Int],
      inputWidth: Int,
      keyOrdinals: Seq[Int],
      keyTypes: Seq[DataType],
      task: TaskContext): Lease = {
    val key = Code(function, dataOrdinals, inputWidth, keyOrdinals, keyTypes)
    val reused = idle.synchronized {
      val instances = idle.get(key)
      if (instances == null) null else instances.pollFirst()
    }
    val instance = if (reused != null) reused
    else {
      compiled.incrementAndGet()
      new CompiledStateFunction(function, key)
    }
    val lease = new Lease(key, instance, returnable = task != null)
    if (task != null) {
      task.addTaskFailureListener((_, _) => lease.drop())
      task.addTaskCompletionListener[Unit](_ => lease.release())
    }
    lease
  }

  /**
   * One partition's use of a pooled instance. It goes back to the pool at most once, and never
   * after its task failed: an instance is in at most one lease or the idle list at a time.
   */
  final class Lease private[CompiledStateFunctionPool] (
      key: Code, val function: CompiledStateFunction, returnable: Boolean) {
    private val over = new AtomicBoolean(!returnable)

    /**
     * Gives the instance back, once the partition's output is exhausted (nothing downstream
     * holds its rows then: Spark's consumers copy a row they keep) or its task completed.
     */
    def release(): Unit = if (over.compareAndSet(false, true)) giveBack(key, function)

    /** Its task failed: the instance may be half-way through a row, and is not given back. */
    private[CompiledStateFunctionPool] def drop(): Unit = over.set(true)
  }

  private def giveBack(key: Code, instance: CompiledStateFunction): Unit = {
    // An idle instance must not keep the task's rows (state pages, shuffle buffers) alive.
    instance.forgetRows()
    idle.synchronized {
      var instances = idle.get(key)
      if (instances == null) {
        instances = new java.util.ArrayDeque[CompiledStateFunction]()
        idle.put(key, instances)
      }
      if (instances.size < MaxIdlePerFunction) instances.addFirst(instance)
    }
  }
}
