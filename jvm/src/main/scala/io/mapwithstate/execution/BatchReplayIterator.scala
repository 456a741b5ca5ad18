package io.mapwithstate.execution

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeRow

/**
 * Runs the batches of one partition, in batch-time order, as a DStream's mapWithState would
 * have run them live: for each batch of the [[BatchTimeline]], its records go through the state
 * function (in the first batch, then a group function's initial-state keys that had no
 * records); then the keys the [[TimeoutPolicy]] times out in that batch get their last call;
 * with state output, the state follows each batch (snapshots) or the last one (the final
 * state). A streaming micro-batch is a one-batch timeline; a batch replay's timeline comes from
 * the data.
 *
 * Output is produced lazily, so a partition's emitted records never have to fit in memory.
 *
 * @param records     the partition's records, sorted by batch time (then by `order_by`); in
 *                    a real-time batch, possibly read by a thread of their own
 *                    ([[RecordHandOff]]), so that due keys time out while none arrives
 * @param batchTimeOf the batch time of a record (micros); ignored for a one-batch timeline
 * @param firstBatch  the number, in the query, of the timeline's first batch (from 1)
 * @param stateRows   when set, the state rows that follow each batch (snapshots, or after the
 *                    last batch the final state)
 * @param lateRows    with event-time timers, the ordinal of the records' event time: a record
 *                    at or before its batch's watermark is late and dropped (Spark's rule)
 * @param readAhead   whether records may be read ahead of the one being run (see `input`)
 * @param clock       the time calls see, and when due keys are looked for: once after each
 *                    batch's records, or in a real-time batch also between records
 *                    ([[BatchClock]])
 */
class BatchReplayIterator(
    records: Iterator[InternalRow],
    batchTimeOf: InternalRow => Long,
    timeline: BatchTimeline,
    firstBatch: Long,
    updater: StateUpdater,
    timeouts: TimeoutPolicy,
    stateRows: Option[StateRowsAfterBatch.Rows],
    onOutput: () => Unit,
    lateRows: Option[Int] = None,
    readAhead: Boolean = true,
    clock: BatchClock = BatchClock.OfTimeline) extends Iterator[InternalRow] {

  // Read ahead in groups when the map can prefetch for them (see [[ReadAheadRecords]]) and
  // the records may wait for the rest of their group.
  private val input: scala.collection.BufferedIterator[InternalRow] = records match {
    case handedOff: RecordHandOff => handedOff
    case _ if readAhead && updater.prefetches =>
      new ReadAheadRecords(records, ReadAheadRecords.GroupSize,
        (group, count) => updater.prefetch(group, count))
    case _ => records.buffered
  }
  // A streaming micro-batch: every record is in the one batch, none needs its time looked up.
  private val oneBatch = timeline.size == 1 && !timeline.fromData
  private var batch = 0
  private var phase: Phase = Records
  private var pending: UnsafeRow = null
  // The rows after the first that the last call emitted (an array emit), from this index on.
  private var nextEmitted = 0
  private var timingOut: Iterator[(UnsafeRow, UnsafeRow)] = Iterator.empty
  // The initial state's keys a group function calls without records at the end of the first
  // batch's records (see StateUpdater.initialKeysWithoutRecords); null until then.
  private var withoutRecords: Iterator[UnsafeRow] = null
  private var stateRowsOfBatch: Iterator[InternalRow] = Iterator.empty

  // A real-time batch's clock, or null: every call of a batch sees the timeline's time.
  private val wallClock: BatchClock.WallClock = clock match {
    case c: BatchClock.WallClock => c
    case BatchClock.OfTimeline => null
  }
  // With a wall clock: the time of the calls under way (its last read, micros); whether it was
  // read for the record waiting to run; and from when the next record first has the due keys
  // looked for (at the batch's first record, then at most every interval).
  private var now = 0L
  private var clockRead = false
  private var nextLook = Long.MinValue
  // With a wall clock, a real-time task's records read by a thread of their own: while none
  // arrives, due keys are looked for as the interval passes. Else null: waits in `records`.
  private val handOff: RecordHandOff = records match {
    case handedOff: RecordHandOff if wallClock != null && timeouts != TimeoutPolicy.Never =>
      handedOff
    case _ => null
  }

  updater.startBatch(timeline.watermarkAt(0))

  private sealed trait Phase
  private case object Records extends Phase
  // In a real-time batch, the keys found due between two records.
  private case object DueBetweenRecords extends Phase
  private case object Timeouts extends Phase
  private case object StateRows extends Phase
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

  private def time: Long = if (wallClock == null) timeline.times(batch) else now

  private def advance(): Unit = if (nextEmitted < updater.emittedCount) {
    pending = updater.emitted(nextEmitted)
    nextEmitted += 1
  } else phase match {
    case Records =>
      if (handOff != null && !clockRead && !handOff.ready && !handOff.await(idleWaitMs())) {
        // No record arrived while the partition waited until its next look: look now.
        now = wallClock.nowMicros()
        lookForDueKeys()
      } else if (input.hasNext && inThisBatch(input.head) && wallClock != null && !clockRead) {
        clockRead = true
        now = wallClock.nowMicros()
        if (now >= nextLook && timeouts != TimeoutPolicy.Never) lookForDueKeys()
      } else if (input.hasNext && inThisBatch(input.head)) {
        clockRead = false
        val record = input.next()
        if (isLate(record)) updater.dropLateRow()
        else {
          pending = updater.processRecord(record, time)
          nextEmitted = 1
        }
      } else if (batch == 0 && withoutRecords == null) {
        withoutRecords = updater.initialKeysWithoutRecords()
      } else if (batch == 0 && withoutRecords.hasNext) {
        pending = updater.callWithoutRecords(withoutRecords.next(), time)
        nextEmitted = 1
      } else {
        phase = Timeouts
        val watermark = timeline.watermarkAt(batch)
        timingOut = dueKeys(clock match {
          case BatchClock.OfTimeline => timeouts.threshold(firstBatch + batch, time, watermark)
          case c: BatchClock.WallClock =>
            now = c.nowMicros()
            timeouts.dueBefore(now, watermark)
        })
      }
    case DueBetweenRecords =>
      if (!timeOutNext()) phase = Records
    case Timeouts =>
      if (!timeOutNext()) {
        phase = StateRows
        stateRowsOfBatch = stateRows match {
          case Some(rows) => rows.after(updater.map, time, lastBatch = batch + 1 == timeline.size)
          case None => Iterator.empty
        }
      }
    case StateRows =>
      if (stateRowsOfBatch.hasNext) {
        pending = stateRowsOfBatch.next().asInstanceOf[UnsafeRow]
      } else if (batch + 1 < timeline.size) {
        batch += 1
        updater.startBatch(timeline.watermarkAt(batch))
        phase = Records
      } else {
        if (input.hasNext) {
          throw new IllegalStateException("records left after the last batch of the timeline")
        }
        phase = Done
      }
    case Done =>
  }

  /** With a wall clock: the keys due by `now` time out next, before any other record runs. */
  private def lookForDueKeys(): Unit = {
    nextLook = now + wallClock.intervalMs * 1000L
    phase = DueBetweenRecords
    timingOut = dueKeys(timeouts.dueBefore(now, timeline.watermarkAt(batch)))
  }

  /**
   * How long a task whose records are handed off waits for one before it looks for due keys
   * (ms): not at all before the batch's first look; then until the next look is due, and at
   * least [[BatchClock.WallClock.MinIdleWaitMs]], so that an interval of 0 (a look before every
   * record) does not spin while no record comes.
   */
  private def idleWaitMs(): Long =
    if (nextLook == Long.MinValue) 0L
    else {
      val untilLook = math.max(0L, nextLook - wallClock.nowMicros())
      math.max(BatchClock.WallClock.MinIdleWaitMs, (untilLook + 999L) / 1000L)
    }

  /** Runs the timing-out call of the next key of `timingOut`, if one is left; whether it was. */
  private def timeOutNext(): Boolean = timingOut.hasNext && {
    val (key, state) = timingOut.next()
    pending = updater.timeOut(key, state, time)
    nextEmitted = 1
    true
  }

  private def dueKeys(threshold: Option[Long]): Iterator[(UnsafeRow, UnsafeRow)] =
    threshold match {
      case Some(t) => updater.timingOutKeys(t)
      case None => Iterator.empty
    }

  private def isLate(record: InternalRow): Boolean = lateRows match {
    case Some(ordinal) => LateRowFilterExec.isLate(record, ordinal, timeline.watermarkAt(batch))
    case None => false
  }

  /** Whether a record belongs to the current batch: every record does, in a one-batch run. */
  private def inThisBatch(row: InternalRow): Boolean =
    oneBatch || timeline.batchOf(batchTimeOf(row)) == batch
}
