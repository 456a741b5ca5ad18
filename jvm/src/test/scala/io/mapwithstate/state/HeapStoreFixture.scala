package io.mapwithstate.state

import java.io.File

import io.mapwithstate.TempDirs
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
import org.scalatest.Assertions

/**
 * The fixture of the suites that write the heap store's files and read them back: a BIGINT key
 * and a BIGINT state (`row(v)` makes either), and a [[DeltaChainStateStoreProvider]] of them
 * for one operator of a checkpoint under a temporary root, with the settings a suite gives it.
 * One shape, so that those suites (the provider's, its lineage's with checkpoint ids, the
 * reader's, the file codecs') build their stores alike.
 */
trait HeapStoreFixture extends TempDirs with Assertions {

  protected val keySchema: StructType = new StructType().add("k", LongType)
  protected val stateSchema: StructType = new StructType().add("n", LongType)

  private val longRow = UnsafeProjection.create(Seq(BoundReference(0, LongType, nullable = true)))

  /** The operator whose state the providers hold: its files are under `<root>/1000/`. */
  protected val operatorId: Long = 1000L

  /** A BIGINT row holding `v`, as a key or a state. */
  protected def row(v: Long): UnsafeRow = longRow(InternalRow(v)).copy()

  /** A provider of `partition`'s state under `root`, with `sqlConf` and the store `options`. */
  protected def heapProvider(
      root: File,
      options: Map[String, String],
      sqlConf: SQLConf = new SQLConf(),
      partition: Int = 0): DeltaChainStateStoreProvider = {
    val p = new DeltaChainStateStoreProvider
    p.init(StateStoreId(root.getAbsolutePath, operatorId, partition), keySchema, stateSchema,
      NoPrefixKeyStateEncoderSpec(keySchema), false, new StateStoreConf(sqlConf, options),
      new Configuration(), false, None)
    p
  }

  /** Commits versions `from + 1` to `n`: version v sets key v to v and removes key v - 2. */
  protected def commitVersions(p: DeltaChainStateStoreProvider, n: Int, from: Int = 0,
      closes: Option[DeferredCloses] = None): Unit =
    (from until n).foreach { v =>
      val store = p.getStore(v, None, closes)
      store.stateMap.put(row(v + 1), row(v + 1), (v + 1) * 10L)
      if (v - 1 >= 1) store.stateMap.remove(row(v - 1))
      assert(store.commit() == v + 1)
    }

  /** The directory of partition 0's files under `root`. */
  protected def partitionDir(root: File): File = new File(root, s"$operatorId/0")

  /** Partition 0's files as the store reads and writes them. */
  protected def partitionFiles(root: File, readOnly: Boolean = false,
      codec: Option[String] = None): StateCheckpointFiles =
    new StateCheckpointFiles(new Path(partitionDir(root).getAbsolutePath), new Configuration(),
      readOnly, codec)

  /** The names of the files in partition 0's directory. */
  protected def names(root: File): Set[String] = partitionDir(root).list().toSet
}
