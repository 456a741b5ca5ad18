package io.mapwithstate.execution

import io.mapwithstate.LocalSpark
import io.mapwithstate.plan.{FunctionKind, StateFunctionInput, StateFunctionResolver}
import io.mapwithstate.state.StateMap
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.analysis.{UnresolvedAttribute, UnresolvedExtractValue}
import org.apache.spark.sql.catalyst.expressions.{
  AttributeReference,
  CaseWhen,
  Coalesce,
  CreateNamedStruct,
  EqualTo,
  Expression,
  Literal,
  Add,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.types.{IntegerType, StringType, StructType, TimestampType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * The per-record semantics of Spark's `MapWithStateRDDRecord.updateRecordWithData`, as
 * MapWithStateRDDSuite checks them, on our compiled state function over a StateMap.
 *
 * The function reads its record's action from the value column, like the suite's
 * mapping function: "noop" does nothing, "increment" updates the state to state + 1,
 * "remove" removes it, "both" asks for both (remove wins). Every call emits
 * (key, action, state before, state after, timing out).
 */
class StateUpdaterSuite extends AnyFunSuite with LocalSpark {

  private val key = AttributeReference("k", StringType)()
  private val action = AttributeReference("v", StringType)()
  private val stateType = new StructType().add("n", IntegerType)
  private val initialTime = 1000L
  private val batchTime = 2000L

  private def col(name: String): Expression = UnresolvedAttribute(name)
  private def field(struct: String, name: String): Expression =
    UnresolvedExtractValue(UnresolvedAttribute(struct), Literal(name))
  private def actionIs(a: String): Expression = EqualTo(col("v"), Literal(a))

  private val perRecord = FunctionKind.PerRecord(Nil, Nil)

  private def newUpdater(refreshesIdleKeys: Boolean): StateUpdater = {
    val update = CaseWhen(Seq(
        (actionIs("increment"),
          CreateNamedStruct(Seq(Literal("n"),
              Add(Coalesce(Seq(field(StateFunctionInput.State, "n"), Literal(0))), Literal(1))))),
        (actionIs("both"), CreateNamedStruct(Seq(Literal("n"), Literal(100))))))
    val remove = org.apache.spark.sql.catalyst.expressions.Or(actionIs("remove"), actionIs("both"))
    val emit = CreateNamedStruct(Seq(
        Literal("k"), col("k"), Literal("v"), col("v"),
        Literal("before"), field(StateFunctionInput.State, "n"),
        Literal("after"), field(StateFunctionInput.NewState, "n"),
        Literal("timing_out"), col(StateFunctionInput.IsTimingOut)))
    val function = new StateFunctionResolver(spark)
      .resolve(Seq(key, action), stateType, Some(update), Some(remove), Some(emit))
    val compiled = new CompiledStateFunction(function, Seq(0, 1), 2, Seq(0), Seq(StringType))
    compiled.initialize(0)
    StateUpdater(StateMap.empty(1, 1), compiled, 2, perRecord, Seq(1),
      if (refreshesIdleKeys) TimeoutPolicy.Idle(timeoutMicros = 1, scanEvery = 1)
      else TimeoutPolicy.Never)
  }

  private val keyRow =
    UnsafeProjection.create(Array[org.apache.spark.sql.types.DataType](StringType))
  private val stateRow =
    UnsafeProjection.create(Array[org.apache.spark.sql.types.DataType](IntegerType))
  private def k(s: String): UnsafeRow = keyRow(InternalRow(UTF8String.fromString(s))).copy()
  private def s(n: Int): UnsafeRow = stateRow(InternalRow(n)).copy()
  private def record(key: String, act: String): InternalRow =
    InternalRow(UTF8String.fromString(key), UTF8String.fromString(act))

  /** (k, v, before, after, timing out) of an emitted row, nulls as None. */
  private def call(row: UnsafeRow): (String, Option[String], Option[Int], Option[Int], Boolean) =
    (row.getUTF8String(0).toString,
      Option(row.getUTF8String(1)).map(_.toString),
      if (row.isNullAt(2)) None else Some(row.getInt(2)),
      if (row.isNullAt(3)) None else Some(row.getInt(3)),
      row.getBoolean(4))

  /** The map's entries as key -> (state, update time). */
  private def contents(updater: StateUpdater): Map[String, (Int, Long)] =
    updater.map.getAll()
      .map(e => e.key.getUTF8String(0).toString -> (e.state.getInt(0), e.updateTime)).toMap

  test("a record is processed even when its key has no state, and leaves it absent") {
    val updater = newUpdater(refreshesIdleKeys = false)
    assert(call(updater.processRecord(record("a", "noop"), batchTime)) ===
      ("a", Some("noop"), None, None, false))
    assert(contents(updater).isEmpty)
  }

  test("an update creates the state at the batch time") {
    val updater = newUpdater(refreshesIdleKeys = false)
    assert(call(updater.processRecord(record("a", "increment"), batchTime)) ===
      ("a", Some("increment"), None, Some(1), false))
    assert(contents(updater) === Map("a" -> (1, batchTime)))
  }

  test("without a timeout, a record that does not update keeps the state's update time") {
    val updater = newUpdater(refreshesIdleKeys = false)
    updater.loadInitialState(k("a"), s(0), initialTime)
    updater.processRecord(record("a", "noop"), batchTime)
    assert(contents(updater) === Map("a" -> (0, initialTime)))
  }

  test("with a timeout, every record refreshes its key's update time") {
    val updater = newUpdater(refreshesIdleKeys = true)
    updater.loadInitialState(k("a"), s(0), initialTime)
    assert(call(updater.processRecord(record("a", "noop"), batchTime)) ===
      ("a", Some("noop"), Some(0), Some(0), false))
    assert(contents(updater) === Map("a" -> (0, batchTime)))
  }

  test("records of one key see each other's updates, in order") {
    val updater = newUpdater(refreshesIdleKeys = false)
    val calls = (1 to 3).map(_ => call(updater.processRecord(record("a", "increment"), batchTime)))
    assert(calls.map(c => (c._3, c._4)) ===
      Seq((None, Some(1)), (Some(1), Some(2)), (Some(2), Some(3))))
    assert(contents(updater) === Map("a" -> (3, batchTime)))
  }

  test("remove removes the state; new_state is null") {
    val updater = newUpdater(refreshesIdleKeys = true)
    updater.loadInitialState(k("a"), s(5), initialTime)
    assert(call(updater.processRecord(record("a", "remove"), batchTime)) ===
      ("a", Some("remove"), Some(5), None, false))
    assert(contents(updater).isEmpty)
    assert(updater.removedKeys === 1)
  }

  test("remove wins over update") {
    val updater = newUpdater(refreshesIdleKeys = false)
    updater.loadInitialState(k("a"), s(5), initialTime)
    assert(call(updater.processRecord(record("a", "both"), batchTime))._4 === None)
    assert(contents(updater).isEmpty)
  }

  test("a state can be created again after it was removed") {
    val updater = newUpdater(refreshesIdleKeys = false)
    updater.processRecord(record("a", "increment"), batchTime)
    updater.processRecord(record("a", "remove"), batchTime)
    updater.processRecord(record("a", "increment"), batchTime + 1)
    assert(contents(updater) === Map("a" -> (1, batchTime + 1)))
  }

  test("timing out: keys last updated strictly before the threshold get one call, then go") {
    val updater = newUpdater(refreshesIdleKeys = true)
    updater.loadInitialState(k("old"), s(1), initialTime)
    updater.loadInitialState(k("edge"), s(2), initialTime + 10)
    updater.processRecord(record("fresh", "increment"), batchTime)

    val timingOut = updater.timingOutKeys(initialTime + 10).toArray
    assert(timingOut.map(_._1.getUTF8String(0).toString).toSeq === Seq("old"))
    val calls = timingOut.map { case (key, state) => call(updater.timeOut(key, state, batchTime)) }
    // the value columns are null, the state is the expiring one, nothing comes after it
    assert(calls.toSeq === Seq(("old", None, Some(1), None, true)))
    assert(contents(updater).keySet === Set("edge", "fresh"))
    assert(updater.timedOutKeys === 1)
  }

  test("update and emit as struct literals or as other struct expressions, null ones included") {
    // newUpdater's update is a CASE WHEN and its emit a struct literal; here the other way
    // round: a struct literal update, and an emit that is null for some records.
    val update = CreateNamedStruct(Seq(Literal("n"),
        Add(Coalesce(Seq(field(StateFunctionInput.State, "n"), Literal(0))), Literal(1))))
    val emit = CaseWhen(Seq((actionIs("quiet"),
          Literal(null,
            new StructType().add("k", StringType)
              .add("n", IntegerType)))),
      CreateNamedStruct(Seq(Literal("k"), col("k"),
          Literal("n"), field(StateFunctionInput.NewState, "n"))))
    val function = new StateFunctionResolver(spark)
      .resolve(Seq(key, action), stateType, Some(update), None, Some(emit))
    val compiled = new CompiledStateFunction(function, Seq(0, 1), 2, Seq(0), Seq(StringType))
    compiled.initialize(0)
    val updater =
      StateUpdater(StateMap.empty(1, 1), compiled, 2, perRecord, Seq(1), TimeoutPolicy.Never)

    def run(key: String, act: String): Option[(String, Int)] =
      Option(updater.processRecord(record(key, act), batchTime))
        .map(row => (row.getUTF8String(0).toString, row.getInt(1)))
    assert(run("a", "x") === Some(("a", 1)))
    assert(run("b", "quiet") === None)
    assert(run("a", "quiet") === None)
    assert(run("a", "x") === Some(("a", 3)))
    assert(run("b", "x") === Some(("b", 2)))
    assert(contents(updater) === Map("a" -> (3, batchTime), "b" -> (2, batchTime)))
  }

  test("an initial state with two rows for one key is refused, naming the key") {
    val updater = newUpdater(refreshesIdleKeys = false)
    updater.loadInitialState(k("a"), s(1), initialTime)
    val e = intercept[IllegalArgumentException](updater.loadInitialState(k("a"), s(2), initialTime))
    assert(e.getMessage.contains("more than one row for the key (a)"))
  }

  // Timers: the ones Spark's GroupStateImpl refuses (GroupStateSuite "illegal params to
  // setTimeout", FlatMapGroupsWithStateSuite's "timeout timestamp updated to before watermark")
  // fail the call, naming the key; clearing is always allowed.

  private val due = AttributeReference("due", TimestampType)()

  /**
   * An updater with `timeout_at` timers whose function counts calls and sets `timeoutAt`: by
   * default the record's `due` column (null clears the timer).
   */
  private def timerUpdater(
      eventTime: Boolean, timeoutAt: Expression = UnresolvedAttribute("due")): StateUpdater = {
    val update = CreateNamedStruct(Seq(Literal("n"),
        Add(Coalesce(Seq(field(StateFunctionInput.State, "n"), Literal(0))), Literal(1))))
    val function = new StateFunctionResolver(spark)
      .resolve(Seq(key, due), stateType, Some(update), None, None, Some(timeoutAt))
    val compiled = new CompiledStateFunction(function, Seq(0, 1), 2, Seq(0), Seq(StringType))
    compiled.initialize(0)
    StateUpdater(StateMap.empty(1, 1), compiled, 2, perRecord, Seq(1),
      TimeoutPolicy.Timers(eventTime))
  }

  private def timed(key: String, timer: java.lang.Long): InternalRow =
    InternalRow(UTF8String.fromString(key), timer)

  private def refusal(run: => Any): String =
    intercept[IllegalArgumentException](run).getMessage

  test("processing time: a timer must be strictly after the call's batch time") {
    val updater = timerUpdater(eventTime = false)
    updater.startBatch(TimeoutPolicy.NoWatermark)
    updater.processRecord(timed("a", batchTime + 1), batchTime)
    assert(updater.map.getTime(k("a")) === batchTime + 1)
    // null clears the timer, however late the batch
    updater.processRecord(timed("a", null), batchTime)
    assert(updater.map.getTime(k("a")) === StateMap.NoTime)
    // setTimeoutDuration(0) and negative durations: the batch time itself and before it
    Seq(batchTime, batchTime - 1000).foreach { timer =>
      val message = refusal(updater.processRecord(timed("b", timer), batchTime))
      assert(message.contains("timeout_at of the key (b) is 1970-01-01T00:00:00.00"))
      assert(message.contains("(set by its call in the batch at 1970-01-01T00:00:00.002Z)"))
      assert(message.contains("not after that batch time"))
      assert(message.contains("as Spark says: Timeout duration must be positive"))
      assert(message.contains("batch_time() plus a positive interval, or to null"))
    }
  }

  test("event time: a timer must be positive, and not earlier than the watermark " +
    "(equal is due later)") {
    val updater = timerUpdater(eventTime = true)
    updater.startBatch(5000L)
    updater.processRecord(timed("a", 5000L), batchTime)
    assert(updater.map.getTime(k("a")) === 5000L)
    val message = refusal(updater.processRecord(timed("b", 4999L), batchTime))
    assert(message.contains("timeout_at of the key (b) is 1970-01-01T00:00:00.004999Z"))
    assert(message.contains("earlier than the batch's watermark 1970-01-01T00:00:00.005Z"))
    // Spark's words print milliseconds (4999 us is 4 ms)
    assert(message.contains(
        "as Spark says: Timeout timestamp (4) cannot be earlier than the current watermark (5)"))
    assert(message.contains("watermark() or later, or to null to clear the timer"))
    // the refused call changed nothing
    assert(updater.map.get(k("b")) === null && updater.map.getTime(k("b")) === StateMap.NoTime)
  }

  test("event time without a watermark (a replay's first batch): only positivity is checked") {
    val updater = timerUpdater(eventTime = true)
    updater.startBatch(TimeoutPolicy.NoWatermark)
    updater.processRecord(timed("a", 1L), batchTime)
    assert(updater.map.getTime(k("a")) === 1L)
    // setTimeoutTimestamp(-10000) and the epoch itself
    Seq(-10000000L, 0L).foreach { timer =>
      val message = refusal(updater.processRecord(timed("b", timer), batchTime))
      assert(message.contains("timeout_at of the key (b) is 19"))
      assert(message.contains("not after 1970-01-01T00:00:00Z"))
      assert(message.contains("as Spark says: Timeout timestamp must be positive"))
    }
  }

  test("a timing-out call is held to the same rules: it cannot keep its passed timer") {
    // timeout_at keeps the key's timer unless the record brings one
    val keeps = Coalesce(Seq(UnresolvedAttribute("due"),
        UnresolvedAttribute(StateFunctionInput.TimeoutAt)))
    val updater = timerUpdater(eventTime = false, keeps)
    updater.startBatch(TimeoutPolicy.NoWatermark)
    updater.processRecord(timed("a", batchTime + 10), batchTime)
    val later = batchTime + 20
    updater.startBatch(TimeoutPolicy.NoWatermark)
    val Seq((key, state)) = updater.timingOutKeys(later).toSeq
    val message = refusal(updater.timeOut(key, state, later))
    assert(message.contains("(a) is 1970-01-01T00:00:00.002010Z (set by its timing-out call in " +
        "the batch at 1970-01-01T00:00:00.002020Z), not after that batch time"))
  }
}
