package io.mapwithstate.state

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.types.{StructField, TimestampType}

/**
 * The columns a key's state is shown as outside the operator — the key columns, the state's
 * fields, `last_updated` and `timeout_at` — and how one [[StateMap]] entry fills the two time
 * columns. `read_state` reads a checkpoint's state as these columns (plus the partition), a
 * batch replay's `output="final_state"` returns them after its last batch, and an
 * `initial_state` with `last_updated` takes them back, so the three agree by construction.
 *
 * The map keeps one time per key: its last update time, or with `timeout_at` timers its pending
 * timer (the two never coexist). That time goes to `last_updated` or to `timeout_at`, and the
 * other column is null; so is the time's own column when the key has none.
 */
object KeyStateColumns {
  val LastUpdated = "last_updated"
  val TimeoutAt = "timeout_at"

  /**
   * The two time columns, after the key columns and the state's fields. Nullable: a query
   * with timers has no `last_updated`, one without has no `timeout_at` (Spark would fold
   * `last_updated IS NULL` to false on a non-nullable column).
   */
  val timeFields: Seq[StructField] = Seq(
    StructField(LastUpdated, TimestampType, nullable = true),
    StructField(TimeoutAt, TimestampType, nullable = true))

  /** The key columns, the state's fields and the time columns. */
  def fields(keyFields: Seq[StructField], stateFields: Seq[StructField]): Seq[StructField] =
    keyFields ++ stateFields ++ timeFields

  /**
   * The time columns of entries of a map whose per-key time is a timer (`timers`) or the last
   * update time. One row, rewritten by each [[of]]: valid until the next call.
   */
  final class Times(timers: Boolean) {
    private val row = new GenericInternalRow(2)
    private val (timeColumn, otherColumn) = if (timers) (1, 0) else (0, 1)
    row.setNullAt(otherColumn)

    /** The time columns of an entry whose map time is `time` ([[StateMap.NoTime]]: none). */
    def of(time: Long): InternalRow = {
      if (time == StateMap.NoTime) row.setNullAt(timeColumn) else row.setLong(timeColumn, time)
      row
    }
  }
}
