package io.mapwithstate.state

import java.io.IOException

import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.spark.internal.Logging
import org.apache.spark.sql.execution.streaming.state.{
  KeyStateEncoderSpec,
  StateSchemaProvider,
  StateStore,
  StateStoreConf,
  StateStoreId,
  StateStoreProvider
}
import org.apache.spark.sql.types.StructType

/**
 * The state store of a streaming mapWithState: one partition's state, versioned per
 * micro-batch, held in memory as a [[DeltaChainStateMap]] and made durable in the query's
 * checkpoint.
 *
 * Why not Spark's HDFS-backed provider: it copies the whole map for every new version, so a
 * batch costs O(state). Here a new version is a new delta layer over the previous one
 * ([[DeltaChainStateMap.copy]]), so a batch costs O(records in the batch), and the committed
 * version before it stays intact for a retried task. A commit writes just that layer as the
 * version's delta file, and nothing else: a snapshot of the whole state costs O(state), so it is
 * written off the task, by [[writeDueSnapshot]], when the store's cadence says so ([[snapshotDue]]:
 * enough versions, and enough delta bytes for a large state). Compacting a long chain of layers
 * is O(state) too, and is also done off the task ([[compactInBackground]]).
 * The executor's maintenance ([[ExecutorStateProviders]]) runs it ([[doMaintenance]], as
 * Spark's HDFS-backed provider writes its snapshots), and a commit that finds a snapshot due
 * also hands it to a background thread, so that snapshots keep up with short maintenance-free
 * runs without blocking a batch. Loading a version after a restart reads the newest readable
 * snapshot at or below it plus the deltas after it: a damaged newest snapshot falls back to the
 * one before it, and maintenance keeps the two newest snapshots a retained version may start
 * from and every delta after the older.
 *
 * In a checkpoint with checkpoint ids (Spark's state checkpoint format v2, which Real-Time Mode
 * runs on: `storeConf.enableStateStoreCheckpointIds`), each commit is named by a new unique id
 * as well as its version: its files are named by both, its delta names the id of the version
 * it was written on, the store reports the id
 * ([[DeltaChainStateStore.getStateStoreCheckpointInfo]]) for the batch's commit-log entry,
 * and a version is opened by the id that entry recorded — from memory only if the version
 * held there has that id, else from the files along its lineage ([[CommitLineage]]). A
 * re-executed batch's first attempt, under another id, is never read, nor deleted while a
 * committed version needs it.
 *
 * Only the mapWithState operator uses this provider (it sets it in its own copy of the SQL
 * conf, see [[StateBackend.Memory]]; each executor holds its providers in
 * [[ExecutorStateProviders]]); the operators reach the map through
 * [[StateMapStore.stateMap]], as the StateStore API has no notion of update times or timeouts.
 */
class DeltaChainStateStoreProvider extends StateStoreProvider with Logging {
  import DeltaChainStateStoreProvider._

  private var storeId: StateStoreId = _
  private var keyNumFields = 0
  private var stateNumFields = 0
  private var snapshotInterval = DefaultSnapshotInterval
  private var snapshotDeltaBytes = DefaultSnapshotDeltaBytes
  private var minVersionsToRetain = 100
  private var snapshotDeltaRatio = DefaultSnapshotDeltaRatio
  private var deltaChainThreshold = StateMap.DefaultDeltaChainThreshold
  @volatile private var files: StateCheckpointFiles = _

  /** Whether each commit is named by a unique id (Spark's state checkpoint format v2). */
  private var checkpointIds = false

  /**
   * Committed versions kept in memory, newest last, each with its checkpoint id. They share
   * layers, so keeping the previous version costs only its top layer; it is kept for a task
   * that retries the newest batch. A version committed again (another attempt of its batch)
   * replaces the one held.
   */
  private val loaded = new java.util.TreeMap[java.lang.Long, Held]()

  /**
   * With checkpoint ids, guarded by `this`: the newest version a task was asked to open by its
   * id (so the commit log names it), from which maintenance follows the lineage it keeps; and
   * the parent of each delta this provider wrote or read, so that following it reads no file
   * twice.
   */
  private var newestNamed: Option[CommitLineage.Commit] = None
  private val parents = new java.util.HashMap[CommitLineage.Commit, CommitLineage.Commit]()

  /**
   * The cadence's bookkeeping, guarded by `this`: the newest version with a snapshot (written,
   * or handed to the background writer), and the size of each delta file after it.
   */
  private var lastSnapshotVersion = 0L

  /** The size of the newest snapshot's file (0: none, or not known). */
  private var lastSnapshotBytes = 0L

  /**
   * What a snapshot of the newest committed version would take, estimated at its commit from
   * its delta's bytes per record (0: no commit yet); stands in for `lastSnapshotBytes` while
   * there is no snapshot.
   */
  private var stateBytesEstimate = 0L
  private val deltaBytesSinceSnapshot = new java.util.TreeMap[java.lang.Long, java.lang.Long]()

  /** The newest background compaction of a committed map (see [[compactInBackground]]). */
  private var compaction: Compaction = null

  /** Serializes snapshot writes of this partition (maintenance and the background writer). */
  private val snapshotLock = new Object

  /** Whether this provider is among [[DeltaChainStateStoreProvider.openProviders]]. */
  private var counted = false

  override def init(
      stateStoreId: StateStoreId,
      keySchema: StructType,
      valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec,
      useColumnFamilies: Boolean,
      storeConf: StateStoreConf,
      hadoopConf: Configuration,
      useMultipleValuesPerKey: Boolean,
      stateSchemaProvider: Option[StateSchemaProvider]): Unit = {
    if (useColumnFamilies || useMultipleValuesPerKey) {
      throw new UnsupportedOperationException(
        s"${getClass.getSimpleName} holds one value per key in one column family")
    }
    storeId = stateStoreId
    keyNumFields = keySchema.length
    stateNumFields = valueSchema.length
    snapshotInterval = storeConf.extraOptions.get(SnapshotIntervalOption)
      .map(_.toInt).getOrElse(DefaultSnapshotInterval)
    snapshotDeltaBytes = storeConf.extraOptions.get(SnapshotDeltaBytesOption)
      .map(_.toLong).getOrElse(DefaultSnapshotDeltaBytes)
    snapshotDeltaRatio = storeConf.extraOptions.get(SnapshotDeltaRatioOption)
      .map(_.toDouble).getOrElse(DefaultSnapshotDeltaRatio)
    deltaChainThreshold = storeConf.extraOptions.get(DeltaChainThresholdOption)
      .map(_.toInt).getOrElse(StateMap.DefaultDeltaChainThreshold)
    minVersionsToRetain = storeConf.minVersionsToRetain
    checkpointIds = storeConf.enableStateStoreCheckpointIds
    require(snapshotInterval > 0, s"snapshot interval must be positive: $snapshotInterval")
    require(snapshotDeltaBytes > 0, s"snapshot delta bytes must be positive: $snapshotDeltaBytes")
    require(snapshotDeltaRatio >= 0,
      s"snapshot delta ratio must not be negative: $snapshotDeltaRatio")
    // Compressed as Spark's HDFS-backed store compresses its files, with the same setting.
    files = new StateCheckpointFiles(stateStoreId.storeCheckpointLocation(), hadoopConf,
      compressionCodec = Some(storeConf.compressionCodec))
    if (!counted) {
      counted = true
      DeltaChainStateStoreProvider.open.incrementAndGet()
    }
  }

  override def stateStoreId: StateStoreId = storeId

  override def getStore(
      version: Long,
      uniqueId: Option[String],
      forceSnapshotOnCommit: Boolean,
      loadEmpty: Boolean): StateStore = openStore(version, uniqueId, None, loadEmpty)

  /**
   * The store of the version after `version`, whose commit makes its delta file durable in
   * place or, given `closes`, hands that to them ([[DeferredCloses]]).
   */
  def getStore(
      version: Long,
      uniqueId: Option[String],
      closes: Option[DeferredCloses]): DeltaChainStateStore =
    openStore(version, uniqueId, closes, loadEmpty = false)

  /**
   * The store of the version after `version`, whose committed state was written in another
   * state type (`conversion.storedStateType`, a restart with a changed state schema): that
   * version is loaded from the files as that type and every key converted into a new map of
   * this provider's type, whose commit writes a snapshot (never a delta over a version of
   * the old type). The old version's files stay as they were, for the old query.
   */
  def getConvertedStore(
      version: Long,
      uniqueId: Option[String],
      closes: Option[DeferredCloses],
      conversion: StoredStateConversion): DeltaChainStateStore = {
    val stored = CommitLineage.load(files, CommitLineage.Commit(version, uniqueId), keyNumFields,
      conversion.storedStateType.length, deltaChainThreshold).map
    val convert = conversion.converter()
    val map = emptyMap()
    stored.getAll().foreach { entry =>
      if (entry.state == null) map.put(entry.key, null, entry.updateTime)
      else {
        val state = convert(entry.key, entry.state)
        if (state != null) map.put(entry.key, state, entry.updateTime)
      }
    }
    new DeltaChainStateStore(this, storeId, version, map, closes, uniqueId, newId(),
      snapshotOnCommit = true)
  }

  /** The id of a new commit: a new unique id with checkpoint ids, else none. */
  private def newId(): Option[String] =
    if (checkpointIds) Some(java.util.UUID.randomUUID.toString) else None

  private def openStore(
      version: Long,
      uniqueId: Option[String],
      closes: Option[DeferredCloses],
      loadEmpty: Boolean): DeltaChainStateStore = {
    if (version < 0) throw new IllegalArgumentException(s"negative state version $version")
    // Under the lock: a rebase replaces the version in memory, and the copy must be of it.
    val map = synchronized {
      if (uniqueId.isDefined && newestNamed.forall(_.version < version)) {
        newestNamed = Some(CommitLineage.Commit(version, uniqueId))
      }
      if (loadEmpty) emptyMap().copy()
      else onCompactedBase(version, uniqueId, load(version, uniqueId)).copy()
    }
    new DeltaChainStateStore(this, storeId, version, map, closes, uniqueId, newId())
  }

  /**
   * `map` (the committed `version`) on the newest background compaction when its chain holds
   * the compacted map: the chain's length drops to the layers above it, so the copy for the
   * next batch need not compact in the task. The rebased chain replaces `version` in memory,
   * and the compaction is forgotten, releasing the layers it replaced.
   */
  private def onCompactedBase(
      version: Long,
      id: Option[String],
      map: DeltaChainStateMap): DeltaChainStateMap = {
    val done = compaction
    if (done == null || !done.done) return map
    compaction = null
    // None: the compaction failed, or the chain no longer holds its source (compacted in a task
    // meanwhile, or an older version retried).
    done.result.flatMap(base => map.rebased(done.source, base)) match {
      case Some(rebased) =>
        loaded.put(version, Held(id, rebased))
        rebased
      case None => map
    }
  }

  /**
   * The committed state at `version` (with checkpoint id `id`, in a checkpoint with ids): from
   * memory, or from the checkpoint files (on top of the newest version in memory below it,
   * when that is newer than any snapshot; with an id, one of its lineage).
   */
  private[state] def load(version: Long, id: Option[String] = None): DeltaChainStateMap =
    synchronized(loadHeld(version, id))

  private def loadHeld(version: Long, id: Option[String]): DeltaChainStateMap = {
    if (version == 0) return emptyMap()
    val inMemory = loaded.get(version)
    if (inMemory != null && inMemory.id == id) return inMemory.map

    val onDamaged = (e: IOException) =>
      logWarning(s"falling back from a damaged snapshot to an older one: ${e.getMessage}")
    val StateVersionLoader.Loaded(map, snapshotBase, listing) = id match {
      case None =>
        val memoryBase = Option(loaded.floorEntry(version)).filter(_.getValue.id.isEmpty)
          .map(e => (e.getKey.longValue, e.getValue.map))
        StateVersionLoader.loadFrom(files, version, keyNumFields, stateNumFields,
          deltaChainThreshold, memoryBase, onDamaged)
      case Some(_) =>
        CommitLineage.load(files, CommitLineage.Commit(version, id), keyNumFields,
          stateNumFields, deltaChainThreshold,
          c => Option(loaded.get(c.version)).filter(_.id == c.id).map(_.map), Some(parentOf),
          onDamaged)
    }
    if (id.isDefined && (snapshotBase.isDefined || loaded.isEmpty)) {
      // A reload along a lineage: the cadence continues from the snapshot it started at, with
      // the sizes of the lineage's deltas after it (their parents are known from the load).
      lastSnapshotVersion = snapshotBase.getOrElse(0L)
      lastSnapshotBytes = snapshotBase.flatMap(v => listing.snapshotsWithIds.find(_.version == v))
        .map(_.bytes).getOrElse(0L)
      deltaBytesSinceSnapshot.clear()
      val sizes = listing.deltasWithIds.map(f =>
        CommitLineage.Commit(f.version, Some(f.id)) ->
          f.bytes).toMap
      var commit = CommitLineage.Commit(version, id)
      while (commit != null && commit.version > lastSnapshotVersion) {
        sizes.get(commit).foreach(bytes => deltaBytesSinceSnapshot.put(commit.version, bytes))
        commit = parents.get(commit)
      }
    } else if (snapshotBase.isDefined || loaded.isEmpty) {
      // A reload from the files: the cadence continues from the snapshot it started at.
      lastSnapshotVersion = snapshotBase.getOrElse(
        listing.snapshots.filter(_ <= version).lastOption.getOrElse(0L))
      lastSnapshotBytes = listing.snapshotBytes.getOrElse(lastSnapshotVersion, 0L)
      deltaBytesSinceSnapshot.clear()
      listing.deltaBytes.foreach { case (v, bytes) =>
        if (v > lastSnapshotVersion && v <= version) deltaBytesSinceSnapshot.put(v, bytes)
      }
    }
    remember(version, id, map)
    map
  }

  /** The version `commit`'s delta was written on: remembered, or read from the delta. */
  private def parentOf(commit: CommitLineage.Commit): CommitLineage.Commit = synchronized {
    val known = parents.get(commit)
    if (known != null) known
    else {
      val parent = CommitLineage.parentFromFile(files, keyNumFields, stateNumFields)(commit)
      parents.put(commit, parent)
      parent
    }
  }

  /**
   * Makes `store`'s map the committed state at `store.version + 1`, durably: its delta file
   * only (made durable here, or, when the store's task defers its closes, before the task
   * ends). A snapshot that falls due goes to the background writer.
   */
  private[state] def commit(store: DeltaChainStateStore): Long = {
    val newVersion = store.version + 1
    val map = store.stateMap
    if (store.snapshotOnCommit) return commitSnapshot(store, newVersion)
    // In a task over several partitions, the delta's fsync and rename run while the task goes
    // on to the next partition; the task ends once they are done (see DeferredCloses).
    val parent = store.newId.map(_ => DeltaParent(store.baseId))
    val bytes = files.write(files.deltaFile(newVersion, store.newId), store.closes)(out =>
      StateMapSerde.writeDelta(map, out, parent))
    val due = synchronized {
      store.newId.foreach { id =>
        parents.put(CommitLineage.Commit(newVersion, Some(id)),
          CommitLineage.Commit(store.version, store.baseId))
      }
      remember(newVersion, store.newId, map)
      deltaBytesSinceSnapshot.tailMap(newVersion, true).clear() // a re-run version's old sizes
      deltaBytesSinceSnapshot.put(newVersion, bytes)
      stateBytesEstimate = map.size.toLong * bytes / math.max(1, map.layer.usedSlotCount)
      snapshotDue(newVersion)
    }
    compactInBackground(newVersion, map)
    if (due) StateBackgroundWorker.execute(() => writeDueSnapshot())
    newVersion
  }

  /** [[commit]] of a store whose whole map is written as the version's snapshot. */
  private def commitSnapshot(store: DeltaChainStateStore, newVersion: Long): Long = {
    val map = store.stateMap
    val bytes = files.write(files.snapshotFile(newVersion, store.newId), store.closes)(out =>
      StateMapSerde.writeSnapshot(map, out))
    synchronized {
      remember(newVersion, store.newId, map)
      lastSnapshotVersion = newVersion
      lastSnapshotBytes = bytes
      deltaBytesSinceSnapshot.clear()
    }
    newVersion
  }

  /**
   * Compacts `map` (the committed `version`)'s chain on the background thread once it is
   * [[BackgroundCompactionMargin]] layers short of the threshold at which the next batch's copy
   * would compact it in its task (O(state): a latency spike of a whole pass over the
   * partition's keys), or one layer short of the early compaction of a chain that holds many
   * stale entries (full churn). The next [[getStore]] after it finishes puts the chain on the
   * compacted base instead. Not done for a snapshot: writing one scans the chain at about the
   * cost of a scan of one layer (see [[ChainScan]]), where a compaction first
   * would copy every key. One at a time per partition; a map whose chain is compacted in a task
   * before it finishes wastes it.
   *
   * A long chain is compacted on the partition's turn ([[compactionTurn]]), up to
   * [[CompactionTurns]] - 1 layers before that point. Every partition of a query gains one
   * layer per batch, so without turns all of an executor's partitions reach the point in the
   * same batch, and their compactions, on the one background thread, all take CPU from that
   * batch and the next, which become the slowest of a run. On turns, a batch holds a
   * [[CompactionTurns]]th of them. The early compaction under full churn has no turns: its
   * point comes every two or three batches, and a missed one would be done in a task.
   */
  private def compactInBackground(version: Long, map: DeltaChainStateMap): Unit = {
    val at = deltaChainThreshold - BackgroundCompactionMargin
    val pending = synchronized {
      val long = at >= 1 && (map.deltaChainLength >= at ||
      at > CompactionTurns && map.deltaChainLength > at - CompactionTurns &&
      compactionTurn(version, storeId.partitionId))
      if ((long || map.compactsEarlyNext) && map.deltaChainLength >= 1 && compaction == null) {
        compaction = new Compaction(map)
        compaction
      } else null
    }
    if (pending != null) StateBackgroundWorker.execute { () =>
      val base =
        try Some(map.compactedChain())
        catch {
          case NonFatal(e) =>
            logWarning(s"cannot compact $storeId's state in the background: ${e.getMessage}", e)
            None
        }
      synchronized {
        pending.result = base
        pending.done = true
      }
    }
  }

  /**
   * Whether `version` should have a snapshot: once `snapshotInterval` versions passed since the
   * last one (Spark's `minDeltasForSnapshot`) — but for a large state, only once a snapshot
   * would spare a reload `snapshotDeltaRatio` of the state's bytes. A reload reads the last
   * snapshot and the deltas after it: a new snapshot spares it those deltas' bytes, or, before
   * any snapshot, what the deltas since the start hold beyond the state itself. A snapshot is
   * an O(state) write, worth it once a reload reads a fair share more than it; a large state
   * with small batches (a few keys of many change) would otherwise rewrite the whole state
   * every few batches for little gain — also right after the batch that loaded it, whose one
   * delta already holds about what a snapshot would. At the latest after
   * `10 × snapshotInterval` versions, or once the deltas hold `snapshotDeltaBytes`.
   */
  private def snapshotDue(version: Long): Boolean = {
    var bytes = 0L
    deltaBytesSinceSnapshot.headMap(version, true).values.forEach(b => bytes += b)
    val versions = version - lastSnapshotVersion
    val stateBytes = if (lastSnapshotBytes > 0) lastSnapshotBytes else stateBytesEstimate
    val spared = if (lastSnapshotBytes > 0) bytes else bytes - stateBytes
    version > lastSnapshotVersion && (
      bytes >= snapshotDeltaBytes || versions >= 10L * snapshotInterval ||
      versions >= snapshotInterval && (stateBytes < SizeAwareSnapshotsFromBytes ||
      snapshotDeltaRatio == 0 || spared >= snapshotDeltaRatio * stateBytes))
  }

  /** Whether a background compaction is done and not yet used (for tests). */
  private[state] def compactionReady: Boolean = synchronized(compaction != null && compaction.done)

  /** Whether a background compaction was started and not yet used (for tests). */
  private[state] def compactionPending: Boolean = synchronized(compaction != null)

  /**
   * Writes a snapshot of the newest committed version in memory if the cadence says one is
   * due; returns the version written. Runs in maintenance or on the background
   * writer, never in a task: it reads only committed layers, which no task changes.
   */
  private[state] def writeDueSnapshot(): Option[Long] = snapshotLock.synchronized {
    val fs = files
    val newest = synchronized {
      Option(loaded.lastEntry()).filter(e => fs != null && snapshotDue(e.getKey))
    }
    newest.map { entry =>
      val version = entry.getKey.longValue
      val held = entry.getValue
      // The same contents in one layer, when a compaction of exactly this version is done: a
      // scan of a chain pays a lookup in every upper layer per entry.
      val map = synchronized {
        Option(compaction).filter(_.source eq held.map).flatMap(_.result)
      }.getOrElse(held.map)
      val started = System.nanoTime()
      val bytes = fs.write(fs.snapshotFile(version, held.id))(out =>
        StateMapSerde.writeSnapshot(map, out))
      logInfo(s"wrote the snapshot of $storeId version $version: ${map.size} keys, $bytes bytes, " +
        s"${(System.nanoTime() - started) / 1000000} ms")
      synchronized {
        if (version > lastSnapshotVersion) {
          lastSnapshotVersion = version
          lastSnapshotBytes = bytes
        }
        deltaBytesSinceSnapshot.headMap(version, true).clear()
      }
      version
    }
  }

  private def remember(version: Long, id: Option[String], map: DeltaChainStateMap): Unit = {
    loaded.put(version, Held(id, map))
    while (loaded.size > VersionsInMemory) loaded.pollFirstEntry()
  }

  private def emptyMap(): DeltaChainStateMap =
    StateMap.empty(keyNumFields, stateNumFields, deltaChainThreshold)

  /**
   * Writes a snapshot if one is due, then deletes the files that no version among the newest
   * `minVersionsToRetain` needs, even if its newest snapshot turns out damaged: every file older
   * than the second newest snapshot at or below the oldest retained version (that snapshot, the
   * newer ones and the deltas after it still rebuild every retained version).
   */
  override def doMaintenance(): Unit = {
    val fs = files
    if (fs == null) return
    try writeDueSnapshot()
    catch {
      // Only a speed-up for reloads: the deltas still hold every version.
      case NonFatal(e) => logWarning(s"cannot write a snapshot of $storeId: ${e.getMessage}", e)
    }
    val listing = fs.list()
    if (listing.hasIds) return deleteObsoleteWithIds(fs, listing)
    val oldestRetained = listing.latest - minVersionsToRetain + 1
    val bases = listing.snapshots.filter(_ <= oldestRetained)
    if (bases.size >= 2) {
      val base = bases(bases.size - 2)
      listing.deltas.filter(_ <= base).foreach(v => fs.delete(fs.deltaFile(v)))
      listing.snapshots.filter(_ < base).foreach(v => fs.delete(fs.snapshotFile(v)))
    }
  }

  /**
   * Maintenance's deletions in a checkpoint with checkpoint ids: the files no committed version
   * needs ([[CommitLineage.obsoleteFiles]]), once a task has opened a version by its id; none
   * before (nothing here knows which versions are committed).
   */
  private def deleteObsoleteWithIds(fs: StateCheckpointFiles, listing: StateFileListing): Unit = {
    val named = synchronized(newestNamed).getOrElse(return)
    val obsolete =
      try CommitLineage.obsoleteFiles(listing, named, minVersionsToRetain, parentOf)
      catch {
        case e: IOException =>
          logWarning(s"cannot follow the lineage of $storeId's state from version " +
              s"${named.version}, deleting nothing: ${e.getMessage}", e)
          return
      }
    obsolete.deltas.foreach { f =>
      fs.delete(fs.deltaFile(f.version, Some(f.id)))
      synchronized(parents.remove(CommitLineage.Commit(f.version, Some(f.id))))
    }
    obsolete.snapshots.foreach(f => fs.delete(fs.snapshotFile(f.version, Some(f.id))))
    obsolete.versionDeltas.foreach(v => fs.delete(fs.deltaFile(v)))
    obsolete.versionSnapshots.foreach(v => fs.delete(fs.snapshotFile(v)))
  }

  override def close(): Unit = synchronized {
    loaded.clear()
    parents.clear()
    if (counted) {
      counted = false
      DeltaChainStateStoreProvider.open.decrementAndGet()
    }
  }

  override def toString: String = s"DeltaChainStateStoreProvider[$storeId]"
}

object DeltaChainStateStoreProvider {

  private val open = new java.util.concurrent.atomic.AtomicInteger()

  /**
   * Providers initialized and not closed in this JVM: the partitions of heap state this
   * executor holds (Spark keeps a partition's provider, and its maps, loaded between batches).
   */
  def openProviders: Int = open.get()

  /**
   * Store option (StateStoreConf extra option): a snapshot once this many versions were
   * committed since the last one.
   */
  val SnapshotIntervalOption = "mapwithstate.snapshotInterval"

  /**
   * Store option: for a large state, a snapshot waits until it would spare a reload this
   * fraction of the state's bytes (0: every `snapshotInterval` versions, whatever the size).
   */
  val SnapshotDeltaRatioOption = "mapwithstate.snapshotDeltaRatio"

  /** A reload then reads at most about 1.5 times a snapshot's bytes. */
  val DefaultSnapshotDeltaRatio = 0.5

  /**
   * Snapshots of a partition smaller than this (as stored: compressed) are cheap: the versions
   * alone set the cadence. A megabyte of LZ4 holds about 7 MB of small rows (75k keys of a
   * bigint key and state), whose snapshot is tens of milliseconds of background work.
   */
  private val SizeAwareSnapshotsFromBytes: Long = 1L << 20

  /** Store option: a snapshot once the delta files since the last one hold this many bytes. */
  val SnapshotDeltaBytesOption = "mapwithstate.snapshotDeltaBytes"

  /** Replaying more than this costs about as much as reading a snapshot of a large state. */
  val DefaultSnapshotDeltaBytes: Long = 256L << 20

  /** Store option: the delta chain length at which a new version compacts the chain. */
  val DeltaChainThresholdOption = "mapwithstate.deltaChainThreshold"

  /** As DStreams checkpoint a mapWithState's state every 10 batches. */
  val DefaultSnapshotInterval = 10

  /**
   * A chain is compacted in the background this many layers before the threshold, so that the
   * compaction has that many batches to finish before a task would do it inline.
   */
  private val BackgroundCompactionMargin = 5

  /** The number of turns the partitions of an executor take to compact their long chains. */
  private[state] val CompactionTurns = 4

  /**
   * Whether `version` is `partition`'s turn to start compacting a long chain: one version in
   * [[CompactionTurns]], by `partition + partition / CompactionTurns`, so that both runs of
   * consecutive partitions (as `local[n]` holds them) and every n-th partition (as a cluster of
   * n executors may hold them) take different turns.
   */
  private[state] def compactionTurn(version: Long, partition: Int): Boolean =
    Math.floorMod(version - partition - partition / CompactionTurns, CompactionTurns.toLong) == 0

  /**
   * A background compaction of `source` (a committed map): `result` once it is done (None if it
   * failed). Guarded by the provider.
   */
  private final class Compaction(val source: DeltaChainStateMap) {
    var done = false
    var result: Option[DeltaChainStateMap] = None
  }

  /** The newest committed version and the one before it, for a retried batch. */
  private val VersionsInMemory = 2

  /** A committed version held in memory: its checkpoint id (None: without ids) and state. */
  private final case class Held(id: Option[String], map: DeltaChainStateMap)
}
