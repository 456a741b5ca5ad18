package io.mapwithstate.plan

/**
 * What a mapWithState returns: the records `emit` produces, the state after each batch, or (a
 * batch replay only) the state after the last batch as `read_state` shows it, or the event-time
 * watermark after the last batch: what a run resuming the replay takes back.
 */
sealed trait OutputKind
object OutputKind {
  case object Emitted extends OutputKind
  case object Snapshots extends OutputKind

  /**
   * Every key's state after the last batch, in the columns of
   * [[io.mapwithstate.state.KeyStateColumns]]; with `timerOnlyKeys` also the keys holding only
   * a timer, and the `has_state` column.
   */
  final case class FinalState(timerOnlyKeys: Boolean = false) extends OutputKind

  /** One row: the watermark after the last batch (the `watermark` column, null: none). */
  case object FinalWatermark extends OutputKind

  /** The name of the final watermark's one column. */
  val WatermarkColumn = "watermark"

  /** Refuses `include_timer_only_keys` (`asked`) with another output than the final state. */
  def checkTimerOnlyKeys(kind: OutputKind, asked: Boolean): Unit = kind match {
    case _: FinalState =>
    case Emitted | Snapshots | FinalWatermark if asked =>
      throw io.mapwithstate.MapWithStateException(
        io.mapwithstate.ErrorCondition.ConflictingArguments,
        "include_timer_only_keys is for output='final_state': the keys holding only a timer " +
          "are shown there, as read_state(..., include_timer_only_keys=True) shows them")
    case _ =>
  }
}

/**
 * How the initial state's rows start their keys: seeded as Spark's initial state is (updated
 * at the first batch's time; a group function calls each key in the first batch), or resumed
 * from state read back (`read_state`, `output="final_state"`) with each key's `last_updated`:
 * its idle clock continues from that time, and it is not called before a record or a timeout
 * calls it, as if the run that left the state had gone on.
 */
sealed trait InitialStateKind
object InitialStateKind {
  case object Seeded extends InitialStateKind
  case object Resumed extends InitialStateKind
}

/**
 * The validated settings of one mapWithState, all durations in milliseconds.
 *
 * @param numPartitions      partitions the state is spread over
 * @param timeoutMs          idle timeout; None when keys never time out
 * @param checkpointInterval timed-out keys are found by a full scan on every n-th batch,
 *                           counting from 1, as Spark checkpoints (and scans) every 10 batches
 * @param batchIntervalMs    batch replays only: the step between consecutive batches
 * @param outputKind         what the operator returns (its `output` attributes follow from it)
 * @param timerDomain        with `timeout_at`: what timers are compared with; None without timers
 * @param watermarkDelayMs   the input's `withWatermark` delay, when it has one
 * @param backend            where the state is kept (a [[io.mapwithstate.state.StateBackend]] name)
 * @param untilMicros        batch replays only: `until`, the time of the timeline's last batch
 *                           (see [[io.mapwithstate.execution.BatchTimeline.of]])
 * @param initialState       how the initial state's rows start their keys, if there are any
 * @param migrate            a streaming query's `StateSpec.migrate`, as sent: resolved only on
 *                           a restart with a changed state schema, against the schema the
 *                           checkpoint holds ([[StateMigrationResolver]])
 * @param resumedWatermarkMicros the event-time watermark a resumed run starts from (a replay's
 *                           final watermark), which no batch's watermark goes below
 */
case class MapWithStateOptions(
    numPartitions: Int,
    timeoutMs: Option[Long],
    checkpointInterval: Int,
    batchIntervalMs: Option[Long],
    outputKind: OutputKind,
    timerDomain: Option[TimerDomain] = None,
    watermarkDelayMs: Option[Long] = None,
    backend: String = io.mapwithstate.state.StateBackend.MemoryName,
    untilMicros: Option[Long] = None,
    initialState: InitialStateKind = InitialStateKind.Seeded,
    migrate: Option[org.apache.spark.sql.catalyst.expressions.Expression] = None,
    resumedWatermarkMicros: Option[Long] = None) {

  /**
   * The watermark a batch runs with (micros; `Long.MinValue`: none yet), from the query's own
   * for that batch: never before the resumed run's starting watermark, so late rows,
   * event-time timers and `S.watermark()` see what one run over the history and the live data
   * would. Spark's watermark only moves forward, so the later of the two is exactly that run's.
   */
  def watermarkOf(batchWatermark: Long): Long =
    resumedWatermarkMicros.fold(batchWatermark)(math.max(batchWatermark, _))
}

/** What a `timeout_at` timer is compared with: the batch time or the event-time watermark. */
sealed abstract class TimerDomain(val name: String) extends Serializable
object TimerDomain {
  case object ProcessingTime extends TimerDomain("processing_time")
  case object EventTime extends TimerDomain("event_time")
  val all: Seq[TimerDomain] = Seq(ProcessingTime, EventTime)
}

object MapWithStateOptions {

  /** Spark's DStreams checkpoint a mapWithState every 10 batch intervals. */
  val DefaultCheckpointInterval = 10
}
