package io.mapwithstate.execution

import io.mapwithstate.{LocalSpark, MapWithState, StateSpec}
import io.mapwithstate.functions._
import org.apache.spark.sql.functions._
import org.scalatest.funsuite.AnyFunSuite

/** Compiled state functions are reused by later tasks of the same function, on real tasks. */
class CompiledStateFunctionPoolSuite extends AnyFunSuite with LocalSpark {

  private def runningCount(emitted: String) = StateSpec.function("n BIGINT",
    update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
    emit = struct(col("word"), newState("n").as(emitted)))

  private def counts(emitted: String, words: Seq[String]): Seq[(String, Long)] = {
    val session = spark
    import session.implicits._
    MapWithState.mapWithState(words.toDF("word").repartition(4), Seq(col("word")),
      runningCount(emitted)).collect().map(r => (r.getString(0), r.getLong(1))).sorted.toSeq
  }

  test("a later query of an equal function compiles nothing; another function compiles its own") {
    val words = Seq("a", "b", "a", "c", "a", "b")
    val expected = Seq(("a", 1L), ("a", 2L), ("a", 3L), ("b", 1L), ("b", 2L), ("c", 1L))
    assert(counts("n", words) == expected)
    val afterFirst = CompiledStateFunctionPool.compilations
    // Two partitions (LocalSpark), two cores: at most two instances were ever in use at once.
    assert(counts("n", words) == expected)
    assert(counts("n", words.reverse).map(_._1) == expected.map(_._1))
    assert(CompiledStateFunctionPool.compilations == afterFirst)
    assert(counts("count", words) == expected)
    assert(CompiledStateFunctionPool.compilations > afterFirst)
  }

  test("an instance whose task failed is not reused") {
    val session = spark
    import session.implicits._
    // Every record's emit divides by zero (ANSI mode), so every task that gets records fails;
    // with 50 keys, no state partition is empty (an empty one would succeed and give back its
    // instance).
    val failing = StateSpec.function("n BIGINT",
      update = struct((coalesce(state("n"), lit(0L)) + 1).as("n")),
      emit = struct(col("word"), (newState("n") / lit(0L)).cast("bigint").as("m")))
    def run(): Unit = intercept[Exception] {
      MapWithState.mapWithState((1 to 50).map(i => s"w$i").toDF("word"), Seq(col("word")),
        failing).collect()
    }
    val before = CompiledStateFunctionPool.compilations
    run()
    val afterFailure = CompiledStateFunctionPool.compilations
    assert(afterFailure > before)
    // The failed function compiles again: its instances were dropped, not given back.
    run()
    assert(CompiledStateFunctionPool.compilations > afterFailure)
  }
}
