package io.mapwithstate.state

import java.io.{File, RandomAccessFile}

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.internal.SQLConf
import org.scalatest.funsuite.AnyFunSuite

/**
 * The heap store in a checkpoint with checkpoint ids (Spark's state checkpoint format v2, as
 * Real-Time Mode runs): each commit's files are its own, a version is opened along the lineage
 * its id names, and maintenance keeps every file a committed version needs.
 */
class CommitLineageSuite extends AnyFunSuite with HeapStoreFixture {

  /** A provider whose cadence never makes a snapshot due by itself (see [[snapshot]]). */
  private def provider(root: File, minVersionsToRetain: Int = 100,
      snapshotDeltaBytes: Long = DeltaChainStateStoreProvider.DefaultSnapshotDeltaBytes,
      checkpointIds: Boolean = true): DeltaChainStateStoreProvider = {
    val sqlConf = new SQLConf()
    sqlConf.setConfString(SQLConf.MIN_BATCHES_TO_RETAIN.key, minVersionsToRetain.toString)
    sqlConf.setConfString(SQLConf.STATE_STORE_CHECKPOINT_FORMAT_VERSION.key,
      if (checkpointIds) "2" else "1")
    heapProvider(root,
      Map(DeltaChainStateStoreProvider.SnapshotIntervalOption -> "1000",
        DeltaChainStateStoreProvider.SnapshotDeltaBytesOption -> snapshotDeltaBytes.toString),
      sqlConf)
  }

  /** Commits the version after (`version`, `id`) with key `key` set to `key`; returns its id. */
  private def commit(p: DeltaChainStateStoreProvider, version: Long, id: Option[String],
      key: Long): String = {
    val store = p.getStore(version, id, None)
    store.stateMap.put(row(key), row(key), key)
    assert(store.commit() == version + 1)
    val info = store.getStateStoreCheckpointInfo()
    assert(info.batchVersion == version + 1)
    assert(info.baseStateStoreCkptId == id)
    info.stateStoreCkptId.get
  }

  /** Commits `n` versions from (`from`, `id`), version v setting key v; returns their ids. */
  private def commitChain(p: DeltaChainStateStoreProvider, n: Int, from: Long = 0,
      id: Option[String] = None): Seq[String] =
    (0 until n).foldLeft(Vector.empty[String]) { (ids, i) =>
      ids :+ commit(p, from + i, if (i == 0) id else Some(ids.last), from + i + 1)
    }

  /**
   * Writes the snapshot of (`version`, `id`) as the background writer would, from a provider
   * that has loaded it and finds a snapshot due at any delta size.
   */
  private def snapshot(root: File, version: Long, id: String): Unit = {
    val p = provider(root, snapshotDeltaBytes = 1)
    try {
      p.load(version, Some(id))
      assert(p.writeDueSnapshot().contains(version))
    } finally p.close()
    assert(names(root).contains(s"${version}_$id.snapshot"))
  }

  private def keys(p: DeltaChainStateStoreProvider, version: Long, id: String): Set[Long] =
    p.load(version, Some(id)).getAll().map(_.key.getLong(0)).toSet

  test("each commit writes files named by its version and a new id, and reports the id") {
    withDir { root =>
      val p = provider(root)
      val ids = commitChain(p, 3)
      assert(ids.distinct.size == 3)
      assert(names(root) == ids.zipWithIndex.map { case (id, i) => s"${i + 1}_$id.delta" }.toSet)
      // Each delta names the version it was written on.
      val files = partitionFiles(root)
      assert(CommitLineage.parentFromFile(files, 1, 1)(CommitLineage.Commit(3, Some(ids(2)))) ==
        CommitLineage.Commit(2, Some(ids(1))))
      assert(CommitLineage.parentFromFile(files, 1, 1)(CommitLineage.Commit(1, Some(ids(0)))) ==
        CommitLineage.Commit(0, None))
    }
  }

  test("two attempts of one version: the one the commit log names is read, in memory and " +
    "after a restart, whichever committed last") {
    withDir { root =>
      val p = provider(root)
      val Seq(first) = commitChain(p, 1)
      // Batch 1 fails after its first attempt committed; the re-executed attempt commits too,
      // and the first one's zombie task commits once more after it.
      val abandoned = commit(p, 1, Some(first), key = 100)
      val named = commit(p, 1, Some(first), key = 200)
      val zombie = commit(p, 1, Some(first), key = 300)
      assert(Set(abandoned, named, zombie).size == 3)
      assert(keys(p, 2, named) == Set(1, 200))
      // The next batch runs on the named attempt, from memory or not.
      val next = commit(p, 2, Some(named), key = 3)
      assert(keys(p, 3, next) == Set(1, 200, 3))
      val restarted = provider(root)
      assert(keys(restarted, 3, next) == Set(1, 200, 3))
      assert(keys(restarted, 2, abandoned) == Set(1, 100))
      assert(keys(provider(root), 2, named) == Set(1, 200))
    }
  }

  test("a version is loaded along its lineage, from the lineage's snapshot, never another's") {
    withDir { root =>
      val p = provider(root)
      val ids = commitChain(p, 4)
      // An abandoned attempt of version 4, with a snapshot of its own.
      val abandoned = commit(p, 3, Some(ids(2)), key = 100)
      snapshot(root, 4, abandoned)
      val more = commitChain(p, 2, from = 3, id = Some(ids(2)))
      assert(keys(provider(root), 5, more(1)) == Set(1, 2, 3, 4, 5))
      // Without the lineage's own deltas 1..3, version 5 cannot be rebuilt: the abandoned
      // snapshot of version 4 is not of its lineage.
      (0 to 2).foreach(i => new File(partitionDir(root), s"${i + 1}_${ids(i)}.delta").delete())
      val error = intercept[java.io.IOException](provider(root).load(5, Some(more(1))))
      assert(error.getMessage.contains(s"3_${ids(2)}.delta"))
      assert(error.getMessage.contains("of its lineage is missing"))
    }
  }

  test("a damaged snapshot of the lineage falls back to its deltas") {
    withDir { root =>
      val p = provider(root)
      val ids = commitChain(p, 3)
      snapshot(root, 3, ids(2))
      val damaged = new File(partitionDir(root), s"3_${ids(2)}.snapshot")
      val f = new RandomAccessFile(damaged, "rw")
      try f.setLength(f.length() / 2)
      finally f.close()
      val next = commit(provider(root), 3, Some(ids(2)), key = 4)
      assert(keys(provider(root), 4, next) == Set(1, 2, 3, 4))
    }
  }

  test("maintenance keeps every file of the named lineage's retained versions, deletes " +
    "abandoned attempts and files older than its second newest snapshot") {
    withDir { root =>
      val p = provider(root, minVersionsToRetain = 3)
      val ids = scala.collection.mutable.ArrayBuffer[String]()
      var abandoned = Seq.empty[String]
      (1 to 12).foreach { v =>
        val base = ids.lastOption
        // Every third version, an attempt that is abandoned, with a snapshot of its own.
        if (v % 3 == 0) {
          abandoned :+= commit(p, v - 1, base, key = 1000 + v)
          snapshot(root, v, abandoned.last)
        }
        ids += commit(p, v - 1, base, key = v)
        // The next batch opens the named version: the provider now knows it is committed.
        p.getStore(v, Some(ids.last), None).abort()
        if (v % 4 == 0) {
          snapshot(root, v, ids.last)
          p.doMaintenance()
        }
      }
      val left = names(root)
      // No abandoned attempt's file is left at or below the newest named version.
      abandoned.foreach(id => assert(!left.exists(_.contains(id)), s"$id in $left"))
      // Versions 10..12 are retained: each loads, in a new provider.
      val reloaded = provider(root, minVersionsToRetain = 3)
      (10 to 12).foreach { v =>
        assert(keys(reloaded, v, ids(v - 1)) == (1L to v).toSet, s"version $v")
      }
      // Nothing older than the second newest snapshot of the lineage at or below version 10.
      val snapshots = (1 to 12).filter(v => left.contains(s"${v}_${ids(v - 1)}.snapshot"))
      val base = snapshots.filter(_ <= 10).takeRight(2).head
      assert(left.forall(n => n.takeWhile(_.isDigit).toLong >= base), s"$left, base $base")
    }
  }

  test("a version committed after the newest named one is kept, whatever its id") {
    withDir { root =>
      val p = provider(root, minVersionsToRetain = 1)
      val ids = commitChain(p, 3)
      p.getStore(3, Some(ids(2)), None).abort()
      // Two attempts of version 4, neither named yet: either may be the one committed.
      val a = commit(p, 3, Some(ids(2)), key = 40)
      val b = commit(p, 3, Some(ids(2)), key = 41)
      p.doMaintenance()
      assert(names(root).contains(s"4_$a.delta") && names(root).contains(s"4_$b.delta"))
      assert(keys(provider(root), 4, a) == Set(1, 2, 3, 40))
    }
  }

  test("a checkpoint without ids keeps its files named by version, in the format before") {
    withDir { root =>
      val p = provider(root, checkpointIds = false)
      val store = p.getStore(0, None, None)
      store.stateMap.put(row(1), row(1), 1L)
      store.commit()
      assert(store.getStateStoreCheckpointInfo().stateStoreCkptId.isEmpty)
      assert(names(root) == Set("1.delta"))
      val files = partitionFiles(root)
      // The delta magic, then format version 2, as before checkpoint ids.
      assert(files.readStart(files.deltaFile(1))(in => (in.readInt(), in.readInt())) ==
        (StateMapSerde.DeltaMagic, 2))
    }
  }

  test("repartition_state reads a version by its id and writes the next as a snapshot alone " +
    "under a new id, which the query then opens by it") {
    withDir { root =>
      val ids = commitChain(provider(root), 3)
      // An abandoned attempt of version 3, which the read must not take.
      commit(provider(root), 2, Some(ids(1)), key = 100)
      val hadoopConf = new Configuration().iterator().asScala.map(e => e.getKey -> e.getValue)
      val rewrite = PartitionStateRewrite.Memory(keySchema, stateSchema, checkpointIds = true,
        "lz4", hadoopConf.toMap)
      val operatorDir = new File(root, "1000").getAbsolutePath
      val records = rewrite.read(operatorDir, 0, 3, Some(ids(2))).toSeq
      assert(records.map(r => keyOf(r.key)).toSet == Set(1L, 2L, 3L))
      val written = rewrite.write(operatorDir, 0, 4, records.iterator)
      assert(written.keys == 3 && written.id.isDefined && !ids.contains(written.id.get))
      assert(names(root).contains(s"4_${written.id.get}.snapshot"))
      // The restarted query runs the next batch on the version the repartition's commit names.
      val next = commit(provider(root), 4, written.id, key = 5)
      assert(keys(provider(root), 5, next) == Set(1, 2, 3, 5))
    }
  }

  private def keyOf(bytes: Array[Byte]): Long = {
    val key = new UnsafeRow(1)
    key.pointTo(bytes, bytes.length)
    key.getLong(0)
  }
}
