package io.mapwithstate.state

import java.io.IOException

import scala.collection.mutable

/**
 * The lineage rules of a partition's heap state in a checkpoint with checkpoint ids: Spark's
 * state checkpoint format v2 (`spark.sql.streaming.stateStore.checkpointFormatVersion=2`, which
 * Real-Time Mode runs on), where each commit of a partition is named by its version and a
 * unique id that the batch's commit-log entry records (`stateUniqueIds`), and the next batch
 * opens the state by that id.
 *
 * A batch that fails may be re-executed while its first attempt's tasks are still writing: two
 * attempts of one version then commit under two ids, and only the one the commit log names is
 * the state. So each commit writes files of its own (`<version>_<id>.delta`, and a snapshot as
 * `<version>_<id>.snapshot`), and each such delta names in its header the id of the version it
 * was written on ([[DeltaParent]]). A committed version is loaded by following those names back
 * from it, never by version alone: the newest snapshot (or version held in memory) of its own
 * lineage, then the lineage's deltas after it — so a first attempt's files, under an id no
 * commit names, are never read. The same rule decides which files maintenance may delete
 * ([[obsoleteFiles]]): every committed version is on one lineage (each batch runs on the state
 * the previous batch's commit named), so files of the versions up to the newest one a task was
 * asked to open that are not on its lineage belong to abandoned attempts.
 *
 * A version without an id ([[Commit.id]] None) is the empty version 0, or one whose files are
 * named by their version alone (a checkpoint that ran without ids before), loaded as
 * [[StateVersionLoader]] loads any version of such a checkpoint.
 */
object CommitLineage {

  /** A committed version of a partition's state as a commit names it. */
  final case class Commit(version: Long, id: Option[String])

  /**
   * The state at `commit`, rebuilt along its lineage; what it started from is in the result.
   *
   * @param inMemory a version the caller holds in memory, used as the lineage's base there
   * @param parentOf the version a commit's delta was written on (see [[parentFromFile]]); a
   *                 caller may remember what it read
   * @param onDamaged told of each damaged snapshot passed over for an older base
   */
  def load(
      files: StateCheckpointFiles,
      commit: Commit,
      keyNumFields: Int,
      stateNumFields: Int,
      deltaChainThreshold: Int,
      inMemory: Commit => Option[DeltaChainStateMap] = _ => None,
      parentOf: Option[Commit => Commit] = None,
      onDamaged: IOException => Unit = _ => ()): StateVersionLoader.Loaded = {
    val parent = parentOf.getOrElse(parentFromFile(files, keyNumFields, stateNumFields)(_))
    val listing = files.list()
    val chain = mutable.ArrayBuffer[Commit]()
    var damaged: Option[IOException] = None
    var current = commit
    var base: Option[DeltaChainStateMap] = None
    var snapshotBase: Option[Long] = None
    while (base.isEmpty) {
      base = inMemory(current)
      if (base.isEmpty) current.id match {
        case _ if current.version == 0 =>
          base = Some(StateMap.empty(keyNumFields, stateNumFields, deltaChainThreshold))
        case None =>
          val loaded = StateVersionLoader.loadFrom(files, current.version, keyNumFields,
            stateNumFields, deltaChainThreshold, onDamaged = onDamaged)
          base = Some(loaded.map)
          snapshotBase = loaded.snapshotBase
        case Some(_) =>
          val snapshot = files.snapshotFile(current.version, current.id)
          if (files.exists(snapshot)) {
            try {
              base = Some(files.read(snapshot) { in =>
                StateMapSerde.readSnapshot(in, keyNumFields, stateNumFields, deltaChainThreshold)
              })
              snapshotBase = Some(current.version)
            } catch {
              case e: IOException =>
                onDamaged(e)
                if (damaged.isEmpty) damaged = Some(e) else damaged.get.addSuppressed(e)
            }
          }
          if (base.isEmpty) {
            val delta = files.deltaFile(current.version, current.id)
            if (!files.exists(delta)) {
              val missing = new IOException(s"cannot load version ${commit.version} " +
                s"(checkpoint id ${commit.id.getOrElse("none")}) of mapWithState state in " +
                s"${files.directory}: the delta file $delta of its lineage is missing, and no " +
                s"snapshot of the lineage at or after version ${current.version} replaces it")
              damaged.foreach(missing.addSuppressed)
              throw missing
            }
            chain += current
            current = parent(current)
          }
      }
    }
    var map = base.get
    chain.reverseIterator.foreach { c =>
      val on = map
      map = files.read(files.deltaFile(c.version, c.id))(in => StateMapSerde.readDelta(in, on))
    }
    StateVersionLoader.Loaded(map, snapshotBase, listing)
  }

  /**
   * The version `commit`'s delta was written on, read from the delta's header: a delta of a
   * checkpoint with ids names it (format version 3); one that does not is refused as damaged.
   */
  def parentFromFile(files: StateCheckpointFiles, keyNumFields: Int, stateNumFields: Int)(
      commit: Commit): Commit = {
    val delta = files.deltaFile(commit.version, commit.id)
    val parent =
      files.readStart(delta)(in => StateMapSerde.readDeltaParent(in, keyNumFields, stateNumFields))
    parent match {
      case Some(p) => Commit(commit.version - 1, p.id)
      case None => throw new IOException(s"cannot load mapWithState state file $delta: it " +
          "names no parent version, which every delta named by a checkpoint id must")
    }
  }

  /**
   * The files of a partition that maintenance may delete, given `named`, the newest version a
   * task was asked to open (so its batch, and every batch before it, is committed): along
   * `named`'s lineage, the files older than the second newest of its snapshots at or below the
   * oldest retained version (`named.version - minVersionsToRetain + 1`; that snapshot, the newer
   * one and the lineage's deltas after it rebuild every retained version, even if the newer
   * snapshot turns out damaged), whatever their id; and the files of versions after it, up to
   * `named`, that are not on the lineage (abandoned attempts). Files of versions after `named`
   * (a batch running, or not yet in the commit log) are always kept, and so is everything when
   * the lineage cannot be followed (a file missing or unreadable).
   */
  def obsoleteFiles(
      listing: StateFileListing,
      named: Commit,
      minVersionsToRetain: Int,
      parentOf: Commit => Commit): ObsoleteFiles = {
    def commits(files: Seq[CommitFile]) = files.map(f => Commit(f.version, Some(f.id))).toSet
    val deltas = commits(listing.deltasWithIds)
    val snapshots = commits(listing.snapshotsWithIds)
    val oldestRetained = named.version - minVersionsToRetain + 1
    val lineage = mutable.Set[Commit]()
    val bases = mutable.ArrayBuffer[Long]()
    var current = named
    var followed = true
    while (followed && bases.size < 2 && current.version > 0 && current.id.isDefined) {
      if (!deltas.contains(current) && !snapshots.contains(current)) {
        followed = false // cleaned up or missing: nothing below it is known to be unneeded
      } else {
        lineage += current
        if (snapshots.contains(current) && current.version <= oldestRetained) {
          bases += current.version
        }
        if (bases.size < 2) {
          if (deltas.contains(current)) current = parentOf(current)
          else current = Commit(0, None) // a snapshot alone (a converted state) starts it
        }
      }
    }
    if (!followed && bases.size < 2) return ObsoleteFiles(Nil, Nil, Nil, Nil)
    val lowest = lineage.map(_.version).minOption.getOrElse(named.version)
    val cutoff = if (bases.size == 2) Some(bases(1)) else None
    def obsolete(f: CommitFile, isDelta: Boolean): Boolean = {
      val commit = Commit(f.version, Some(f.id))
      cutoff.exists(c => f.version < c || isDelta && f.version == c) ||
      f.version >= lowest && f.version <= named.version && !lineage.contains(commit)
    }
    ObsoleteFiles(
      listing.deltasWithIds.filter(obsolete(_, isDelta = true)),
      listing.snapshotsWithIds.filter(obsolete(_, isDelta = false)),
      cutoff.toSeq.flatMap(c => listing.deltas.filter(_ <= c)),
      cutoff.toSeq.flatMap(c => listing.snapshots.filter(_ < c)))
  }

  /**
   * Files to delete: `deltas` and `snapshots` named by checkpoint ids, and the versions of
   * files named by their version alone.
   */
  final case class ObsoleteFiles(
      deltas: Seq[CommitFile],
      snapshots: Seq[CommitFile],
      versionDeltas: Seq[Long],
      versionSnapshots: Seq[Long]) {
    def isEmpty: Boolean =
      deltas.isEmpty && snapshots.isEmpty && versionDeltas.isEmpty && versionSnapshots.isEmpty
  }
}
