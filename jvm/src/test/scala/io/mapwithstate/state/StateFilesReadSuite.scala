package io.mapwithstate.state

import java.io.{File, IOException, RandomAccessFile}
import java.nio.file.Files

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  StateStoreConf,
  StateStoreId
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{LongType, StructType}
import org.scalatest.funsuite.AnyFunSuite

/**
 * What the state reader reads, from files a real [[DeltaChainStateStoreProvider]] wrote: a
 * version through [[StateVersionLoader]] with a read-only [[StateCheckpointFiles]], and a
 * delta's records through [[StateMapSerde.readDeltaRecords]].
 */
class StateFilesReadSuite extends AnyFunSuite {

  private val keySchema = new StructType().add("k", LongType)
  private val stateSchema = new StructType().add("n", LongType)
  private val project = UnsafeProjection.create(Seq(BoundReference(0, LongType, nullable = true)))

  private def row(v: Long): UnsafeRow = project(InternalRow(v)).copy()

  private def withCommitted(versions: Int, snapshotInterval: Int)(body: File => Unit): Unit = {
    val root = Files.createTempDirectory("mws-read").toFile
    try {
      val storeConf = new StateStoreConf(new SQLConf(),
        Map(DeltaChainStateStoreProvider.SnapshotIntervalOption -> snapshotInterval.toString))
      val p = new DeltaChainStateStoreProvider
      p.init(StateStoreId(root.getAbsolutePath, 1000L, 0), keySchema, stateSchema,
        NoPrefixKeyStateEncoderSpec(keySchema), false, storeConf, new Configuration(), false, None)
      // Version v sets key v to v and removes key v - 2.
      (0 until versions).foreach { v =>
        val store = p.getStore(v, None, false, false).asInstanceOf[DeltaChainStateStore]
        store.stateMap.put(row(v + 1), row(v + 1), (v + 1) * 10L)
        if (v - 1 >= 1) store.stateMap.remove(row(v - 1))
        store.commit()
      }
      // Snapshots are written off the commit, in the background: settle them (maintenance waits
      // for a write in flight and writes what is due) so the files stop changing.
      p.doMaintenance()
      p.close()
      body(new File(root, "1000/0"))
    } finally deleteRecursively(root)
  }

  private def deleteRecursively(f: File): Unit = {
    Option(f.listFiles()).foreach(_.foreach(deleteRecursively))
    f.delete()
  }

  private def readOnly(dir: File) =
    new StateCheckpointFiles(new Path(dir.getAbsolutePath), new Configuration(), readOnly = true)

  private def load(dir: File, version: Long): Map[Long, (Long, Long)] =
    StateVersionLoader.load(readOnly(dir), version, 1, 1, StateMap.DefaultDeltaChainThreshold)
      .getAll().map(e => e.key.getLong(0) -> (e.state.getLong(0), e.updateTime)).toMap

  private def listing(dir: File): Set[(String, Long)] =
    dir.listFiles().map(f => f.getName -> f.lastModified()).toSet

  test("every committed version loads from snapshots and deltas, and reading writes nothing") {
    withCommitted(7, snapshotInterval = 3) { dir =>
      val before = listing(dir)
      (1 to 7).foreach { v =>
        val expected = (math.max(1, v - 1) to v).map(k => k.toLong -> (k.toLong, k * 10L)).toMap
        assert(load(dir, v) == expected, s"version $v")
      }
      assert(load(dir, 0).isEmpty)
      assert(listing(dir) == before)
    }
  }

  test("a read-only view of a missing directory creates nothing and refuses writes") {
    val dir = new File(Files.createTempDirectory("mws-read").toFile, "absent")
    val files = readOnly(dir)
    assert(!dir.exists())
    val error = intercept[IllegalStateException](files.write(files.deltaFile(1))(_ => ()))
    assert(error.getMessage.contains("read-only"))
    assert(!dir.exists())
    dir.getParentFile.delete()
  }

  test("a delta's records are its version's puts and removals") {
    withCommitted(4, snapshotInterval = 10) { dir =>
      val files = readOnly(dir)
      val records = files.read(files.deltaFile(4))(StateMapSerde.readDeltaRecords(_, 1, 1))
      val seen = records.map(r =>
        (r.key.getLong(0), Option(r.state).map(_.getLong(0)),
          r.isRemoval)).toSet
      assert(seen == Set((4L, Some(4L), false), (2L, None, true)))
      assert(records.find(!_.isRemoval).get.updateTime == 40L)
    }
  }

  test("a damaged delta yields no records and an error naming the file") {
    withCommitted(3, snapshotInterval = 10) { dir =>
      val delta = new File(dir, "2.delta")
      new File(dir, ".2.delta.crc").delete()
      val f = new RandomAccessFile(delta, "rw")
      try { f.seek(f.length() - 6); val b = f.read(); f.seek(f.length() - 6); f.write(b ^ 0xff) }
      finally f.close()
      val files = readOnly(dir)
      val error = intercept[IOException](
        files.read(files.deltaFile(2))(StateMapSerde.readDeltaRecords(_, 1, 1)))
      assert(error.getMessage.contains(delta.getAbsolutePath))
      assert(error.getMessage.contains("corrupt"))
      val loadError = intercept[IOException](load(dir, 3))
      assert(loadError.getMessage.contains(delta.getAbsolutePath))
    }
  }
}
