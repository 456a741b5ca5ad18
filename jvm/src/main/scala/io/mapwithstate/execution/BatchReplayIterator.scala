package io.mapwithstate.execution

import io.mapwithstate.MapWithStateException
import io.mapwithstate.plan.MapWithStateOptions
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{JoinedRow, SpecificInternalRow, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.TimestampType

/**
 * Replays the batches of one partition, in batch-time order, as a DStream's mapWithState would
 * have run them live: for each batch of the [[BatchTimeline]], its records go through the state
 * function; on every `checkpointInterval`-th batch a full scan of the state finds the keys that
 * time out; with snapshot output, the whole state follows each batch.
 *
 * Output is produced lazily, so a partition's emitted records never have to fit in memory.
 *
 * @param records       the partition's records, sorted by batch time (then by `order_by`)
 * @param batchTimeOf   the batch time of a record (micros); ignored for a one-batch timeline
 * @param snapshot      when set, projects (batch time, key, state) rows after each batch
 */
class BatchReplayIterator(
    records: Iterator[InternalRow],
    batchTimeOf: InternalRow => Long,
    timeline: BatchTimeline,
    updater: StateUpdater,
    options: MapWithStateOptions,
    snapshot: Option[UnsafeProjection],
    onOutput: () => Unit) extends Iterator[InternalRow] {

  private val timeoutMicros = options.timeoutMs.map(_ * 1000L)
  private val input = records.buffered
  private var batch = 0
  private var phase: Phase = Records
  private var pending: UnsafeRow = null
  private var timingOut: Iterator[(UnsafeRow, UnsafeRow)] = Iterator.empty
  private var snapshotRows: Iterator[InternalRow] = Iterator.empty

  private val batchTimeRow = new SpecificInternalRow(Seq(TimestampType))
  private val joined = new JoinedRow()
  private val keyAndBatchTime = new JoinedRow()

  private sealed trait Phase
  private case object Records extends Phase
  private case object Timeouts extends Phase
  private case object Snapshot extends Phase
  private case object Done extends Phase

  override def hasNext: Boolean = {
    while (pending == null && phase != Done) advance()
    pending != null
  }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException
    val row = pending
    pending = null
    onOutput()
    row
  }

  private def time: Long = timeline.times(batch)

  private def advance(): Unit = phase match {
    case Records =>
      if (input.hasNext && timeline.batchOf(recordTime(input.head)) == batch) {
        pending = updater.processRecord(input.next(), time)
      } else {
        phase = Timeouts
        timingOut = timeoutMicros match {
          case Some(t) if (batch + 1) % options.checkpointInterval == 0 =>
            updater.timingOutKeys(time - t)
          case _ => Iterator.empty
        }
      }
    case Timeouts =>
      if (timingOut.hasNext) {
        val (key, state) = timingOut.next()
        pending = updater.timeOut(key, state, time)
      } else {
        phase = Snapshot
        snapshotRows = snapshot match {
          case Some(projection) =>
            batchTimeRow.setLong(0, time)
            val t = time
            updater.map.getAll().map { e =>
              batchTimeRow.setLong(0, t)
              projection(joined(keyAndBatchTime(batchTimeRow, e.key), e.state))
            }
          case None => Iterator.empty
        }
      }
    case Snapshot =>
      if (snapshotRows.hasNext) {
        pending = snapshotRows.next().asInstanceOf[UnsafeRow]
      } else if (batch + 1 < timeline.size) {
        batch += 1
        phase = Records
      } else {
        if (input.hasNext) {
          throw new IllegalStateException("records left after the last batch of the timeline")
        }
        phase = Done
      }
    case Done =>
  }

  private def recordTime(row: InternalRow): Long = {
    if (timeline.size == 1 && !timeline.fromData) return timeline.times(0)
    batchTimeOf(row)
  }
}

/**
 * The batches of a replay, as their times in microseconds. `fromData` timelines come from a
 * batch_time column; a record belongs to the first batch whose time is not before its own.
 */
case class BatchTimeline(times: Array[Long], fromData: Boolean) {
  def size: Int = times.length

  def batchOf(recordTime: Long): Int = {
    val i = java.util.Arrays.binarySearch(times, recordTime)
    if (i >= 0) i else -i - 1
  }
}

object BatchTimeline {
  /** Batch replays are capped: each batch costs a pass over the partition's state. */
  val MaxBatches = 1000000

  /** One batch at `time`: a DataFrame without batch_time. */
  def single(time: Long): BatchTimeline = BatchTimeline(Array(time), fromData = false)

  /**
   * The batches for records with these (sorted, distinct) times: the times themselves, or with
   * an interval every step from the first time until the last time is covered.
   */
  def of(times: Array[Long], intervalMicros: Option[Long]): BatchTimeline = intervalMicros match {
    case _ if times.isEmpty => BatchTimeline(Array.empty, fromData = true)
    case None => BatchTimeline(times, fromData = true)
    case Some(step) =>
      val first = times.head
      val count = (times.last - first + step - 1) / step + 1
      if (count > MaxBatches) {
        throw MapWithStateException(
          s"batch_interval gives $count batches between the first and the last batch_time; at " +
            s"most $MaxBatches are replayed: use a longer batch_interval")
      }
      BatchTimeline(Array.tabulate(count.toInt)(i => first + i * step), fromData = true)
  }
}
