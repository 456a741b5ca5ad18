package io.mapwithstate.execution

import io.mapwithstate.state.{FieldProjections, KeyStateColumns, StateMap}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{JoinedRow, SpecificInternalRow, UnsafeProjection}
import org.apache.spark.sql.types.{DataType, TimestampType}

/**
 * The state an operator outputs instead of what `emit` produces, one variant per output kind:
 * after each batch, every key's state stamped with the batch time (`output="snapshots"`), or
 * after a replay's last batch, every key's state as `read_state` shows it
 * (`output="final_state"`, the columns of [[KeyStateColumns]]). A key holding only a timer has
 * no state to show in a snapshot; the final state shows it when asked for (`timerOnlyKeys`).
 *
 * Plain data, shipped to the tasks; each task [[open]]s its own projections.
 */
sealed trait StateRowsAfterBatch extends Serializable {

  /** The output columns' types, in order. */
  def types: Seq[DataType]

  /** A task's rows of this kind (not shared between threads). */
  def open(): StateRowsAfterBatch.Rows

  protected final def projection(): UnsafeProjection = FieldProjections.of(types)
}

object StateRowsAfterBatch {

  /** A task's state rows after a batch. */
  trait Rows {

    /**
     * The rows of the state in `map` after the batch at `batchTime` (micros); `lastBatch`: the
     * batch is its timeline's last. Each row is valid until the next one is read.
     */
    def after(map: StateMap, batchTime: Long, lastBatch: Boolean): Iterator[InternalRow]
  }

  /** After each batch: the batch time, the key columns, the state's fields. */
  final case class Snapshots(types: Seq[DataType]) extends StateRowsAfterBatch {
    override def open(): Rows = {
      val project = projection()
      val batchTimeRow = new SpecificInternalRow(Seq(TimestampType))
      val joined = new JoinedRow
      val batchTimeAndKey = new JoinedRow
      (map, batchTime, _) =>
        map.getAll().filter(_.state != null).map { e =>
          batchTimeRow.setLong(0, batchTime)
          project(joined(batchTimeAndKey(batchTimeRow, e.key), e.state))
        }
    }
  }

  /**
   * After the last batch only: the key columns, the state's fields (`stateWidth` of them),
   * `last_updated` and `timeout_at`, and with `timerOnlyKeys` the keys holding only a timer and
   * `has_state`, filled as `read_state` fills them ([[KeyStateColumns.Rows]]) from a map whose
   * per-key time is a timer (`timers`) or the last update time.
   */
  final case class FinalState(
      types: Seq[DataType],
      stateWidth: Int,
      timers: Boolean,
      timerOnlyKeys: Boolean) extends StateRowsAfterBatch {
    override def open(): Rows = {
      val project = projection()
      val columns = new KeyStateColumns.Rows(stateWidth, timers, timerOnlyKeys)
      (map, _, lastBatch) =>
        if (!lastBatch) Iterator.empty
        else map.getAll().filter(e => columns.shows(e.state)).map { e =>
          project(columns.of(e.key, e.state, e.updateTime))
        }
    }
  }
}
