package io.mapwithstate.state

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8

import io.mapwithstate.TempDirs
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileAlreadyExistsException, LocalFileSystem, Path}
import org.scalatest.funsuite.AnyFunSuite

class LocalCheckpointFileManagerSuite extends AnyFunSuite with TempDirs {

  private def manager(dir: File, conf: Configuration = new Configuration())
      : LocalCheckpointFileManager = new LocalCheckpointFileManager(new Path(dir.toURI), conf)

  private def write(m: LocalCheckpointFileManager, path: Path, text: String,
      overwrite: Boolean = true): Unit = {
    val out = m.createAtomic(path, overwrite)
    out.write(text.getBytes(UTF_8))
    out.close()
  }

  private def read(m: LocalCheckpointFileManager, path: Path): String = {
    val in = m.open(path)
    try new String(in.readAllBytes(), UTF_8)
    finally in.close()
  }

  test("a file appears under its name only when closed, complete, and without a .crc file") {
    withDir { dir =>
      val m = manager(dir)
      val path = new Path(new Path(dir.toURI), "1.delta")
      val out = m.createAtomic(path, overwriteIfPossible = true)
      out.write("half".getBytes(UTF_8))
      out.flush()
      assert(!m.exists(path), "visible before close")
      out.write(" and the rest".getBytes(UTF_8))
      out.close()
      out.close() // idempotent
      assert(read(m, path) == "half and the rest")
      assert(dir.list().toSet == Set("1.delta"), "no temporary or .crc file is left")
    }
  }

  test("overwrite replaces a file; without it an existing file is kept and the write fails") {
    withDir { dir =>
      val m = manager(dir)
      val path = new Path(new Path(dir.toURI), "0")
      write(m, path, "first")
      write(m, path, "second")
      assert(read(m, path) == "second")
      val error = intercept[FileAlreadyExistsException](write(m, path, "third", overwrite = false))
      assert(error.getMessage.contains(new File(dir, "0").getPath))
      assert(read(m, path) == "second")
      write(m, new Path(new Path(dir.toURI), "1"), "new", overwrite = false)
      assert(dir.list().toSet == Set("0", "1"))
    }
  }

  test("a cancelled write leaves nothing behind, not even its temporary file") {
    withDir { dir =>
      val m = manager(dir)
      val path = new Path(new Path(dir.toURI), "2.snapshot")
      val out = m.createAtomic(path, overwriteIfPossible = true)
      out.write("partial".getBytes(UTF_8))
      out.cancel()
      out.close() // no effect after cancel
      assert(!m.exists(path))
      assert(dir.list().isEmpty)
    }
  }

  test("lists, makes directories, deletes, and qualifies the checkpoint directory locally") {
    withDir { dir =>
      val root = new Path(new File(dir, "ck").getAbsolutePath) // scheme-less: default FS is local
      val m = new LocalCheckpointFileManager(root, new Configuration())
      assert(m.isLocal)
      val qualified = m.createCheckpointDirectory()
      assert(qualified.toUri.getScheme == "file")
      m.mkdirs(new Path(root, "a/b"))
      write(m, new Path(root, "a/b/1"), "x")
      write(m, new Path(root, "a/b/2"), "y")
      assert(m.list(new Path(root, "a/b"), (p: Path) => p.getName == "2").map(_.getPath.getName)
        .toSeq == Seq("2"))
      assert(m.list(new Path(root, "a/b")).map(_.getLen).toSeq == Seq(1L, 1L))
      m.delete(new Path(root, "a/b/1"))
      m.delete(new Path(root, "a/b/1")) // already gone: no error
      assert(!m.exists(new Path(root, "a/b/1")))
      m.delete(new Path(root, "a"))
      assert(!new File(dir, "ck/a").exists())
    }
  }

  test("paths on other file systems go through Spark's own checkpoint file manager") {
    withDir { dir =>
      // A default file system of another scheme, served by Hadoop's checksummed local file
      // system: Spark's manager writes through it, which leaves its `.crc` side file.
      val conf = new Configuration()
      conf.set("fs.defaultFS", "other:///")
      conf.set("fs.other.impl", classOf[LocalFileSystem].getName)
      conf.setBoolean("fs.other.impl.disable.cache", true)
      conf.set(LocalCheckpointFileManager.CheckpointFileManagerClassKey,
        classOf[LocalCheckpointFileManager].getName)
      val root = new Path(dir.getAbsolutePath)
      val m = new LocalCheckpointFileManager(root, conf)
      assert(!m.handlesLocally(root))
      assert(m.handlesLocally(new Path(dir.toURI)))
      write(m, new Path(root, "0"), "delegated")
      assert(read(m, new Path(root, "0")) == "delegated")
      assert(new File(dir, ".0.crc").exists(), "written by Hadoop's file system, not by ours")
      write(m, new Path(new Path(dir.toURI), "1"), "local")
      assert(!new File(dir, ".1.crc").exists())
    }
  }
}
