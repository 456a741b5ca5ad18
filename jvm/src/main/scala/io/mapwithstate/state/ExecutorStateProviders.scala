package io.mapwithstate.state

import java.util.UUID
import java.util.concurrent.{
  CompletableFuture,
  ConcurrentHashMap,
  Executors,
  ScheduledFuture,
  TimeUnit
}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicLong}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.SparkEnv
import org.apache.spark.internal.Logging
import org.apache.spark.sql.execution.streaming.state.{StateStoreProvider, StateStoreProviderId}
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue

/**
 * The driver's state store coordinator as this JVM's executor reaches it: where each loaded
 * state partition lives, for the scheduler's locality and for unloading stale copies.
 */
trait StoreCoordinator {

  /** Records this executor as where `id` is loaded. */
  def reportActive(id: StateStoreProviderId): Unit

  /** Where the coordinator has `id` active: here, on another executor, or nowhere. */
  def whereActive(id: StateStoreProviderId): StoreCoordinator.Where
}

object StoreCoordinator {

  /** The driver's coordinator as the executor of `env` reaches it. */
  def ofExecutor(env: SparkEnv): StoreCoordinator = new StoreCoordinator {
    override def reportActive(id: StateStoreProviderId): Unit =
      StreamingQueryGlue.reportActiveHere(env, id)

    override def whereActive(id: StateStoreProviderId): Where =
      if (StreamingQueryGlue.isActiveHere(env, id)) Here
      else if (StreamingQueryGlue.locationFromExecutor(env, id).isDefined) Elsewhere
      else Nowhere
  }

  sealed trait Where

  /** On this executor. */
  case object Here extends Where

  /** Reported by another executor since this one's report. */
  case object Elsewhere extends Where

  /** Nowhere: its query run stopped (or the coordinator never heard of it). */
  case object Nowhere extends Where
}

/**
 * The heap state providers ([[DeltaChainStateStoreProvider]]) this JVM holds, one per query run
 * and state partition, kept loaded between micro-batches as Spark's `StateStore` object keeps
 * its providers, and with the same contract towards the coordinator — without its cost on the
 * task. Spark's `StateStore.get` reports the executor to the driver's coordinator on every
 * task, waiting for the answer under one lock that all the executor's tasks share (and, on a
 * driver in local mode, first sets up a new reference to the coordinator: another round trip),
 * a wait on every task. Here a task takes its provider from a concurrent map, and only a task
 * that loads a provider queues its report, which goes to the coordinator from this registry's
 * own thread.
 * The coordinator keeps a location until its query run stops or another executor reports the
 * partition, so one report per load says what a report per task said, and a task that loads
 * nothing does not even wake that thread.
 *
 * Maintenance, as Spark's: every maintenance interval, each provider's
 * [[StateStoreProvider.doMaintenance]] runs on the [[StateBackgroundWorker]], and then the
 * coordinator is asked where the provider is active. One active nowhere (its query run
 * stopped) is unloaded, unless a task took it since the round began. One that another executor
 * has reported is claimed back if a task took it here since this registry last reported it —
 * the report that task would have sent under Spark's `StateStore`, a round late — and otherwise
 * unloaded as above: the other executor's report is then the newer news. (Spark also has the
 * coordinator's answer to each report unload such providers at once; here maintenance alone
 * decides, by the one rule.) A report a round late costs the partition its preferred executor
 * for at most a maintenance interval. A task takes a provider atomically with its entry, so
 * maintenance never unloads one between a task's lookup and its take; one it unloads while a
 * task that took it earlier still works on it costs that partition a reload at the next batch,
 * never a wrong state. Providers belong to one `SparkEnv`: the first task of a new one (a new
 * SparkContext in this JVM) unloads those of the old, as does the maintenance once the old one
 * is stopped. And the first load of a new query run unloads the providers of stopped runs at
 * once, by the same rule, rather than at the next round: they would count against its heap
 * budget meanwhile (see `unloadStoppedRuns`).
 */
object ExecutorStateProviders extends Logging {

  private final class Loaded(val provider: DeltaChainStateStoreProvider) {

    /** When a task last took it (`System.nanoTime`). */
    @volatile var takenAt: Long = System.nanoTime()

    /** When it was last reported to the coordinator (`System.nanoTime`; never: 0). */
    @volatile var reportedAt: Long = 0L

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

    /** Query runs whose first load here swept the stopped runs' providers (or is sweeping). */
    val runsSwept = new ConcurrentHashMap[UUID, CompletableFuture[Unit]]()
  }

  @volatile private var owner: Owner = null

  private val reportsQueued = new AtomicLong()

  /** How many reports to the coordinator this JVM has queued (for tests). */
  def reports: Long = reportsQueued.get

  /** Reports and maintenance rounds, in the order asked; a daemon, as Spark's threads are. */
  private lazy val thread = Executors.newSingleThreadScheduledExecutor { (r: Runnable) =>
    val t = new Thread(r, "mapwithstate-state-coordinator")
    t.setDaemon(true)
    t
  }

  /**
   * The provider of `id` in this executor (`env`), made by `create` if none is loaded; a
   * provider made here is reported to the coordinator (`coordinator`, made once per env)
   * without waiting, and the first call of an env starts maintenance every
   * `maintenanceIntervalMs`.
   */
  def get(
      id: StateStoreProviderId,
      env: SparkEnv,
      coordinator: SparkEnv => StoreCoordinator,
      maintenanceIntervalMs: Long)(
      create: => DeltaChainStateStoreProvider): DeltaChainStateStoreProvider = {
    val o = ownerOf(env, coordinator, maintenanceIntervalMs)
    var made = false
    // Taken atomically with the map's entry: maintenance unloads an entry only if no task has
    // taken it since its check began, and never between a task's lookup and its take.
    val loaded = o.providers.compute(id,
      (_, known) => {
        val taken = if (known != null) known else { made = true; new Loaded(create) }
        taken.takenAt = System.nanoTime()
        taken
      })
    if (made) {
      queueReport(o, id)
      unloadStoppedRuns(o, id.queryRunId)
    }
    loaded.provider
  }

  /**
   * Once per query run, before the first task that loads one of its providers here goes on:
   * unloads the providers of the other runs that have stopped. Maintenance would, but only at
   * its next round (a minute by default), and until then they count against the new run's heap
   * budget, which divides the heap among the partitions loaded ([[HeapBudget.defaultLimitBytes]]):
   * a query stopped and started again in a notebook would have half its budget for a minute,
   * and could fail for it. The coordinator forgets a run's partitions when it stops, so one
   * partition per other run is asked about; only providers already reported count, since one
   * whose report is still queued is nowhere yet while its run is running. Other tasks of the
   * new run that load a provider meanwhile wait for the sweep rather than count the old ones.
   */
  private def unloadStoppedRuns(o: Owner, run: UUID): Unit = {
    val mine = new CompletableFuture[Unit]()
    val sweeping = o.runsSwept.putIfAbsent(run, mine)
    if (sweeping != null) {
      sweeping.join()
      return
    }
    try {
      val started = System.nanoTime()
      val reported = o.providers.asScala.collect {
        case (id, l) if id.queryRunId != run && l.reportedAt > 0 && !o.reporting.contains(id) =>
          id
      }.groupBy(_.queryRunId)
      reported.values.foreach { ids =>
        val where =
          try o.coordinator.whereActive(ids.head)
          catch {
            case NonFatal(e) =>
              logWarning(s"cannot ask the coordinator about ${ids.head}: ${e.getMessage}", e)
              StoreCoordinator.Here
          }
        if (where == StoreCoordinator.Nowhere) ids.foreach(id => unloadIfIdle(o, id, started))
      }
    } finally mine.complete(())
  }

  /** `id`'s provider if it is loaded in this JVM (for tests). */
  def loaded(id: StateStoreProviderId): Option[DeltaChainStateStoreProvider] =
    Option(owner).flatMap(o => Option(o.providers.get(id))).map(_.provider)

  /** Whether `id`'s provider is loaded in this JVM (for tests). */
  def isLoaded(id: StateStoreProviderId): Boolean = loaded(id).isDefined

  /** Runs `id`'s maintenance and unloads it, in the calling task (`unloadOnCommit`). */
  def doMaintenanceAndUnload(id: StateStoreProviderId): Unit = {
    val o = owner
    val loaded = if (o == null) null else o.providers.remove(id)
    if (loaded != null) {
      try loaded.provider.doMaintenance()
      finally loaded.provider.close()
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

  private def queueReport(o: Owner, id: StateStoreProviderId): Unit =
    if (o.reporting.add(id)) {
      reportsQueued.incrementAndGet()
      thread.execute(() => report(o, id))
    }

  private def report(o: Owner, id: StateStoreProviderId): Unit = {
    o.reporting.remove(id) // before asking: a load meanwhile queues another report
    if (owner ne o) return
    val loaded = o.providers.get(id)
    if (loaded == null) return
    loaded.reportedAt = System.nanoTime()
    try o.coordinator.reportActive(id)
    catch {
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
    // A run's sweep is forgotten with its last provider (a later load sweeps again, cheaply).
    o.runsSwept.keySet.removeIf(run => !o.providers.keySet.asScala.exists(_.queryRunId == run))
    o.providers.forEach { (id, loaded) =>
      if (loaded.maintaining.compareAndSet(false, true)) StateBackgroundWorker.execute { () =>
        val started = System.nanoTime()
        try {
          loaded.provider.doMaintenance()
          o.coordinator.whereActive(id) match {
            case StoreCoordinator.Here =>
            case StoreCoordinator.Elsewhere if loaded.takenAt > loaded.reportedAt =>
              queueReport(o, id)
            case _ => unloadIfIdle(o, id, started)
          }
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
    var unloaded: Loaded = null
    o.providers.computeIfPresent(id,
      (_, loaded) =>
        if (loaded.takenAt < since) { unloaded = loaded; null }
        else loaded)
    if (unloaded != null) {
      closeQuietly(unloaded.provider)
      logInfo(s"unloaded state partition $id")
    }
  }

  private def closeQuietly(provider: StateStoreProvider): Unit =
    try provider.close()
    catch {
      case NonFatal(e) => logWarning(s"cannot close $provider: ${e.getMessage}", e)
    }
}
