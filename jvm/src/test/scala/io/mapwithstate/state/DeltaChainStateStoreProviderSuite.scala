package io.mapwithstate.state

import java.io.{File, IOException, RandomAccessFile}
import java.util.concurrent.{CountDownLatch, TimeUnit}

import org.apache.hadoop.fs.Path
import org.apache.spark.sql.internal.SQLConf
import org.scalatest.funsuite.AnyFunSuite

class DeltaChainStateStoreProviderSuite extends AnyFunSuite with HeapStoreFixture {

  private def provider(root: File, snapshotInterval: Int = 10, minVersionsToRetain: Int = 100,
      snapshotDeltaBytes: Long = DeltaChainStateStoreProvider.DefaultSnapshotDeltaBytes,
      deltaChainThreshold: Int = StateMap.DefaultDeltaChainThreshold,
      snapshotDeltaRatio: Double = DeltaChainStateStoreProvider.DefaultSnapshotDeltaRatio,
      partition: Int = 0)
      : DeltaChainStateStoreProvider = {
    val sqlConf = new SQLConf()
    sqlConf.setConfString(SQLConf.MIN_BATCHES_TO_RETAIN.key, minVersionsToRetain.toString)
    heapProvider(root,
      Map(DeltaChainStateStoreProvider.SnapshotIntervalOption -> snapshotInterval.toString,
        DeltaChainStateStoreProvider.SnapshotDeltaBytesOption -> snapshotDeltaBytes.toString,
        DeltaChainStateStoreProvider.DeltaChainThresholdOption -> deltaChainThreshold.toString,
        DeltaChainStateStoreProvider.SnapshotDeltaRatioOption -> snapshotDeltaRatio.toString),
      sqlConf, partition)
  }

  private def contents(p: DeltaChainStateStoreProvider, version: Long): Map[Long, (Long, Long)] =
    p.load(version).getAll().map(e => e.key.getLong(0) -> (e.state.getLong(0), e.updateTime)).toMap

  private def expected(version: Int): Map[Long, (Long, Long)] =
    (math.max(1, version - 1) to version).map(v => v.toLong -> (v.toLong, v * 10L)).toMap

  /**
   * Runs maintenance on a fresh provider that has loaded `version` and finds a snapshot due at
   * any delta size, so that a snapshot of `version` is written by maintenance alone (a commit
   * that finds one due would start a background write, and the tests could not tell which).
   */
  private def maintain(root: File, version: Int, minVersionsToRetain: Int = 100): Unit = {
    val p = provider(root, snapshotInterval = 1000, minVersionsToRetain = minVersionsToRetain,
      snapshotDeltaBytes = 1)
    p.load(version)
    p.doMaintenance()
  }

  test("a new provider reloads every committed version from the checkpoint files") {
    withDir { root =>
      commitVersions(provider(root), 7)
      val reloaded = provider(root)
      (1 to 7).foreach(v => assert(contents(reloaded, v) == expected(v), s"version $v"))
    }
  }

  test(
    "a commit writes only its delta; maintenance writes the due snapshot of the newest version") {
    withDir { root =>
      // A cadence the commits cannot reach by versions, so no background snapshot starts.
      val p = provider(root, snapshotInterval = 1000)
      commitVersions(p, 4)
      assert(names(root) == (1 to 4).map(v => s"$v.delta").toSet)
      maintain(root, 4)
      assert(names(root) == (1 to 4).map(v => s"$v.delta").toSet + "4.snapshot")
      (1 to 4).foreach(v => new File(partitionDir(root), s"$v.delta").delete())
      assert(contents(provider(root), 4) == expected(4))
    }
  }

  test("a commit that makes a snapshot due has it written in the background") {
    withDir { root =>
      val p = provider(root, snapshotInterval = 3)
      // The background writer writes the newest version due when it runs: wait for each
      // snapshot before the next commit, so that it is the version whose commit asked for it.
      def await(name: String): Unit = {
        // Generous: an fsync on a disk busy with other work can take seconds.
        val deadline = System.nanoTime() + 60L * 1000 * 1000 * 1000
        while (!names(root).contains(name) && System.nanoTime() < deadline) Thread.sleep(10)
      }
      commitVersions(p, 3)
      await("3.snapshot")
      commitVersions(p, 6, from = 3)
      await("6.snapshot")
      commitVersions(p, 7, from = 6)
      assert(names(root) == (1 to 7).map(v => s"$v.delta").toSet ++ Set("3.snapshot", "6.snapshot"))
      (1 to 6).foreach(v => new File(partitionDir(root), s"$v.delta").delete())
      assert(contents(provider(root, snapshotInterval = 3), 7) == expected(7))
    }
  }

  test("a damaged newest snapshot falls back to the snapshot before it plus the deltas") {
    withDir { root =>
      val p = provider(root, snapshotInterval = 1000)
      commitVersions(p, 3)
      maintain(root, 3)
      commitVersions(p, 6, from = 3)
      maintain(root, 6)
      assert(names(root).filter(_.endsWith(".snapshot")) == Set("3.snapshot", "6.snapshot"))
      val newest = new File(partitionDir(root), "6.snapshot")
      val f = new RandomAccessFile(newest, "rw")
      try f.setLength(f.length() / 2)
      finally f.close()
      (1 to 3).foreach(v => new File(partitionDir(root), s"$v.delta").delete())
      assert(contents(provider(root), 6) == expected(6))
      // With the older snapshot damaged too, the load fails naming the newest damaged file.
      new File(partitionDir(root), "3.snapshot").delete()
      val error = intercept[IOException](provider(root).load(6))
      assert(error.getMessage.contains(newest.getAbsolutePath))
      assert(error.getMessage.contains("truncated"))
    }
  }

  test("an aborted version leaves the committed state as it was for the retry") {
    withDir { root =>
      val p = provider(root)
      commitVersions(p, 2)
      val failed = p.getStore(2, None, false, false).asInstanceOf[DeltaChainStateStore]
      failed.stateMap.put(row(99), row(99), 990L)
      failed.stateMap.remove(row(2))
      failed.abort()
      assert(!failed.hasCommitted)
      assert(contents(p, 2) == expected(2))
      commitVersions(p, 3)
      assert(contents(provider(root), 3) == expected(3))
    }
  }

  test("a delta written through the provider with closes deferred is durable once awaited, " +
    "and a failed close fails the wait naming the file and leaves the version to be re-run") {
    withDir { root =>
      val p = provider(root)
      val dir = partitionDir(root)
      val closes = DeferredCloses.forTask()
      commitVersions(p, 2, closes = Some(closes))
      closes.awaitAll()
      assert(dir.list().toSet.filter(_.endsWith(".delta")) == Set("1.delta", "2.delta"))
      assert(dir.list().forall(!_.endsWith(".tmp")))

      // Version 3's close fails: its temporary file is gone before the rename.
      val store = p.getStore(2, None, Some(closes))
      store.stateMap.put(row(3), row(3), 30L)
      // Keep every close thread busy first, so version 3's close is still queued below.
      val hold = new CountDownLatch(1)
      val holders = (1 to DeferredCloses.Threads).map(_ => new DeferredCloses(1))
      holders.foreach(_.defer(new Path("/hold"))(() => hold.await(10, TimeUnit.SECONDS)))
      val before = DeferredCloses.deferredCount
      store.commit()
      assert(DeferredCloses.deferredCount == before + 1)
      dir.listFiles().filter(_.getName.endsWith(".tmp")).foreach(f => assert(f.delete()))
      hold.countDown()
      holders.foreach(_.awaitAll())
      val e = intercept[IOException](closes.awaitAll())
      assert(e.getMessage.contains("3.delta"), e.getMessage)
      assert(!new File(dir, "3.delta").exists())
      assert(dir.list().forall(!_.endsWith(".tmp")))

      // The re-run of version 3 (a retried task) starts from version 2 and writes it again.
      commitVersions(p, 3, from = 2)
      val reloaded = provider(root)
      assert(contents(reloaded, 3) == expected(3))
    }
  }

  test("a corrupted delta file fails the load with an error naming the file") {
    withDir { root =>
      commitVersions(provider(root), 3)
      val delta = new File(partitionDir(root), "2.delta")
      assert(!new File(partitionDir(root), ".2.delta.crc").exists())
      val f = new RandomAccessFile(delta, "rw")
      try { f.seek(f.length() - 6); val b = f.read(); f.seek(f.length() - 6); f.write(b ^ 0xff) }
      finally f.close()
      val error = intercept[IOException](provider(root).load(3))
      assert(error.getMessage.contains(s"cannot load mapWithState state file"))
      assert(error.getMessage.contains(delta.getAbsolutePath))
      assert(error.getMessage.contains("corrupt"))
    }
  }

  test("a truncated snapshot file fails the load with an error naming the file") {
    withDir { root =>
      commitVersions(provider(root, snapshotInterval = 1000), 2)
      maintain(root, 2)
      val snapshot = new File(partitionDir(root), "2.snapshot")
      assert(!new File(partitionDir(root), ".2.snapshot.crc").exists())
      val f = new RandomAccessFile(snapshot, "rw")
      try f.setLength(f.length() / 2)
      finally f.close()
      val error = intercept[IOException](provider(root).load(2))
      assert(error.getMessage.contains(snapshot.getAbsolutePath))
      assert(error.getMessage.contains("truncated"))
    }
  }

  test("a missing delta file fails the load with an error naming the file") {
    withDir { root =>
      commitVersions(provider(root), 3)
      val delta = new File(partitionDir(root), "2.delta")
      delta.delete()
      val error = intercept[IOException](provider(root).load(3))
      assert(error.getMessage.contains(s"the delta file ${delta.getAbsolutePath} is missing"))
    }
  }

  test("maintenance deletes the files that no retained version needs, keeping a fallback") {
    withDir { root =>
      val p = provider(root, snapshotInterval = 1000)
      (3 to 12 by 3).foreach { v =>
        commitVersions(p, v, from = v - 3)
        maintain(root, v, minVersionsToRetain = 4)
      }
      // Versions 9..12 are retained: the snapshot at 9 (or, if it is damaged, the one at 6)
      // and the deltas after it rebuild them.
      assert(names(root) == Set("6.snapshot", "9.snapshot", "12.snapshot") ++
        (7 to 12).map(v => s"$v.delta"))
      val reloaded = provider(root, minVersionsToRetain = 4)
      (9 to 12).foreach(v => assert(contents(reloaded, v) == expected(v), s"version $v"))
    }
  }

  test("a version commits one delta layer over the previous version, not a copy of it") {
    withDir { root =>
      val p = provider(root)
      commitVersions(p, 1)
      val committed = p.load(1)
      val store = p.getStore(1, None, false, false).asInstanceOf[DeltaChainStateStore]
      assert(store.stateMap.deltaChainLength == committed.deltaChainLength + 1)
      assert(store.stateMap.size == 1)
      store.abort()
    }
  }

  test(
    "a long chain is compacted in the background and the next batch runs on the compacted base") {
    withDir { root =>
      // Threshold 8: compactions start at 3 layers, so a task would compact inline at 8.
      val p = provider(root, snapshotInterval = 1000, deltaChainThreshold = 8)
      val rnd = new scala.util.Random(7)
      var model = Map.empty[Long, (Long, Long)]
      var compactedBases = 0
      (0 until 60).foreach { v =>
        // Sometimes let the background finish before the next batch, sometimes not — but
        // always once the chain is two layers short of the inline threshold: the margin the
        // background starts with is meant for batches of ~100 ms, where these take ~2 ms and
        // the one background thread of the JVM may still be busy with another test's work.
        if (v % 6 == 0 || p.load(v).deltaChainLength >= 6) {
          val deadline = System.nanoTime() + 10L * 1000 * 1000 * 1000
          while (!p.compactionReady && p.load(v).deltaChainLength >= 3 &&
            System.nanoTime() < deadline) Thread.sleep(5)
        }
        val ready = p.compactionReady
        val before = p.load(v).deltaChainLength
        val store = p.getStore(v, None, false, false).asInstanceOf[DeltaChainStateStore]
        if (ready) {
          // On the compacted base: only the layers committed since the compaction started.
          compactedBases += 1
          assert(store.stateMap.deltaChainLength <= before - 2, s"version $v: ${store.stateMap}")
        }
        assert(store.stateMap.deltaChainLength < 8, s"version $v: ${store.stateMap}")
        (0 until 20).foreach { _ =>
          val k = rnd.nextInt(50).toLong
          if (rnd.nextInt(4) == 0) {
            store.stateMap.remove(row(k))
            model -= k
          } else {
            store.stateMap.put(row(k), row(v * 100L + k), v.toLong)
            model += k -> (v * 100L + k, v.toLong)
          }
        }
        assert(store.commit() == v + 1)
        assert(contents(p, v + 1) == model, s"version ${v + 1}")
      }
      assert(compactedBases > 0, "no batch ran on a background compaction")
      // What the files say is the same.
      assert(contents(provider(root), 60) == model)
    }
  }

  test("the partitions of a query start compacting their long chains on different turns") {
    // Each partition gains a layer per version; the default threshold (20) starts background
    // compactions at 15 layers, and on a partition's turn from 12.
    def startOf(partition: Int): (Long, Int) = {
      var start: Option[(Long, Int)] = None
      withDir { root =>
        val p = provider(root, snapshotInterval = 1000, partition = partition)
        start = (0 until 20).iterator.map { v =>
          commitVersions(p, v + 1, from = v)
          (v + 1L, p.load(v + 1).deltaChainLength, p.compactionPending)
        }.collectFirst { case (version, length, true) => (version, length) }
      }
      start.getOrElse(fail(s"partition $partition started no compaction in 20 versions"))
    }
    // Runs of consecutive partitions (one executor in local mode) and every fourth partition
    // (a cluster of four executors may hold those) alike.
    Seq(0 to 3, 4 to 7, Seq(0, 4, 8, 12), Seq(1, 3, 5, 7)).foreach { partitions =>
      val starts = partitions.map(startOf)
      assert(starts.map(_._1).distinct.size == partitions.size, s"$partitions: $starts")
      starts.foreach { case (_, length) => assert(length >= 12 && length <= 15, s"$starts") }
    }
  }

  test("under full churn the early compaction is started in the background a batch ahead") {
    withDir { root =>
      // 40k keys all rewritten by every version: the chain passes the early limit (twice the
      // keys plus 64k entries) every few versions, long before the length threshold (20).
      val p = provider(root, snapshotInterval = 1000)
      val keys = 40000
      var started = 0
      (0 until 12).foreach { v =>
        if (p.compactionPending) {
          started += 1
          val deadline = System.nanoTime() + 30L * 1000 * 1000 * 1000
          while (!p.compactionReady && System.nanoTime() < deadline) Thread.sleep(5)
        }
        val store = p.getStore(v, None, false, false).asInstanceOf[DeltaChainStateStore]
        // The version the copy was made of (rebased when the compaction was ready) did not need
        // compacting, so the copy did not compact in the task.
        assert(!p.load(v).shouldCompact, s"version $v compacted in the task: ${p.load(v)}")
        (0 until keys).foreach(k => store.stateMap.put(row(k), row(v * 1000000L + k), v.toLong))
        assert(store.commit() == v + 1)
      }
      assert(started >= 3, s"$started background compactions in 12 versions of full churn")
      val expected = (0 until keys).map(k => k.toLong -> (11 * 1000000L + k, 11L)).toMap
      assert(contents(p, 12) == expected)
      assert(contents(provider(root), 12) == expected)
    }
  }

  test("a large state with small batches waits for its deltas to add up before a snapshot") {
    def snapshotsAfter(ratio: Double, awaited: Set[Long]): Set[String] = {
      var snapshots = Set.empty[String]
      withDir { root =>
        val p = provider(root, snapshotInterval = 2, snapshotDeltaRatio = ratio)
        (0 until 22).foreach { v =>
          val store = p.getStore(v, None, false, false).asInstanceOf[DeltaChainStateStore]
          val keys = if (v == 0) 0L until 300000L else 0L until 10L
          keys.foreach(k => store.stateMap.put(row(k), row(v * 10L + k), v.toLong))
          store.commit()
          // Each snapshot the cadence asks for is written before the next batch, so the
          // background writer never skips a version by writing a newer one.
          val deadline = System.nanoTime() + 30L * 1000 * 1000 * 1000
          while (awaited.contains(v + 1L) && !names(root).contains(s"${v + 1}.snapshot") &&
            System.nanoTime() < deadline) Thread.sleep(10)
        }
        Thread.sleep(500) // a background snapshot not awaited would be written by now
        p.doMaintenance()
        val model = (0L until 300000L).map(k => k -> (if (k < 10) (210L + k, 21L) else (k, 0L)))
        assert(contents(provider(root), 22) == model.toMap)
        snapshots = names(root).filter(_.endsWith(".snapshot"))
      }
      snapshots
    }
    // A 300k-key snapshot is several MB, and 10-key deltas never reach half of it; nor does a
    // snapshot right after the load spare a reload anything (the load's delta holds about
    // what it would): the first snapshot comes at the latest after 10 × the interval.
    assert(snapshotsAfter(DeltaChainStateStoreProvider.DefaultSnapshotDeltaRatio, Set(20L)) ==
      Set("20.snapshot"))
    // Ratio 0: every other version, as the interval says.
    val everyOther = (1 to 11).map(i => 2L * i).toSet
    assert(snapshotsAfter(0.0, everyOther) == everyOther.map(v => s"$v.snapshot"))
  }
}
