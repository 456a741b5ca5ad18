package io.mapwithstate.execution

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import io.mapwithstate.plan.{FunctionKind, MapWithState}
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue

/**
 * What of map_with_state runs in Spark's Real-Time Mode (`trigger(realTime=...)`), decided when
 * a real-time batch is planned.
 *
 * A real-time batch is long (the trigger's duration) and its records flow through the plan as
 * the source reads them: each stage runs for the whole batch, every stage's tasks at once,
 * joined by a pipelined shuffle. An operator belongs there only if it hands each record's
 * output on as soon as it has it. A per-record function does: each record is one call, its
 * output the call's rows, and the state store commits when the batch's input ends, as in a
 * micro-batch. So the streaming operator is on Spark's Real-Time Mode allowlist
 * (`StreamingQueryGlue.admitToRealTimeMode`, the one way in for an operator outside Spark), and
 * this check refuses, with a clear error, the shapes that would hold records back:
 *
 *  - a group function (`map_groups_with_state`): it is called once per key with all of the
 *    key's records of the batch, so nothing is emitted before the long batch ends;
 *  - `order_by`: the records of a state partition are sorted before the first is run, which
 *    waits for the batch's last;
 *  - `initial_state`: it is read in the query's first batch, through a shuffle of a batch plan
 *    that Real-Time Mode's pipelined stages do not run; start the query with another trigger to
 *    load it, then restart it in Real-Time Mode from the checkpoint.
 *
 * Both backends run in it: Real-Time Mode runs on checkpoint format v2 (Spark sets it for the
 * query), where each commit of a partition's state is a file of its own, named by a unique id
 * that the batch's commit log entry records, so that a failed batch re-executed (its tasks may
 * still be writing) never overwrites or mixes with the state the next batch reads. Spark's
 * RocksDB store keeps its files so, and the heap store does the same
 * ([[io.mapwithstate.state.CommitLineage]]).
 *
 * Within a real-time batch the operator also serves one state partition per task (the
 * pipelined stages need every partition's task running from the start: see
 * [[StateTaskGroups]]), runs records in their arrival order, and reads none ahead.
 *
 * Timers and idle timeouts fire within the batch, not at its end against its start: each call
 * sees the wall clock as its batch time, and the keys due by it are looked for between records
 * (at most every `spark.mapwithstate.realTimeMode.timerIntervalMs`) and when the records end,
 * each timing-out call's output handed on at once ([[BatchClock.WallClock]]), as Spark's
 * transformWithState does in Real-Time Mode. They change the state like a record's calls,
 * committed with the batch: a batch re-executed from the last commit fires them again from
 * that state. A partition that gets no records fires its due keys too, within about the
 * interval: its task's records are read by a thread of their own ([[RecordHandOff]]), which
 * waits in the shuffle while the task's thread waits for it with a timeout and looks for due
 * keys as the interval passes. transformWithState waits in the shuffle itself, so its timers
 * in a quiet partition fire only when a record arrives or at the batch's end.
 */
object RealTimeMode {

  /** The streaming operator's class, as Spark's allowlist names operators. */
  val OperatorClass: String = classOf[MapWithStateStreamExec].getName

  /** Admits the streaming operator to Spark's Real-Time Mode allowlist; see the object doc. */
  def admitOperator(): Boolean = StreamingQueryGlue.admitToRealTimeMode(OperatorClass)

  /** Fails with [[ErrorCondition.UnsupportedInRealTimeMode]] if `m` cannot run record by record. */
  def check(m: MapWithState): Unit = {
    def refuse(what: String, why: String): Nothing =
      throw MapWithStateException(ErrorCondition.UnsupportedInRealTimeMode,
        s"${m.functionName} in Real-Time Mode (trigger(realTime=...)): $what is not supported: " +
          why)
    m.kind match {
      case _: FunctionKind.PerGroup =>
        refuse("a group function",
          "it is called once per key with all of the key's records of a batch, so it waits " +
            "for the long-running batch to end; use map_with_state with a per-record " +
            "function, or a processingTime trigger")
      case FunctionKind.PerRecord(_, orderBy) if orderBy.nonEmpty =>
        refuse("order_by",
          "each state partition's records would be sorted before the first runs, which waits " +
            "for the long-running batch to end; records run in their arrival order (per Kafka " +
            "partition) without it")
      case _ =>
    }
    if (m.initialState.isDefined) {
      refuse("initial_state",
        "it is loaded in the query's first batch through a batch shuffle that a real-time " +
          "batch does not run; load it with a processingTime or availableNow trigger, then " +
          "restart the query from its checkpoint in Real-Time Mode")
    }
  }
}
