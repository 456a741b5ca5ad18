package io.mapwithstate.execution

import io.mapwithstate.plan.{FunctionKind, StateFunctionInput, StateFunctionResolver}
import io.mapwithstate.state.StateMap
import org.apache.spark.sql.catalyst.analysis.{UnresolvedAttribute, UnresolvedExtractValue}
import org.apache.spark.sql.catalyst.expressions.{
  Add,
  AttributeReference,
  Coalesce,
  CreateNamedStruct,
  Expression,
  GenericInternalRow,
  Literal
}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.{LongType, StructType}

/**
 * Times the per-record path of the operator without Spark around it: [[StateUpdater]] over a
 * fresh state map, with the state function of the end-to-end benchmark (a count and a sum per
 * BIGINT key, emitting (key, count) per record), for one partition's share of its input.
 * Prints only; nothing is asserted, since timings depend on the machine.
 *
 * `Test/runMain io.mapwithstate.execution.StateUpdaterBench [keys] [recordsPerKey] [rounds]`
 */
object StateUpdaterBench {

  def main(args: Array[String]): Unit = {
    val keys = if (args.length > 0) args(0).toInt else 250000
    val perKey = if (args.length > 1) args(1).toInt else 5
    val rounds = if (args.length > 2) args(2).toInt else 7
    val spark = SparkSession.builder().master("local[1]").appName("StateUpdaterBench")
      .config("spark.ui.enabled", "false").getOrCreate()
    try {
      for (emit <- Seq(true, false)) {
        val times = (1 to rounds).map(_ => run(spark, keys, perKey, emit))
        val sorted = times.sorted
        println(f"emit=$emit%-5s $keys%,d keys x $perKey records: median " +
          f"${sorted(sorted.size / 2)}%,d ms (all ${times.mkString(", ")})")
      }
    } finally {
      spark.stop()
    }
  }

  private def run(spark: SparkSession, keys: Int, perKey: Int, emit: Boolean): Long = {
    val key = AttributeReference("key", LongType)()
    val value = AttributeReference("value", LongType)()
    def state(name: String): Expression =
      Coalesce(Seq(UnresolvedExtractValue(UnresolvedAttribute(StateFunctionInput.State),
            Literal(name)), Literal(0L)))
    val update = CreateNamedStruct(Seq(
        Literal("count"), Add(state("count"), Literal(1L)),
        Literal("sum"), Add(state("sum"), UnresolvedAttribute("value"))))
    val emitted = CreateNamedStruct(Seq(
        Literal("key"), UnresolvedAttribute("key"),
        Literal("count"),
        UnresolvedExtractValue(UnresolvedAttribute(StateFunctionInput.NewState),
          Literal("count"))))
    val stateType = new StructType().add("count", LongType).add("sum", LongType)
    val function = new StateFunctionResolver(spark).resolve(
      Seq(key, value), stateType, Some(update), None, if (emit) Some(emitted) else None)
    val compiled = new CompiledStateFunction(function, Seq(0, 1), 2, Seq(0), Seq(LongType))
    compiled.initialize(0)
    val updater = StateUpdater(StateMap.empty(1, 2), compiled, 2,
      FunctionKind.PerRecord(Seq(value), Nil), Seq(1), TimeoutPolicy.Never)

    val record = new GenericInternalRow(2)
    val total = keys.toLong * perKey
    val start = System.nanoTime()
    var i = 0L
    var check = 0L
    while (i < total) {
      // Keys scattered as in the benchmark's data (id * 7919 % K).
      record.setLong(0, (i * 7919) % keys)
      record.setLong(1, i)
      val out = updater.processRecord(record, 0L)
      if (out != null) check += out.getLong(1)
      i += 1
    }
    val elapsed = (System.nanoTime() - start) / 1000000
    require(updater.map.size == keys, s"${updater.map.size} keys")
    if (emit) require(check == keys.toLong * perKey * (perKey + 1) / 2, s"checksum $check")
    elapsed
  }
}
