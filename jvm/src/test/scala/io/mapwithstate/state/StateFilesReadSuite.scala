package io.mapwithstate.state

import java.io.{File, IOException, RandomAccessFile}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

/**
 * What the state reader reads, from files a real [[DeltaChainStateStoreProvider]] wrote: a
 * version through [[StateVersionLoader]] with a read-only [[StateCheckpointFiles]], and a
 * delta's records through [[StateMapSerde.readDeltaRecords]].
 */
class StateFilesReadSuite extends AnyFunSuite with HeapStoreFixture {

  private def withCommitted(versions: Int, snapshotInterval: Int)(body: File => Unit): Unit =
    withDir { root =>
      val p = heapProvider(root,
        Map(DeltaChainStateStoreProvider.SnapshotIntervalOption -> snapshotInterval.toString))
      commitVersions(p, versions)
      // Snapshots are written off the commit, in the background: settle them (maintenance waits
      // for a write in flight and writes what is due) so the files stop changing.
      p.doMaintenance()
      p.close()
      body(partitionDir(root))
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
    withDir { root =>
      val dir = new File(root, "absent")
      val files = readOnly(dir)
      assert(!dir.exists())
      val error = intercept[IllegalStateException](files.write(files.deltaFile(1))(_ => ()))
      assert(error.getMessage.contains("read-only"))
      assert(!dir.exists())
    }
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
