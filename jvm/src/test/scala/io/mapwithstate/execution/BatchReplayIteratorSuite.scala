package io.mapwithstate.execution

import io.mapwithstate.{LocalSpark, MapWithStateException}
import io.mapwithstate.plan.{
  FunctionKind,
  GroupAggregates,
  MapWithStateOptions,
  OutputKind,
  StateFunction,
  StateFunctionInput,
  StateFunctionResolver
}
import io.mapwithstate.state.StateMap
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.{UnresolvedAttribute, UnresolvedExtractValue}
import org.apache.spark.sql.catalyst.expressions.{
  Add,
  AttributeReference,
  Coalesce,
  CreateNamedStruct,
  If,
  Literal,
  MicrosToTimestamp,
  UnixMicros,
  UnsafeProjection
}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.{LongType, StringType, StructType, TimestampType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * How one partition's batches run: records go to the batch their time falls in, timeouts fire
 * only in the batches the policy names (counted in the query, from the timeline's first batch
 * number), snapshots follow every batch, and a record outside the timeline is a bug.
 *
 * The function counts records per key and emits (key, count after, timing out, batch time).
 */
class BatchReplayIteratorSuite extends AnyFunSuite with LocalSpark {
  import BatchReplayIteratorSuite.perRecord

  /** A group function's kind, with no aggregates here (no values). */
  private val perGroup = FunctionKind.PerGroup(GroupAggregates(Nil, Nil), Nil)

  /** An updater for `timeouts`; with timers, the function sets them (see `timeoutAt`). */
  private def updater(
      timeouts: TimeoutPolicy,
      kind: FunctionKind = perRecord,
      clock: BatchClock = BatchClock.OfTimeline): StateUpdater =
    BatchReplayIteratorSuite.updater(BatchReplayIteratorSuite.counting(spark, timeouts),
      timeouts, kind, clock)

  private def record(key: String, time: Long): InternalRow =
    InternalRow(UTF8String.fromString(key), time)

  /** (key, count, timing out, batch time) of every emitted row, in order. */
  private def run(
      records: Iterable[InternalRow],
      timeline: BatchTimeline,
      timeouts: TimeoutPolicy,
      firstBatch: Long = 1,
      stateRows: Option[StateRowsAfterBatch] = None,
      updaterToUse: Option[StateUpdater] = None,
      lateRows: Option[Int] = None,
      clock: BatchClock = BatchClock.OfTimeline): Seq[(String, Long, Boolean, Long)] = {
    val u = updaterToUse.getOrElse(updater(timeouts, clock = clock))
    val replay = new BatchReplayIterator(records.iterator, _.getLong(1), timeline, firstBatch,
      u, timeouts, stateRows.map(_.open()), () => (), lateRows, readAhead = true, clock)
    replay.map { row =>
      (row.getUTF8String(0).toString, row.getLong(1), row.getBoolean(2), row.getLong(3))
    }.toList
  }

  test("records run in the batch their time falls in, each batch at its own time") {
    val timeline = BatchTimeline.of(Array(10L, 20L, 30L), intervalMicros = None)
    val out = run(Seq(record("a", 10), record("b", 10), record("a", 20), record("a", 30)),
      timeline, TimeoutPolicy.Never)
    assert(out === Seq(("a", 1, false, 10), ("b", 1, false, 10), ("a", 2, false, 20),
      ("a", 3, false, 30)))
  }

  test("with an interval, a record belongs to the first batch not before its time") {
    val timeline = BatchTimeline.of(Array(10L, 45L), intervalMicros = Some(10L))
    assert(timeline.times.toSeq === Seq(10L, 20L, 30L, 40L, 50L))
    assert(timeline.batchOf(41L) === 4)
    assert(timeline.batchOf(40L) === 3)
  }

  test("until goes on after the last record: each step before it, then a batch at until") {
    val stepped = BatchTimeline.of(Array(10L, 45L), intervalMicros = Some(10L), until = Some(75L))
    assert(stepped.times.toSeq === Seq(10L, 20L, 30L, 40L, 50L, 60L, 70L, 75L))
    assert(stepped.endsAtUntil)
    val single = BatchTimeline.of(Array(10L, 20L), intervalMicros = None, until = Some(90L))
    assert(single.times.toSeq === Seq(10L, 20L, 90L))
    assert(BatchTimeline.of(Array.empty, intervalMicros = Some(10L), until = Some(5L))
      .times.toSeq === Seq(5L))
    // until at the last batch adds nothing; one before it is refused, naming both times.
    val atLast = BatchTimeline.of(Array(10L, 20L), intervalMicros = None, until = Some(20L))
    assert(atLast.times.toSeq === Seq(10L, 20L) && !atLast.endsAtUntil)
    val e = intercept[MapWithStateException] {
      BatchTimeline.of(Array(10L, 20L), intervalMicros = None, until = Some(15L))
    }
    assert(e.condition === io.mapwithstate.ErrorCondition.UntilBeforeLastBatch)
    assert(e.getMessage.contains("1970-01-01T00:00:00.000015Z"))
  }

  test("the batch at until has the watermark until minus the delay, when that is later") {
    val ms = 1000L
    val timeline = BatchTimeline.of(Array(10 * ms, 20 * ms), intervalMicros = None,
      until = Some(100 * ms))
    val fromRecords = Array(TimeoutPolicy.NoWatermark, 5 * ms, 15 * ms)
    assert(timeline.withWatermarks(fromRecords, delayMs = 30).watermarks.get.toSeq ===
      Seq(TimeoutPolicy.NoWatermark, 5 * ms, 70 * ms))
    assert(timeline.withWatermarks(fromRecords, delayMs = 90).watermarks.get.toSeq ===
      Seq(TimeoutPolicy.NoWatermark, 5 * ms, 15 * ms))
  }

  test("the watermark after a replay's last batch: all its event times, until, a resumed one") {
    val ms = 1000L
    // Event times 15 and 21 ms in the batches at 10 and 20 ms; delay 10 ms.
    val afterRecords = ReplayWatermarks.afterLast(Map(10 * ms -> 15 * ms, 20 * ms -> 21 * ms),
      delayMs = 10)
    assert(afterRecords === 11 * ms)
    assert(ReplayWatermarks.afterLast(Map.empty, delayMs = 10) === TimeoutPolicy.NoWatermark)
    val toUntil = BatchTimeline.of(Array(10 * ms, 20 * ms), intervalMicros = None,
      until = Some(100 * ms))
    assert(toUntil.watermarkAfterLast(afterRecords, delayMs = 10) === 90 * ms)
    assert(BatchTimeline.of(Array(10 * ms, 20 * ms), intervalMicros = None)
      .watermarkAfterLast(afterRecords, delayMs = 10) === 11 * ms)
    // A resumed run's watermark is a floor: the later of the two.
    val resumed = MapWithStateOptions(1, None, 1, None, OutputKind.Emitted,
      resumedWatermarkMicros = Some(50 * ms))
    assert(resumed.watermarkOf(TimeoutPolicy.NoWatermark) === 50 * ms)
    assert(resumed.watermarkOf(11 * ms) === 50 * ms && resumed.watermarkOf(60 * ms) === 60 * ms)
  }

  test("idle keys time out only in the batches the policy scans, strictly before the threshold") {
    val timeline = BatchTimeline.of(Array(10L, 20L, 30L, 40L), intervalMicros = None)
    // timeout 15: at batch 20 the threshold is 5, at batch 40 it is 25.
    val policy = TimeoutPolicy.Idle(timeoutMicros = 15, scanEvery = 2)
    val out = run(Seq(record("a", 10), record("b", 10), record("b", 30)), timeline, policy)
    assert(out === Seq(("a", 1, false, 10), ("b", 1, false, 10), ("b", 2, false, 30),
      ("a", 1, true, 40)))
  }

  test("timers are checked every batch, strictly; the timed-out state is kept; " +
    "data beats a timer") {
    val timeline = BatchTimeline.of(Array(10L, 20L, 30L, 40L), intervalMicros = None)
    val u = updater(TimeoutPolicy.Timers(eventTime = false))
    val out = run(Seq(record("a", 10), record("b", 20)), timeline, TimeoutPolicy.Timers(false),
      updaterToUse = Some(u))
    // a's timer 15 fires at 20 (its call updates the count and clears the timer), b's 25 at 30.
    assert(out === Seq(("a", 1, false, 10), ("b", 1, false, 20), ("a", 2, true, 20),
      ("b", 2, true, 30)))
    assert(u.map.size === 2 && u.timedOutKeys === 2)
    // a's timer (15) is due at 20, but a has data there: its data call only, re-armed to 25.
    val rearmed = run(Seq(record("a", 10), record("a", 20)), timeline, TimeoutPolicy.Timers(false))
    assert(rearmed === Seq(("a", 1, false, 10), ("a", 2, false, 20), ("a", 3, true, 30)))
  }

  test("event-time timers fire once the watermark passes them; late records are dropped") {
    val timeline = BatchTimeline.of(Array(10L, 20L, 30L), intervalMicros = None)
      .copy(watermarks = Some(Array(TimeoutPolicy.NoWatermark, 12L, 30L)))
    val u = updater(TimeoutPolicy.Timers(eventTime = true))
    // The record time doubles as its event time; c at 30 is at the watermark: late.
    val out = run(Seq(record("a", 10), record("b", 20), record("c", 30)), timeline,
      TimeoutPolicy.Timers(eventTime = true), updaterToUse = Some(u), lateRows = Some(1))
    assert(out === Seq(("a", 1, false, 10), ("b", 1, false, 20), ("a", 2, true, 30),
      ("b", 2, true, 30)))
    assert(u.lateRowsDropped === 1)
  }

  test("a replay holds each batch's timers to that batch's watermark (none in the first)") {
    // The function sets a timer 5 after the batch. a's 15 is taken in the first batch (no
    // watermark yet, as a Spark batch query has none); in the second, at watermark 30, b's 25
    // is already due, which Spark's setTimeoutTimestamp refuses: the run fails, naming b.
    val timeline = BatchTimeline.of(Array(10L, 20L), intervalMicros = None)
      .copy(watermarks = Some(Array(TimeoutPolicy.NoWatermark, 30L)))
    val u = updater(TimeoutPolicy.Timers(eventTime = true))
    val e = intercept[IllegalArgumentException](run(Seq(record("a", 10), record("b", 20)),
        timeline, TimeoutPolicy.Timers(eventTime = true), updaterToUse = Some(u)))
    assert(e.getMessage.contains("timeout_at of the key (b) is 1970-01-01T00:00:00.000025Z " +
        "(set by its call in the batch at 1970-01-01T00:00:00.000020Z), earlier than the " +
        "batch's watermark 1970-01-01T00:00:00.000030Z"))
    assert(u.map.getTime(keyRow("a")) === 15L)
    // The same in processing time: each batch's timer is after its own batch time.
    assert(run(Seq(record("a", 10), record("b", 20)), timeline, TimeoutPolicy.Timers(false)) ===
      Seq(("a", 1, false, 10), ("b", 1, false, 20), ("a", 2, true, 20)))
  }

  test("replay watermarks follow Structured Streaming: max event time so far minus the delay") {
    val wm = BatchTimeline.watermarksOf(Array(15000L, Long.MinValue, 9000L, 21000L), delayMs = 10)
    assert(wm.toSeq === Seq(TimeoutPolicy.NoWatermark, 5000L, 5000L, 5000L))
    assert(BatchTimeline.watermarksOf(Array(3000L, 40000L, 0L), delayMs = 10).toSeq ===
      Seq(TimeoutPolicy.NoWatermark, 0L, 30000L))
  }

  test("the policy counts batches in the query: a stream's micro-batch n scans when n does") {
    val timeline = BatchTimeline.single(100L)
    val policy = TimeoutPolicy.Idle(timeoutMicros = 1, scanEvery = 10)
    // A one-batch timeline as batch 10 of its query scans; as batch 9 it does not.
    assert(run(Seq(record("a", 0)), timeline, policy, firstBatch = 9).map(_._3) === Seq(false))
    val u = updater(policy)
    u.loadInitialState(keyRow("a"), stateRow(1L), 0L)
    val scanned = new BatchReplayIterator(Iterator.empty, _ => 100L, timeline, 10, u, policy,
      None, () => ()).map(_.getBoolean(2)).toList
    assert(scanned === Seq(true))
    assert(u.map.size === 0)
  }

  /**
   * A real-time batch's clock (ms) that reads, while a record waits to run, the time the
   * record "arrived": its time column is its arrival in ms. Reads after the last record see
   * `end`. Each call's batch time is then the arrival in micros.
   */
  private def arrivals(records: Seq[InternalRow], end: Long, intervalMs: Long)
      : (Iterator[InternalRow], BatchClock.WallClock) = {
    var now = 0L
    val input = new Iterator[InternalRow] {
      private val rows = records.iterator
      override def hasNext: Boolean = rows.hasNext || { now = end; false }
      override def next(): InternalRow = {
        val row = rows.next()
        now = row.getLong(1)
        row
      }
    }
    (input, BatchClock.WallClock(intervalMs, () => now))
  }

  test("in a real-time batch each call sees the clock, and keys time out between records " +
    "as it passes their deadline, whatever the batch's number or records") {
    val ms = 1000L
    val rtmBatch = BatchTimeline.single(0L)
    def realTime(records: Seq[InternalRow], policy: TimeoutPolicy, intervalMs: Long,
        end: Long): Seq[(String, Long, Boolean, Long)] = {
      val (input, clock) = arrivals(records, end, intervalMs)
      val u = updater(policy, clock = clock)
      new BatchReplayIterator(input, _ => 0L, rtmBatch, 7, u, policy, None, () => (),
        readAhead = false, clock = clock).map { row =>
        (row.getUTF8String(0).toString, row.getLong(1), row.getBoolean(2), row.getLong(3))
      }.toList
    }
    // Timers 5 µs after each call: a's (set at 1 ms) is due at b's arrival (2 ms), and fires
    // before b runs, though a had a record in the batch; b's fires after the records end.
    val timers = TimeoutPolicy.Timers(eventTime = false)
    assert(realTime(Seq(record("a", 1), record("b", 2)), timers, 0, end = 3) === Seq(
      ("a", 1, false, 1 * ms), ("a", 2, true, 2 * ms), ("b", 1, false, 2 * ms),
      ("b", 2, true, 3 * ms)))
    // Looked for at most every 5 ms: at the first record (1 ms), then not before 6 ms, when
    // a's and b's timers fire before c runs; c's is not due by the batch's end.
    assert(realTime(Seq(record("a", 1), record("b", 2), record("c", 6)), timers, 5,
      end = 6) === Seq(("a", 1, false, 1 * ms), ("b", 1, false, 2 * ms), ("a", 2, true, 6 * ms),
      ("b", 2, true, 6 * ms), ("c", 1, false, 6 * ms)))
    // An idle timeout of 1.5 ms, though the policy scans only every 10th batch (this is the
    // 7th): a, idle since 1 ms, times out at c's arrival (3 ms); b (2 ms) at the batch's end.
    val idle = TimeoutPolicy.Idle(timeoutMicros = 1500, scanEvery = 10)
    assert(realTime(Seq(record("a", 1), record("b", 2), record("c", 3)), idle, 0,
      end = 4) === Seq(("a", 1, false, 1 * ms), ("b", 1, false, 2 * ms), ("a", 1, true, 3 * ms),
      ("c", 1, false, 3 * ms), ("b", 1, true, 4 * ms)))
  }

  test("a group function's initial-state keys without records are called once, first batch") {
    val timeline = BatchTimeline.of(Array(10L, 20L), intervalMicros = None)
    def loaded(kind: FunctionKind): StateUpdater = {
      val u = updater(TimeoutPolicy.Never, kind)
      Seq("a" -> 5L, "c" -> 7L).foreach { case (k, n) =>
        u.loadInitialState(keyRow(k), stateRow(n), 10)
      }
      u
    }
    val records = Seq(record("a", 10), record("b", 10), record("c", 20))
    // After the first batch's records: c, which had none in it, is called (its count + 1, as
    // this function counts calls); a was called for its record, and is not called again.
    assert(run(records, timeline, TimeoutPolicy.Never, updaterToUse = Some(loaded(perGroup))) ===
      Seq(("a", 6, false, 10), ("b", 1, false, 10), ("c", 8, false, 10), ("c", 9, false, 20)))
    // A per-record function (a DStream's mapWithState) only seeds the state.
    assert(run(records, timeline, TimeoutPolicy.Never, updaterToUse = Some(loaded(perRecord))) ===
      Seq(("a", 6, false, 10), ("b", 1, false, 10), ("c", 8, false, 20)))
  }

  test("snapshots follow each batch: batch time, key, state") {
    val timeline = BatchTimeline.of(Array(10L, 20L), intervalMicros = None)
    val layout = StateRowsAfterBatch.Snapshots(Seq(TimestampType, StringType, LongType))
    val u = updater(TimeoutPolicy.Never)
    val rows = new BatchReplayIterator(Iterator(record("a", 10), record("a", 20), record("b", 20)),
      _.getLong(1), timeline, 1, u, TimeoutPolicy.Never, Some(layout.open()), () => ())
      .map(_.copy()).toList
    // Emitted rows (4 columns) and snapshot rows (3 columns) interleave, batch by batch.
    val snapshots = rows.filter(_.numFields == 3)
      .map(r => (r.getLong(0), r.getUTF8String(1).toString, r.getLong(2)))
    assert(snapshots.sortBy(s => (s._1, s._2)) === Seq((10, "a", 1), (20, "a", 2), (20, "b", 1)))
  }

  test("the final state follows the last batch only, with read_state's time columns") {
    val timeline = BatchTimeline.of(Array(10L, 12L), intervalMicros = None)
    def finalState(timeouts: TimeoutPolicy): Seq[(String, Long, Option[Long], Option[Long])] = {
      val rows = StateRowsAfterBatch.FinalState(
        Seq(StringType, LongType, TimestampType, TimestampType), stateWidth = 1,
        timers = timeouts.isInstanceOf[TimeoutPolicy.Timers], timerOnlyKeys = false)
      new BatchReplayIterator(Iterator(record("a", 10), record("b", 10), record("a", 12)),
        _.getLong(1), timeline, 1, updater(timeouts), timeouts, Some(rows.open()), () => ())
        .map(_.copy()).toList
        // The three records' emitted rows, then the final state's two, after the last batch.
        .drop(3)
        .map { r =>
          def time(i: Int) = if (r.isNullAt(i)) None else Some(r.getLong(i))
          (r.getUTF8String(0).toString, r.getLong(1), time(2), time(3))
        }.sortBy(_._1)
    }
    // Each key once, after the last batch: its last update time, no timer...
    assert(finalState(TimeoutPolicy.Idle(100, 1)) ===
      Seq(("a", 2, Some(12), None), ("b", 1, Some(10), None)))
    // ...or with timers (set 5 after the batch) its pending timer, no update time.
    assert(finalState(TimeoutPolicy.Timers(eventTime = false)) ===
      Seq(("a", 2, None, Some(17)), ("b", 1, None, Some(15))))
  }

  test("resumed initial-state keys keep their time and are not called without records") {
    val timeline = BatchTimeline.of(Array(100L, 200L), intervalMicros = None)
    val policy = TimeoutPolicy.Idle(timeoutMicros = 150, scanEvery = 1)
    val u = updater(policy, perGroup)
    // Last updated at 40: idle past 150 by the batch at 200, not by the one at 100.
    u.resumeState(keyRow("a"), stateRow(5L), 40)
    u.resumeState(keyRow("c"), stateRow(7L), 90)
    val out = run(Seq(record("c", 100)), timeline, policy, updaterToUse = Some(u))
    assert(out === Seq(("c", 8, false, 100), ("a", 5, true, 200)))
  }

  test("records read ahead in groups from an input that reuses its row run as they came") {
    // A shuffle reader hands out one row object, rewritten for each record; the replay reads
    // groups of records ahead (for the map's prefetch), so it must keep copies. Keys of
    // varying length make a later copy outgrow an earlier one's bytes; 3 batches and 100
    // records cross several groups and batch boundaries inside a group.
    val input =
      UnsafeProjection.create(Array[org.apache.spark.sql.types.DataType](StringType, LongType))
    val keys = (0 until 100).map(i => if (i % 3 == 0) "k" * (1 + i % 40) else s"key${i % 7}")
    val times = (0 until 100).map(i => 10L * (1 + i / 40))
    val rows = keys.zip(times).map { case (k, t) => record(k, t) }
    val timeline = BatchTimeline.of(Array(10L, 20L, 30L), intervalMicros = None)
    val u = updater(TimeoutPolicy.Never)
    assert(u.prefetches)
    val reused = run(rows.view.map(input(_)), timeline, TimeoutPolicy.Never, updaterToUse = Some(u))
    val fresh = run(rows, timeline, TimeoutPolicy.Never)
    assert(reused.size === 100)
    assert(reused === fresh)
    // Each record's count is the number of records of its key so far.
    val expected = keys.zip(times).zipWithIndex.map { case ((k, t), i) =>
      (k, keys.take(i + 1).count(_ == k).toLong, false, t)
    }
    assert(reused === expected)
  }

  test("a record after the timeline's last batch is a bug, not silently dropped") {
    val timeline = BatchTimeline.of(Array(10L), intervalMicros = None)
    val e = intercept[IllegalStateException](
      run(Seq(record("a", 10), record("a", 99)), timeline, TimeoutPolicy.Never))
    assert(e.getMessage.contains("records left after the last batch"))
  }

  private val keyProjection =
    UnsafeProjection.create(Array[org.apache.spark.sql.types.DataType](StringType))
  private val stateProjection =
    UnsafeProjection.create(Array[org.apache.spark.sql.types.DataType](LongType))
  private def keyRow(k: String) = keyProjection(InternalRow(UTF8String.fromString(k))).copy()
  private def stateRow(n: Long) = stateProjection(InternalRow(n)).copy()
}

object BatchReplayIteratorSuite {
  private val stateType = new StructType().add("n", LongType)

  /** A per-record function's kind. */
  val perRecord: FunctionKind = FunctionKind.PerRecord(Nil, Nil)

  /**
   * The suites' function over records (k STRING, ts): counts records per key in `n` and emits
   * (k, n after, timing out, batch time); with timers, a record sets its key's timer 5 µs
   * after its batch time and a timing-out call clears it. Resolved on the driver; serializable,
   * so a task can compile it ([[updater]]).
   */
  def counting(spark: SparkSession, timeouts: TimeoutPolicy): StateFunction = {
    val key = AttributeReference("k", StringType)()
    val ts = AttributeReference("ts", TimestampType)()
    val state = UnresolvedExtractValue(UnresolvedAttribute(StateFunctionInput.State), Literal("n"))
    val newState =
      UnresolvedExtractValue(UnresolvedAttribute(StateFunctionInput.NewState), Literal("n"))
    val update =
      CreateNamedStruct(Seq(Literal("n"), Add(Coalesce(Seq(state, Literal(0L))), Literal(1L))))
    val emit = CreateNamedStruct(Seq(
        Literal("k"), UnresolvedAttribute("k"),
        Literal("n"), Coalesce(Seq(newState, state)),
        Literal("timing_out"), UnresolvedAttribute(StateFunctionInput.IsTimingOut),
        Literal("batch"), UnresolvedAttribute(StateFunctionInput.BatchTime)))
    val timeoutAt = If(UnresolvedAttribute(StateFunctionInput.IsTimingOut),
      Literal(null, TimestampType),
      MicrosToTimestamp(Add(UnixMicros(UnresolvedAttribute(StateFunctionInput.BatchTime)),
          Literal(5L))))
    new StateFunctionResolver(spark).resolve(Seq(key, ts), stateType,
      Some(update), None, Some(emit),
      timeouts match {
        case _: TimeoutPolicy.Timers => Some(timeoutAt)
        case TimeoutPolicy.Never | _: TimeoutPolicy.Idle => None
      })
  }

  /** An updater of [[counting]] over a new state map, compiled where it is called. */
  def updater(
      function: StateFunction,
      timeouts: TimeoutPolicy,
      kind: FunctionKind = perRecord,
      clock: BatchClock = BatchClock.OfTimeline): StateUpdater = {
    val compiled = new CompiledStateFunction(function, Seq(0, 1), 2, Seq(0), Seq(StringType))
    compiled.initialize(0)
    StateUpdater(StateMap.empty(1, 1), compiled, 2, kind, Seq(1), timeouts, clock = clock)
  }
}
