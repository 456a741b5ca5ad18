package io.mapwithstate

import java.util.Properties

/**
 * This plugin's version (`build.sbt`'s, generated into the jar as `version.properties`), which
 * a checkpoint records beside the format versions it was written with, so that a later release
 * can tell what wrote it and an error about a checkpoint can name both.
 */
object PluginVersion {

  /** The version, or "unknown" for classes not loaded from a build (none is missing in one). */
  lazy val current: String = {
    val properties = new Properties()
    Option(getClass.getResourceAsStream("version.properties")).foreach { in =>
      try properties.load(in)
      finally in.close()
    }
    properties.getProperty("version", "unknown")
  }
}
