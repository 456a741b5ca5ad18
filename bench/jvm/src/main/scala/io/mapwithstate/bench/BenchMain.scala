package io.mapwithstate.bench

import java.io.{File, FileWriter}

import io.mapwithstate.bench.StreamingRun.{HdfsProvider, RocksDbProvider}
import io.mapwithstate.bench.StreamingSystem.{stateful, Plain, Timed}
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.streaming.OutputMode

/**
 * The benchmark's JVM side, started by `bench/run` through pyspark's spark-submit: runs Spark's
 * own stateful operators (and the stateless floor) over one scenario's Parquet batches, one
 * system after the other in this JVM, and appends one JSON line per system to the results file.
 *
 * Arguments: `<input dir> <work dir> <results file> <system>...`, systems being `floor`,
 * `fmgws-hdfs`, `fmgws-rocksdb`, `dstream`, S5's `fmgws-sum-hdfs` and `fmgws-sum-rocksdb`
 * (count and sum per key per batch), and S4's `fmgws-timers-hdfs` and `fmgws-timers-rocksdb`
 * (timers, see [[TimerCount]]; their settings in the conf `spark.mapwithstate.bench.timers`),
 * and transformWithState's `tws` (S1, S2: [[TransformWithStateRunningCount]]), `tws-sum` (S5:
 * [[TransformWithStateCountSum]]) and `tws-timers` (S4: [[TransformWithStateTimers]]), on
 * Spark's RocksDB store.
 * A system that fails is reported as failed
 * rather than ending the run, so one broken baseline does not hide the others.
 *
 * With the conf `spark.mapwithstate.bench.warmUp` (a directory of batches), every system first
 * runs once over it, unmeasured, before any measured query: the Connect server gets the same
 * warm-up (bench/__main__.py), so every measured query runs on a warm JVM.
 */
object BenchMain {

  val WarmUpConf = "spark.mapwithstate.bench.warmUp"

  /** The local property naming the system of a measured query's jobs (bench/tasktime.py). */
  val SystemProperty = "mapwithstate.bench.system"

  def main(args: Array[String]): Unit = {
    require(args.length >= 4, "usage: BenchMain <input dir> <work dir> <results file> <system>...")
    val Array(input, work, results) = args.take(3)
    val spark = SparkSession.builder().appName("mapwithstate-bench").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try {
      spark.conf.getOption(WarmUpConf).foreach { warmUp =>
        args.drop(3).zipWithIndex.foreach { case (system, i) =>
          try run(spark, system, warmUp, new File(work, s"warm-up-$i-$system").getPath)
          catch { case e: Exception => System.err.println(s"warm-up of $system failed: $e") }
        }
      }
      args.drop(3).zipWithIndex.foreach { case (system, i) =>
        val dir = new File(work, s"$i-$system").getPath
        // Names the measured query's jobs in the event log (bench/tasktime.py); its stream
        // execution thread inherits this thread's local properties when the query starts.
        spark.sparkContext.setLocalProperty(SystemProperty, system)
        val outcome =
          try Right(run(spark, system, input, dir))
          catch { case e: Exception => Left(s"${e.getClass.getSimpleName}: ${e.getMessage}") }
          finally spark.sparkContext.setLocalProperty(SystemProperty, null)
        append(results, Json.result(system, outcome))
      }
    } finally spark.stop()
  }

  private def run(spark: SparkSession, system: String, input: String, dir: String): Seq[Batch] =
    system match {
      case "dstream" => DStreamRunningCount.run(spark, input, dir)
      case streaming => streamingSystem(streaming).run(spark, streaming, input, dir)
    }

  /** The Structured Streaming systems, by the names bench/systems.py gives them. */
  private def streamingSystem(name: String): StreamingSystem = name match {
    case "floor" => StreamingSystem(OutputMode.Append(), None, Plain(StatelessFloor.query))
    case "fmgws-hdfs" => stateful(HdfsProvider, Plain(RunningCount.query))
    case "fmgws-rocksdb" => stateful(RocksDbProvider, Plain(RunningCount.query))
    case "fmgws-sum-hdfs" => stateful(HdfsProvider, Plain(GroupCountSum.query))
    case "fmgws-sum-rocksdb" => stateful(RocksDbProvider, Plain(GroupCountSum.query))
    case "fmgws-timers-hdfs" => stateful(HdfsProvider, Timed(TimerCount.query))
    case "fmgws-timers-rocksdb" => stateful(RocksDbProvider, Timed(TimerCount.query))
    case "tws" => stateful(RocksDbProvider, Plain(TransformWithStateRunningCount.query))
    case "tws-sum" => stateful(RocksDbProvider, Plain(TransformWithStateCountSum.query))
    case "tws-timers" => stateful(RocksDbProvider, Timed(TransformWithStateTimers.query))
    case other => throw new IllegalArgumentException(s"unknown system $other")
  }

  private def append(path: String, line: String): Unit = {
    val out = new FileWriter(path, true)
    try out.write(line + "\n")
    finally out.close()
  }
}
