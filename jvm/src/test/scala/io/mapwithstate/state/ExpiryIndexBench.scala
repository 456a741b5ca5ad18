package io.mapwithstate.state

import scala.util.Random

import org.apache.spark.unsafe.Platform

/**
 * How the cost of one partition's [[ExpiryIndex]] per micro-batch follows the state size, in
 * the pattern of the benchmark's S4: every key has a timer; `timed` keys' timers are spread over
 * the next 100 steps, the rest a day away; each step pops what is due, and the batch then puts
 * the due keys again (a step further) and `churn` random keys. A JVM-only tool, not a test:
 *
 * {{{
 * dev/sbt "plugin/Test/runMain io.mapwithstate.state.ExpiryIndexBench 250000 1250000"
 * }}}
 *
 * prints, for each state size, the median and p90 time of a step's index work (due, then
 * the puts) over 200 steps after 100 warm-up steps.
 */
object ExpiryIndexBench {
  def main(args: Array[String]): Unit = {
    val sizes = if (args.isEmpty) Seq(250000, 1250000) else args.toSeq.map(_.toInt)
    for (round <- 1 to 2; keys <- sizes) run(keys, timed = 250000, churn = 2500, round)
  }

  private def run(keys: Int, timed: Int, churn: Int, round: Int): Unit = {
    val random = new Random(7)
    val step = 1000L
    val day = 86400000L
    val times = new Array[Long](keys)
    val index = new ExpiryIndex
    val key = new Array[Byte](8)
    def put(k: Int, t: Long): Unit = {
      times(k) = t
      Platform.putLong(key, Platform.BYTE_ARRAY_OFFSET, java.lang.Long.reverseBytes(k.toLong))
      index.add(t, key, Platform.BYTE_ARRAY_OFFSET, 8)
    }
    def keyOf(bytes: Array[Byte]): Int =
      java.lang.Long.reverseBytes(Platform.getLong(bytes, Platform.BYTE_ARRAY_OFFSET)).toInt
    (0 until keys).foreach(k => put(k, if (k < timed) (k % 100 + 1) * step else day))
    val samples = new Array[Long](300)
    var now = 0L
    for (s <- 0 until 300) {
      now += step
      val started = System.nanoTime()
      val (_, due) = index.due(now + 1, bytes => times(keyOf(bytes)))
      due.foreach(b => put(keyOf(b), now + 100 * step))
      var i = 0
      while (i < churn) {
        val k = random.nextInt(keys)
        put(k, if (k < timed) now + (k % 100 + 1) * step else now + day)
        i += 1
      }
      samples(s) = System.nanoTime() - started
    }
    val measured = samples.drop(100).sorted
    println(f"round $round keys $keys%,d: entries ${index.size}%,d, step median " +
      f"${measured(100) / 1e6}%.2f ms, p90 ${measured(180) / 1e6}%.2f ms, " +
      f"index ${index.footprintBytes / 1e6}%.0f MB")
  }
}
