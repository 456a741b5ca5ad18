package io.mapwithstate.bench

import java.sql.Timestamp
import java.util.concurrent.TimeUnit

import org.apache.spark.sql.{Encoders, SparkSession}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.streaming.{OutputMode, StatefulProcessor, TimeMode, TimerValues}
import org.apache.spark.sql.streaming.{Trigger, TTLConfig, ValueState}

/**
 * L1's transformWithState pipeline (bench/latency.py): the running count per key that
 * map_with_state runs there, written as a Scala user writes it with Spark's recommended
 * stateful API (a [[StatefulProcessor]] with a `ValueState`, on the RocksDB store), from the
 * input topic to the output topic, in Real-Time Mode or in micro-batches.
 *
 * Each input record gives one output, keyed by the record's key, whose value is the JSON
 * `{"n": count, "produced": input's Kafka timestamp in ms}` that bench/latency.py reads back,
 * as map_with_state's pipeline writes it.
 *
 * Arguments: `<bootstrap servers> <input topic> <output topic> <checkpoint> <trigger> <seconds>`,
 * the trigger being `realtime:<duration>` or `microbatch`; the query runs for `seconds`, then
 * stops. Started by spark-submit (Spark's Kafka connector on `--jars`), on a classic session.
 * Each batch's progress is printed on a line of its own after [[ProgressPrefix]], as its
 * compact JSON, for bench/latency.py's per-batch figures (ours prints the same,
 * bench/latency_classic.py).
 */
object TransformWithStateLatency {

  /** What starts a line of the log that holds a batch's progress (bench/latency.py). */
  val ProgressPrefix = "mapwithstate-progress "

  final case class Record(key: String, produced: Timestamp)
  final case class Output(key: String, value: String)

  /** The running count: one output per record, the count so far of its key. */
  class RunningCount extends StatefulProcessor[String, Record, Output] {
    @transient private var count: ValueState[Long] = _

    override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
      count = getHandle.getValueState[Long]("count", Encoders.scalaLong, TTLConfig.NONE)
    }

    override def handleInputRows(
        key: String,
        records: Iterator[Record],
        timerValues: TimerValues): Iterator[Output] = {
      var n = if (count.exists()) count.get() else 0L
      // One record at a time in Real-Time Mode; all of the key's in a micro-batch.
      val out = records.map { record =>
        n += 1
        Output(key, s"""{"n":$n,"produced":${record.produced.getTime}}""")
      }.toList
      count.update(n)
      out.iterator
    }
  }

  def main(args: Array[String]): Unit = {
    require(args.length == 6,
      "usage: TransformWithStateLatency <bootstrap servers> <input topic> <output topic> " +
        "<checkpoint> <realtime:<duration>|microbatch> <seconds>")
    val Array(bootstrap, input, output, checkpoint, triggerArg, seconds) = args
    val trigger = triggerArg.split(":", 2) match {
      case Array("realtime", duration) => Trigger.RealTime(duration)
      case Array("microbatch") => Trigger.ProcessingTime(0L)
      case _ => throw new IllegalArgumentException(
          s"trigger: expected realtime:<duration> or microbatch, got '$triggerArg'")
    }
    val spark = SparkSession.builder().appName("transformWithState-latency").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
      StreamingRun.RocksDbProvider)
    try {
      val records = spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.fetch.max.wait.ms", "10")
        .option("kafka.max.partition.fetch.bytes", (10 << 20).toString)
        .option("subscribe", input).option("startingOffsets", "earliest").load()
        .select(col("key").cast("string").as("key"), col("timestamp").as("produced"))
        .as(Encoders.product[Record])
      val query = records
        .groupByKey(_.key)(Encoders.STRING)
        .transformWithState(new RunningCount, TimeMode.None(), OutputMode.Update())(
          Encoders.product[Output])
        .toDF()
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap).option("topic", output)
        .option("checkpointLocation", checkpoint)
        .outputMode(OutputMode.Update()).trigger(trigger).start()
      val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds.toLong)
      var printed = -1L
      while (query.isActive && System.nanoTime() < deadline) {
        query.awaitTermination(1000L) // throws the query's failure
        query.recentProgress.filter(_.batchId > printed).foreach { p =>
          println(ProgressPrefix + p.json)
          printed = p.batchId
        }
      }
      query.stop()
    } finally spark.stop()
  }
}
