package io.mapwithstate.state

import java.io.IOException

/**
 * Loads one committed version of a partition's state from its checkpoint files: the newest
 * state at or below the version that is at hand (a map the caller already holds, or a snapshot
 * file), then the deltas after it in order. It only reads, and every file goes through the
 * self-checking [[StateMapSerde]], so the store provider (restoring a version to run a batch
 * on) and the state reader (serving `read_state`) apply exactly the same checks and fail on a
 * damaged or missing file the same way, naming the file.
 */
object StateVersionLoader {

  /**
   * The state at `version` (0 is the empty state before the first batch).
   *
   * @param inMemory a version at or below `version` the caller already holds, used instead of
   *                 a snapshot that is not newer than it
   */
  def load(
      files: StateCheckpointFiles,
      version: Long,
      keyNumFields: Int,
      stateNumFields: Int,
      deltaChainThreshold: Int,
      inMemory: Option[(Long, DeltaChainStateMap)] = None): DeltaChainStateMap = {
    def emptyMap() = StateMap.empty(keyNumFields, stateNumFields, deltaChainThreshold)
    if (version == 0) return emptyMap()

    val listing = files.list()
    val snapshotBase = listing.snapshots.filter(_ <= version).lastOption
    var (current, map) = (inMemory, snapshotBase) match {
      case (Some((v, m)), Some(s)) if v >= s => (v, m)
      case (_, Some(s)) =>
        (s, files.read(files.snapshotFile(s)) { in =>
          StateMapSerde.readSnapshot(in, keyNumFields, stateNumFields, deltaChainThreshold)
        })
      case (Some((v, m)), None) => (v, m)
      case (None, None) => (0L, emptyMap())
    }
    while (current < version) {
      current += 1
      val delta = files.deltaFile(current)
      if (!files.exists(delta)) {
        throw new IOException(s"cannot load version $version of mapWithState state in " +
          s"${files.directory}: the delta file $delta is missing, and no later snapshot at or " +
          s"below version $version replaces it")
      }
      val parent = map
      map = files.read(delta)(in => StateMapSerde.readDelta(in, parent))
    }
    map
  }
}
