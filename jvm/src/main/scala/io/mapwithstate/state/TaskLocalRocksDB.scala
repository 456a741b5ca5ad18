package io.mapwithstate.state

import java.nio.file.{Files, Path}

import org.apache.hadoop.conf.Configuration
import org.apache.spark.TaskContext
import org.apache.spark.network.util.JavaUtils
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  StateStoreConf,
  StateStoreId,
  StateStoreProvider
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.StructType

/**
 * The state of one task of a batch replay kept in RocksDB on the executor's local disk, so a
 * large replay spills rather than fills the heap: Spark's RocksDB state store, opened on a
 * fresh temporary checkpoint location and never committed (nothing needs to outlive the task),
 * under the backend's RocksDB settings. It is aborted and closed, and its files deleted, when
 * the task ends, failed or not.
 */
object TaskLocalRocksDB {

  /** A new, empty state map in RocksDB, for the task running on this thread. */
  def open(keySchema: StructType, stateType: StructType, sqlConfs: Map[String, String])
      : StateMap = {
    val context = TaskContext.get()
    require(context != null, "a task-local RocksDB state is opened in a task")
    val root = Files.createTempDirectory(localDir(), "mapwithstate-replay-")
    val conf = new SQLConf
    sqlConfs.foreach { case (k, v) => conf.setConfString(k, v) }
    val provider = StateStoreProvider.create(StateBackend.RocksDB.ProviderClass)
    val store =
      try {
        provider.init(StateStoreId(root.toUri.toString, 0L, context.partitionId()), keySchema,
          StoreBackedStateMap.valueSchema(stateType), NoPrefixKeyStateEncoderSpec(keySchema),
          true, new StateStoreConf(conf), hadoopConf(), false, None)
        provider.getStore(0L, None, false, false)
      } catch {
        case e: Throwable =>
          close(provider, root)
          throw e
      }
    context.addTaskCompletionListener[Unit] { _ =>
      try store.abort()
      finally close(provider, root)
    }
    new StoreBackedStateMap(store, keySchema, stateType)
  }

  /**
   * Spark's provider takes the streaming run's id from the Hadoop conf (it names the run that
   * holds the RocksDB instance); a task-local store is a run of its own. `base`: the file
   * systems' settings, for a store whose files are a query's checkpoint.
   */
  def hadoopConf(base: Configuration = new Configuration()): Configuration = {
    val conf = new Configuration(base)
    conf.set(RunIdKey, java.util.UUID.randomUUID().toString)
    conf
  }

  /** `StreamExecution.RUN_ID_KEY`. */
  private val RunIdKey = "sql.streaming.runId"

  private def close(provider: StateStoreProvider, root: Path): Unit =
    try provider.close()
    finally JavaUtils.deleteRecursively(root.toFile)

  /** The first of Spark's local directories (`spark.local.dir`), or the JVM's temp dir. */
  private def localDir(): Path = {
    val dirs = Option(System.getenv("SPARK_LOCAL_DIRS"))
      .orElse(Option(org.apache.spark.SparkEnv.get).flatMap(_.conf.getOption("spark.local.dir")))
      .getOrElse(System.getProperty("java.io.tmpdir"))
    val dir = java.nio.file.Paths.get(dirs.split(",").head.trim)
    Files.createDirectories(dir)
  }
}
