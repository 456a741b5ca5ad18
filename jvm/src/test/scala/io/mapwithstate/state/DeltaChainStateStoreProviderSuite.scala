package io.mapwithstate.state

import java.io.{File, IOException, RandomAccessFile}
import java.nio.file.Files

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state.{NoPrefixKeyStateEncoderSpec, StateStoreConf, StateStoreId}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{LongType, StructType}
import org.scalatest.funsuite.AnyFunSuite

class DeltaChainStateStoreProviderSuite extends AnyFunSuite {

  private val keySchema = new StructType().add("k", LongType)
  private val stateSchema = new StructType().add("n", LongType)
  private val project = UnsafeProjection.create(Seq(BoundReference(0, LongType, nullable = true)))

  private def row(v: Long): UnsafeRow = project(InternalRow(v)).copy()

  private def provider(root: File, snapshotInterval: Int = 10, minVersionsToRetain: Int = 100)
    : DeltaChainStateStoreProvider = {
    val sqlConf = new SQLConf()
    sqlConf.setConfString(SQLConf.MIN_BATCHES_TO_RETAIN.key, minVersionsToRetain.toString)
    val storeConf = new StateStoreConf(sqlConf,
      Map(DeltaChainStateStoreProvider.SnapshotIntervalOption -> snapshotInterval.toString))
    val p = new DeltaChainStateStoreProvider
    p.init(StateStoreId(root.getAbsolutePath, 1000L, 0), keySchema, stateSchema,
      NoPrefixKeyStateEncoderSpec(keySchema), false, storeConf, new Configuration(), false, None)
    p
  }

  private def withDir(body: File => Unit): Unit = {
    val dir = Files.createTempDirectory("mws-provider").toFile
    try body(dir) finally deleteRecursively(dir)
  }

  private def deleteRecursively(f: File): Unit = {
    Option(f.listFiles()).foreach(_.foreach(deleteRecursively))
    f.delete()
  }

  /** Commits versions 1..n: version v sets key v to v and removes key v - 2. */
  private def commitVersions(p: DeltaChainStateStoreProvider, n: Int): Unit =
    (0 until n).foreach { v =>
      val store = p.getStore(v, None, false, false).asInstanceOf[DeltaChainStateStore]
      store.stateMap.put(row(v + 1), row(v + 1), (v + 1) * 10L)
      if (v - 1 >= 1) store.stateMap.remove(row(v - 1))
      assert(store.commit() == v + 1)
    }

  private def contents(p: DeltaChainStateStoreProvider, version: Long): Map[Long, (Long, Long)] =
    p.load(version).getAll().map(e => e.key.getLong(0) -> (e.state.getLong(0), e.updateTime)).toMap

  private def expected(version: Int): Map[Long, (Long, Long)] =
    (math.max(1, version - 1) to version).map(v => v.toLong -> (v.toLong, v * 10L)).toMap

  private def partitionDir(root: File): File = new File(root, "1000/0")

  test("a new provider reloads every committed version from the checkpoint files") {
    withDir { root =>
      commitVersions(provider(root), 7)
      val reloaded = provider(root)
      (1 to 7).foreach(v => assert(contents(reloaded, v) == expected(v), s"version $v"))
    }
  }

  test("a snapshot is written every checkpoint interval and is enough to load its version") {
    withDir { root =>
      commitVersions(provider(root, snapshotInterval = 3), 7)
      val names = partitionDir(root).list().filterNot(_.startsWith(".")).toSet
      assert(names == (1 to 7).map(v => s"$v.delta").toSet ++ Set("3.snapshot", "6.snapshot"))
      (1 to 6).foreach(v => new File(partitionDir(root), s"$v.delta").delete())
      assert(contents(provider(root, snapshotInterval = 3), 7) == expected(7))
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

  test("a corrupted delta file fails the load with an error naming the file") {
    withDir { root =>
      commitVersions(provider(root), 3)
      val delta = new File(partitionDir(root), "2.delta")
      new File(partitionDir(root), ".2.delta.crc").delete()
      val f = new RandomAccessFile(delta, "rw")
      try { f.seek(f.length() - 6); val b = f.read(); f.seek(f.length() - 6); f.write(b ^ 0xFF) }
      finally f.close()
      val error = intercept[IOException](provider(root).load(3))
      assert(error.getMessage.contains(s"cannot load mapWithState state file"))
      assert(error.getMessage.contains(delta.getAbsolutePath))
      assert(error.getMessage.contains("corrupt"))
    }
  }

  test("a truncated snapshot file fails the load with an error naming the file") {
    withDir { root =>
      commitVersions(provider(root, snapshotInterval = 2), 2)
      val snapshot = new File(partitionDir(root), "2.snapshot")
      new File(partitionDir(root), ".2.snapshot.crc").delete()
      val f = new RandomAccessFile(snapshot, "rw")
      try f.setLength(f.length() / 2) finally f.close()
      val error = intercept[IOException](provider(root, snapshotInterval = 2).load(2))
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

  test("maintenance deletes the files that no retained version needs") {
    withDir { root =>
      val p = provider(root, snapshotInterval = 3, minVersionsToRetain = 4)
      commitVersions(p, 10)
      p.doMaintenance()
      // Versions 7..10 are retained; the snapshot at 6 and the deltas after it rebuild them.
      val names = partitionDir(root).list().filterNot(_.startsWith(".")).toSet
      assert(names == Set("6.snapshot", "9.snapshot", "7.delta", "8.delta", "9.delta", "10.delta"))
      val reloaded = provider(root, snapshotInterval = 3, minVersionsToRetain = 4)
      (7 to 10).foreach(v => assert(contents(reloaded, v) == expected(v), s"version $v"))
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
}
