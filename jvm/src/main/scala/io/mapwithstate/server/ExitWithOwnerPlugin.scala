package io.mapwithstate.server

import java.io.InputStream
import java.util.{Collections, Map => JMap}

import org.apache.spark.SparkContext
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, PluginContext, SparkPlugin}

/**
 * Ends the driver JVM when the process that started it is gone, however it went (a crashed
 * notebook kernel, `kill -9`): the local server's Python owner keeps the write end of a pipe on
 * this JVM's standard input, and the kernel closes it when the owner dies, so the end of that
 * input means "no owner any more". Without this an orphaned server would go on serving.
 *
 * Only for a driver whose standard input is such a pipe — `mapwithstate.LocalConnectServer`
 * sets it with `spark.plugins`. A driver started with standard input at end of file (a daemon
 * started by `start-connect-server.sh`) would stop at once: do not configure it there.
 */
class ExitWithOwnerPlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = new DriverPlugin {
    override def init(sc: SparkContext, context: PluginContext): JMap[String, String] = {
      ExitWithOwnerPlugin.watch(System.in)
      Collections.emptyMap()
    }
  }

  override def executorPlugin(): ExecutorPlugin = null
}

object ExitWithOwnerPlugin {

  /** How long Spark's shutdown hooks may take before the JVM is halted regardless. */
  val GracePeriodMillis: Long = 10000L

  /** Starts a daemon thread that exits the JVM once `input` reaches its end (or fails). */
  def watch(input: InputStream): Unit = {
    val watcher = new Thread(() => {
        drain(input)
        // exit runs Spark's shutdown hooks (stopping the SparkContext); should one of them hang,
        // the halter ends the JVM anyway, so an ownerless server never lingers.
        val halter = new Thread(() => {
            Thread.sleep(GracePeriodMillis)
            Runtime.getRuntime.halt(1)
          }, "mapwithstate-owner-halt")
        halter.setDaemon(true)
        halter.start()
        System.err.println("mapwithstate: the process that started this server is gone " +
          "(its pipe on standard input closed); stopping")
        System.exit(0)
      }, "mapwithstate-owner-watch")
    watcher.setDaemon(true)
    watcher.start()
  }

  private def drain(input: InputStream): Unit = {
    val buffer = new Array[Byte](256)
    try {
      while (input.read(buffer) >= 0) {}
    } catch {
      case _: java.io.IOException => // a broken pipe means the owner is gone, too
    }
  }
}
