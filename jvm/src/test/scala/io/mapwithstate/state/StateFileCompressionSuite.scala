package io.mapwithstate.state

import java.io.{ByteArrayOutputStream, File, IOException, RandomAccessFile}
import java.nio.charset.StandardCharsets
import java.nio.file.Files

import org.apache.hadoop.fs.Path
import org.apache.spark.sql.internal.SQLConf
import org.scalatest.funsuite.AnyFunSuite

/**
 * The state files as stored ([[StateFileCompression]]): compressed with Spark's state store
 * codec setting, read back whatever they were written with (another codec, or none, as
 * earlier versions wrote them), and damage to the container reported as damage.
 */
class StateFileCompressionSuite extends AnyFunSuite with HeapStoreFixture {

  private val CodecKey = SQLConf.STATE_STORE_COMPRESSION_CODEC.key

  private def provider(root: File, codec: Option[String] = None): DeltaChainStateStoreProvider = {
    val sqlConf = new SQLConf()
    codec.foreach(sqlConf.setConfString(CodecKey, _))
    heapProvider(root, Map(DeltaChainStateStoreProvider.SnapshotIntervalOption -> "2"), sqlConf)
  }

  /** Commits versions `from + 1` to `to`: version v sets keys 0 until 1000 to v. */
  private def commit(p: DeltaChainStateStoreProvider, from: Int, to: Int): Unit = {
    (from until to).foreach { v =>
      val store = p.getStore(v, None, false, false).asInstanceOf[DeltaChainStateStore]
      (0L until 1000L).foreach(k => store.stateMap.put(row(k), row(v + 1L), (v + 1) * 10L))
      store.commit()
    }
    p.doMaintenance()
  }

  private def stateFiles(root: File): Seq[File] =
    partitionDir(root).listFiles().toSeq.filter(_.getName.matches("\\d+\\.(delta|snapshot)"))

  /** Leaves the deltas alone to rebuild every version from. */
  private def deleteSnapshots(root: File): Unit =
    stateFiles(root).filter(_.getName.endsWith(".snapshot")).foreach(_.delete())

  private def load(root: File, version: Long): Map[Long, Long] =
    StateVersionLoader
      .load(partitionFiles(root), version, 1, 1, StateMap.DefaultDeltaChainThreshold)
      .getAll().map(e => e.key.getLong(0) -> e.state.getLong(0)).toMap

  private def expected(version: Long): Map[Long, Long] = (0L until 1000L).map(_ -> version).toMap

  /** The codec a file's header names, or None for a file without one. */
  private def codecOf(file: File): Option[String] = {
    val bytes = Files.readAllBytes(file.toPath)
    if (new String(bytes, 0, 4, StandardCharsets.US_ASCII) != "MWSZ") None
    else Some(new String(bytes, 6, ((bytes(4) & 0xff) << 8) | (bytes(5) & 0xff),
        StandardCharsets.UTF_8))
  }

  /** A file's content as the state format has it (decompressed). */
  private def content(root: File, name: String): Array[Byte] =
    partitionFiles(root).read(new Path(new File(partitionDir(root), name).getAbsolutePath)) { in =>
      val out = new ByteArrayOutputStream()
      in.transferTo(out)
      out.toByteArray
    }

  test("the store's files are compressed with Spark's state store codec, LZ4 by default") {
    withDir { root =>
      commit(provider(root), 0, 3)
      val stored = stateFiles(root)
      assert(stored.count(_.getName.endsWith(".delta")) == 3)
      assert(stored.exists(_.getName.endsWith(".snapshot")))
      stored.foreach(f => assert(codecOf(f).contains("lz4"), f.getName))
      // 1000 records of a bigint key and state: 48 bytes each in the format, mostly zeros.
      val delta = new File(partitionDir(root), "2.delta")
      assert(content(root, "2.delta").length > 48000)
      assert(delta.length() < content(root, "2.delta").length / 4)
      assert(load(root, 3) == expected(3))
    }
    withDir { root =>
      commit(provider(root, Some("zstd")), 0, 2)
      assert(codecOf(new File(partitionDir(root), "2.delta")).contains("zstd"))
      assert(load(root, 2) == expected(2))
    }
  }

  test("files of another codec, or uncompressed as earlier versions wrote them, read back") {
    withDir { root =>
      commit(provider(root, Some("zstd")), 0, 2)
      // Versions 1 and 2 as an earlier version wrote them: the format's bytes as they are.
      val plain = partitionFiles(root)
      stateFiles(root).foreach { file =>
        val bytes = content(root, file.getName)
        plain.write(new Path(file.getAbsolutePath))(_.write(bytes))
        assert(codecOf(file).isEmpty)
      }
      deleteSnapshots(root)
      // A store with the default codec continues the checkpoint: it reloads version 2 from
      // the uncompressed deltas, and its own files are LZ4.
      commit(provider(root), 2, 4)
      assert(codecOf(new File(partitionDir(root), "4.delta")).contains("lz4"))
      assert(load(root, 2) == expected(2))
      assert(load(root, 4) == expected(4))
    }
  }

  test("a damaged compression header or bytes after a file's end are damage, naming the file") {
    withDir { root =>
      commit(provider(root), 0, 3)
      deleteSnapshots(root)
      val delta = new File(partitionDir(root), "3.delta")
      val original = Files.readAllBytes(delta.toPath)
      def loadError(): IOException = {
        val error = intercept[IOException](load(root, 3))
        assert(error.getMessage.contains(s"cannot load mapWithState state file"))
        assert(error.getMessage.contains(delta.getAbsolutePath))
        error
      }
      // The codec's name ("lz4" becomes "lz5"): not an unknown codec, a damaged header.
      val renamed = original.clone()
      renamed(8) = '5'.toByte
      Files.write(delta.toPath, renamed)
      assert(loadError().getMessage.contains("compression header fails its checksum"))
      // The name's length.
      val resized = original.clone()
      resized(5) = 0
      Files.write(delta.toPath, resized)
      assert(loadError().getMessage.contains("corrupt"))
      // Cut within the header.
      Files.write(delta.toPath, original.take(7))
      assert(loadError().getMessage.contains("truncated"))
      // The compressed stream's end marker, after every byte of the state was read.
      val f = new RandomAccessFile(delta, "rw")
      try {
        f.write(original)
        f.seek(f.length() - 6)
        val b = f.read()
        f.seek(f.length() - 6)
        f.write(b ^ 0xff)
      } finally f.close()
      assert(loadError().getMessage.contains("corrupt"))
      Files.write(delta.toPath, original)
      assert(load(root, 3) == expected(3))
      // Bytes after the end of a file's state (here one written uncompressed, whose end is the
      // state format's own).
      val plain = content(root, "3.delta")
      Files.write(delta.toPath, plain ++ Array[Byte](1, 2, 3))
      assert(codecOf(delta).isEmpty)
      assert(loadError().getMessage.contains("bytes after the end of its state"))
    }
  }

  test("a codec Spark does not have fails the store's setup naming the setting") {
    withDir { root =>
      val error = intercept[IllegalArgumentException](provider(root, Some("lz5")))
      assert(error.getMessage.contains(CodecKey))
      assert(error.getMessage.contains("'lz5'"))
    }
  }
}
