package io.mapwithstate

import java.io.File
import java.nio.file.Files

/** A fresh temporary directory per test body, deleted with everything in it afterwards. */
trait TempDirs {
  protected def withDir(body: File => Unit): Unit = {
    val dir = Files.createTempDirectory("mapwithstate-test").toFile
    try body(dir)
    finally TempDirs.deleteRecursively(dir)
  }
}

object TempDirs {
  def deleteRecursively(f: File): Unit = {
    Option(f.listFiles()).foreach(_.foreach(deleteRecursively))
    f.delete()
  }
}
