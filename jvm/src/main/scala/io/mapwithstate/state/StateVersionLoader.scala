package io.mapwithstate.state

import java.io.IOException

/**
 * Loads one committed version of a partition's state from its checkpoint files: the newest
 * state at or below the version that is at hand (a map the caller already holds, or the newest
 * readable snapshot file — a damaged one falls back to the snapshot before it), then the deltas
 * after it in order. It only reads, and every file goes through the self-checking
 * [[StateMapSerde]], so the store provider (restoring a version to run a batch on) and the
 * state reader (serving `read_state`) apply exactly the same checks and fail on a damaged or
 * missing file the same way, naming the file.
 */
object StateVersionLoader {

  /**
   * A loaded version: the state, the snapshot it was rebuilt from (None: from memory or from
   * the empty state) and the file listing it was read against.
   */
  case class Loaded(map: DeltaChainStateMap, snapshotBase: Option[Long], listing: StateFileListing)

  /** The state at `version` (0 is the empty state before the first batch). */
  def load(
      files: StateCheckpointFiles,
      version: Long,
      keyNumFields: Int,
      stateNumFields: Int,
      deltaChainThreshold: Int,
      inMemory: Option[(Long, DeltaChainStateMap)] = None): DeltaChainStateMap =
    loadFrom(files, version, keyNumFields, stateNumFields, deltaChainThreshold, inMemory).map

  /**
   * [[load]], saying where it started from.
   *
   * @param inMemory  a version at or below `version` the caller already holds, used instead of
   *                  a snapshot that is not newer than it
   * @param onDamaged told of each damaged snapshot passed over for an older one
   */
  def loadFrom(
      files: StateCheckpointFiles,
      version: Long,
      keyNumFields: Int,
      stateNumFields: Int,
      deltaChainThreshold: Int,
      inMemory: Option[(Long, DeltaChainStateMap)] = None,
      onDamaged: IOException => Unit = _ => ()): Loaded = {
    def emptyMap() = StateMap.empty(keyNumFields, stateNumFields, deltaChainThreshold)
    val listing = files.list()
    if (version == 0) return Loaded(emptyMap(), None, listing)

    val memoryVersion = inMemory.map(_._1).getOrElse(0L)
    val candidates = listing.snapshots.filter(s => s <= version && s > memoryVersion).reverse
    var damaged: Option[IOException] = None
    val snapshotBase = candidates.iterator.map { s =>
      try Some((s,
            files.read(files.snapshotFile(s)) { in =>
              StateMapSerde.readSnapshot(in, keyNumFields, stateNumFields, deltaChainThreshold)
            }))
      catch {
        case e: IOException =>
          onDamaged(e)
          if (damaged.isEmpty) damaged = Some(e) else damaged.get.addSuppressed(e)
          None
      }
    }.collectFirst { case Some(base) => base }
    var (current: Long, map: DeltaChainStateMap) = snapshotBase.orElse(inMemory) match {
      case Some(base) => base
      // Every snapshot is damaged and nothing older is in memory: fail naming the newest.
      case None if damaged.isDefined => throw damaged.get
      case None => (0L, emptyMap())
    }
    while (current < version) {
      current += 1
      val delta = files.deltaFile(current)
      if (!files.exists(delta)) {
        val missing = new IOException(s"cannot load version $version of mapWithState state in " +
          s"${files.directory}: the delta file $delta is missing, and no later snapshot at or " +
          s"below version $version replaces it")
        damaged.foreach(missing.addSuppressed)
        throw missing
      }
      val parent = map
      map = files.read(delta)(in => StateMapSerde.readDelta(in, parent))
    }
    Loaded(map, snapshotBase.map(_._1), listing)
  }
}
