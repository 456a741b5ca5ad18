package io.mapwithstate.execution

import io.mapwithstate.plan.OutputKind
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BoundReference, UnsafeProjection}
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * The pieces every task of either mapWithState operator (batch replay or streaming) builds
 * around its StateMap, so that the two operators differ only in where the map comes from and
 * which batches run.
 */
private[execution] object PartitionSetup {

  /**
   * Loads initial-state rows — the key columns, then the state's fields — into `updater`, all
   * with update time `time` (the first batch's).
   */
  def loadInitialState(
      updater: StateUpdater,
      rows: Iterator[InternalRow],
      keyTypes: Seq[DataType],
      stateType: StructType,
      time: Long): Unit = {
    val key = UnsafeProjection.create(keyTypes.zipWithIndex.map { case (t, i) =>
      BoundReference(i, t, nullable = true)
    })
    val state = UnsafeProjection.create(stateType.fields.toSeq.zipWithIndex.map { case (f, i) =>
      BoundReference(keyTypes.size + i, f.dataType, nullable = true)
    })
    rows.foreach(row => updater.loadInitialState(key(row), state(row), time))
  }

  /** For snapshot output, the projection of (batch time, key, state) rows into `layout`. */
  def snapshotProjection(output: OutputKind, layout: Seq[Attribute]): Option[UnsafeProjection] =
    output match {
      case OutputKind.Snapshots =>
        Some(UnsafeProjection.create(layout.zipWithIndex.map { case (a, i) =>
          BoundReference(i, a.dataType, nullable = true)
        }))
      case OutputKind.Emitted => None
    }

  /** `rows`, then `done` once they are exhausted (before hasNext first returns false). */
  def onCompletion(rows: Iterator[InternalRow])(done: => Unit): Iterator[InternalRow] =
    new Iterator[InternalRow] {
      private var completed = false
      override def hasNext: Boolean = {
        val more = rows.hasNext
        if (!more && !completed) {
          completed = true
          done
        }
        more
      }
      override def next(): InternalRow = rows.next()
    }
}
