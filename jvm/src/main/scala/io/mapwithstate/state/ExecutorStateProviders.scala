package io.mapwithstate.state

import java.util.concurrent.{ConcurrentHashMap, Executors, ScheduledFuture, TimeUnit}
import java.util.concurrent.atomic.AtomicBoolean

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.SparkEnv
import org.apache.spark.internal.Logging
import org.apache.spark.sql.execution.streaming.state.{StateStoreProvider, StateStoreProviderId}

/**
 * The driver's state store coordinator as this JVM's executor reaches it: where each loaded
 * state partition lives, for the scheduler's locality and for unloading stale copies.
 */
trait StoreCoordinator {

  /** Records this executor as where `id` is loaded; returns which of `others` to unload. */
  def reportActive(id: StateStoreProviderId, others: Seq[StateStoreProviderId])
    : Seq[StateStoreProviderId]

  /** Whether the coordinator still has `id` active on this executor. */
  def isActiveHere(id: StateStoreProviderId): Boolean
}

/**
 * The heap state providers ([[DeltaChainStateStoreProvider]]) this JVM holds, one per query run
 * and state partition, kept loaded between micro-batches as Spark's `StateStore` object keeps
 * its providers, and with the same contract towards the coordinator — without its cost on the
 * task. Spark's `StateStore.get` reports the executor to the driver's coordinator on every
 * task, waiting for the answer under one lock that all the executor's tasks share (and, on a
 * driver in local mode, first sets up a new reference to the coordinator: another round trip).
 * In S1 that was ~19% of a stateful task's wall time, all of it waiting (async-profiler, wall
 * clock). Here a task takes its provider from a concurrent map, and the same report goes to the
 * coordinator from this registry's own thread: the coordinator still learns each partition's
 * location at every batch, as the task starts rather than before it. The next batch's
 * locality and the maintenance below are all that read it; a report that arrives late costs
 * at most one batch its preferred executor.
 *
 * Maintenance, as Spark's: every maintenance interval, each provider's
 * [[StateStoreProvider.doMaintenance]] runs on the [[StateBackgroundWorker]], and a provider the
 * coordinator no longer has active here (its query stopped, or its partition was loaded on
 * another executor) is unloaded — unless a task took it since the check began. A provider's
 * files are its truth: one unloaded while a task still works on it costs that partition a
 * reload at the next batch, never a wrong state. Providers belong to one `SparkEnv`: the first
 * task of a new one (a new SparkContext in this JVM) unloads those of the old, as does the
 * maintenance once the old one is stopped.
 */
object ExecutorStateProviders extends Logging {

  private final class Loaded(val provider: StateStoreProvider) {
    /** When a task last took it (`System.nanoTime`). */
    @volatile var takenAt: Long = System.nanoTime()
    /** Whether its maintenance is queued or running (one at a time). */
    val maintaining = new AtomicBoolean(false)
  }

  /** The providers of one SparkEnv, and its coordinator (a reference set up on first use). */
  private final class Owner(val env: SparkEnv, makeCoordinator: SparkEnv => StoreCoordinator) {
    val providers = new ConcurrentHashMap[StateStoreProviderId, Loaded]()
    /** Providers with a report queued, so that a burst of tasks queues one each. */
    val reporting: java.util.Set[StateStoreProviderId] = ConcurrentHashMap.newKeySet()
    lazy val coordinator: StoreCoordinator = makeCoordinator(env)
    var maintenance: ScheduledFuture[_] = null
  }

  @volatile private var owner: Owner = null

  /** Reports and maintenance rounds, in the order asked; a daemon, as Spark's threads are. */
  private lazy val thread = Executors.newSingleThreadScheduledExecutor { (r: Runnable) =>
    val t = new Thread(r, "mapwithstate-state-coordinator")
    t.setDaemon(true)
    t
  }

  /**
   * The provider of `id` in this executor (`env`), made by `create` if none is loaded; its
   * location goes to the coordinator (`coordinator`, made once per env) without waiting, and
   * the first call of an env starts maintenance every `maintenanceIntervalMs`.
   */
  def get(
      id: StateStoreProviderId,
      env: SparkEnv,
      coordinator: SparkEnv => StoreCoordinator,
      maintenanceIntervalMs: Long)(create: => StateStoreProvider): StateStoreProvider = {
    val o = ownerOf(env, coordinator, maintenanceIntervalMs)
    val loaded = o.providers.computeIfAbsent(id, _ => new Loaded(create))
    loaded.takenAt = System.nanoTime()
    if (o.reporting.add(id)) thread.execute(() => report(o, id))
    loaded.provider
  }

  /** Whether `id`'s provider is loaded in this JVM (for tests). */
  def isLoaded(id: StateStoreProviderId): Boolean = {
    val o = owner
    o != null && o.providers.containsKey(id)
  }

  /** Runs `id`'s maintenance and unloads it, in the calling task (`unloadOnCommit`). */
  def doMaintenanceAndUnload(id: StateStoreProviderId): Unit = {
    val o = owner
    val loaded = if (o == null) null else o.providers.remove(id)
    if (loaded != null) {
      try loaded.provider.doMaintenance() finally loaded.provider.close()
    }
  }

  private def ownerOf(
      env: SparkEnv,
      coordinator: SparkEnv => StoreCoordinator,
      maintenanceIntervalMs: Long): Owner = {
    val current = owner
    if (current != null && (current.env eq env)) return current
    synchronized {
      if (owner == null || (owner.env ne env)) {
        val old = owner
        val o = new Owner(env, coordinator)
        o.maintenance = thread.scheduleAtFixedRate(() => maintain(o),
          maintenanceIntervalMs, maintenanceIntervalMs, TimeUnit.MILLISECONDS)
        owner = o
        if (old != null) retire(old)
      }
      owner
    }
  }

  /** Stops `o`'s maintenance and closes its providers: its SparkEnv is gone or replaced. */
  private def retire(o: Owner): Unit = {
    o.maintenance.cancel(false)
    o.providers.values.asScala.foreach(l => closeQuietly(l.provider))
    o.providers.clear()
  }

  private def report(o: Owner, id: StateStoreProviderId): Unit = {
    o.reporting.remove(id) // before asking: a task taking it meanwhile queues another report
    if (owner ne o) return
    val asked = System.nanoTime()
    try {
      val others = o.providers.keySet.asScala.filter(_ != id).toSeq
      o.coordinator.reportActive(id, others).foreach(unloadIfIdle(o, _, asked))
    } catch {
      case NonFatal(e) =>
        logWarning(s"cannot report state partition $id to the coordinator: ${e.getMessage}", e)
    }
  }

  /** A maintenance round of `o`, on the registry's thread; the work goes to the worker. */
  private def maintain(o: Owner): Unit = {
    if (SparkEnv.get ne o.env) {
      synchronized(if (owner eq o) owner = null)
      retire(o)
      return
    }
    o.providers.forEach { (id, loaded) =>
      if (loaded.maintaining.compareAndSet(false, true)) StateBackgroundWorker.execute { () =>
        val started = System.nanoTime()
        try {
          loaded.provider.doMaintenance()
          if (!o.coordinator.isActiveHere(id)) unloadIfIdle(o, id, started)
        } catch {
          case NonFatal(e) =>
            // As Spark does: a provider whose maintenance fails is unloaded, and reloaded
            // from its files by its next task.
            logWarning(s"maintenance of state partition $id failed, unloading it: ${e.getMessage}",
              e)
            unloadIfIdle(o, id, started)
        } finally loaded.maintaining.set(false)
      }
    }
  }

  /** Unloads `id` unless a task took it at or after `since`. */
  private def unloadIfIdle(o: Owner, id: StateStoreProviderId, since: Long): Unit = {
    val loaded = o.providers.get(id)
    if (loaded != null && loaded.takenAt < since && o.providers.remove(id, loaded)) {
      closeQuietly(loaded.provider)
      logInfo(s"unloaded state partition $id")
    }
  }

  private def closeQuietly(provider: StateStoreProvider): Unit =
    try provider.close() catch {
      case NonFatal(e) => logWarning(s"cannot close $provider: ${e.getMessage}", e)
    }
}
