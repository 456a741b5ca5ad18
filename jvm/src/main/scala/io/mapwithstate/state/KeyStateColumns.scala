package io.mapwithstate.state

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{GenericInternalRow, JoinedRow}
import org.apache.spark.sql.types.{BooleanType, StructField, TimestampType}

/**
 * The columns a key's state is shown as outside the operator — the key columns, the state's
 * fields, `last_updated` and `timeout_at` — and how one [[StateMap]] entry fills them.
 * `read_state` reads a checkpoint's state as these columns (plus the partition), a batch
 * replay's `output="final_state"` returns them after its last batch, and an `initial_state`
 * with `last_updated` takes them back, so the three agree by construction.
 *
 * The map keeps one time per key: its last update time, or with `timeout_at` timers its pending
 * timer (the two never coexist). That time goes to `last_updated` or to `timeout_at`, and the
 * other column is null; so is the time's own column when the key has none.
 *
 * A key can also hold a timer without a state (a call set a timer and removed or never set the
 * state, as Spark's flatMapGroupsWithState keeps such keys). By default no column can tell such
 * a key from one whose state fields are all null, so it is left out; asked for
 * (`include_timer_only_keys`), it is shown with null state fields, and one more column,
 * `has_state` (false for it), follows the time columns, which `initial_state(...,
 * has_state=...)` takes back so that the key's timer fires in the resumed run.
 */
object KeyStateColumns {
  val LastUpdated = "last_updated"
  val TimeoutAt = "timeout_at"
  val HasState = "has_state"

  /**
   * The two time columns, after the key columns and the state's fields. Nullable: a query
   * with timers has no `last_updated`, one without has no `timeout_at` (Spark would fold
   * `last_updated IS NULL` to false on a non-nullable column).
   */
  val timeFields: Seq[StructField] = Seq(
    StructField(LastUpdated, TimestampType, nullable = true),
    StructField(TimeoutAt, TimestampType, nullable = true))

  /**
   * The key columns, the state's fields and the time columns; with `timerOnlyKeys`, then
   * `has_state`.
   */
  def fields(
      keyFields: Seq[StructField],
      stateFields: Seq[StructField],
      timerOnlyKeys: Boolean = false): Seq[StructField] =
    keyFields ++ stateFields ++ timeFields ++
      Option.when(timerOnlyKeys)(StructField(HasState, BooleanType, nullable = false))

  /**
   * The columns of the entries of a map whose per-key time is a timer (`timers`) or the last
   * update time, and whose states have `stateWidth` fields. One row, rewritten by each [[of]]:
   * valid until the next call.
   */
  final class Rows(stateWidth: Int, timers: Boolean, timerOnlyKeys: Boolean) {
    private val times = new Times(timers)
    private val noState = new GenericInternalRow(stateWidth)
    private val hasState = new GenericInternalRow(1)
    private val keyAndState = new JoinedRow
    private val withTimes = new JoinedRow
    private val withHasState = new JoinedRow

    /** Whether an entry of state `state` (null: a timer only) is shown. */
    def shows(state: InternalRow): Boolean = state != null || timerOnlyKeys

    /** The columns of an entry (a shown one), `time` its map time. */
    def of(key: InternalRow, state: InternalRow, time: Long): InternalRow = {
      val row = withTimes(keyAndState(key, if (state == null) noState else state), times.of(time))
      if (!timerOnlyKeys) row
      else {
        hasState.setBoolean(0, state != null)
        withHasState(row, hasState)
      }
    }
  }

  /**
   * The time columns of entries of a map whose per-key time is a timer (`timers`) or the last
   * update time. One row, rewritten by each [[of]]: valid until the next call.
   */
  private final class Times(timers: Boolean) {
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
