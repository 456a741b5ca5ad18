package io.mapwithstate.state

import java.io.{DataOutputStream, File, FileOutputStream}

import scala.util.Random

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.types.{DataType, LongType}

/**
 * Times one partition's share of a full-churn micro-batch (the benchmark's S2: every key
 * updated once per batch) on a [[DeltaChainStateMap]] alone: the copy that starts the batch,
 * a get and an in-place put of every key in a shuffled order (as a shuffle delivers them), and
 * the delta written to a file. With `prefetch`, the keys are looked up as a replay does: read
 * ahead a group at a time, then each looked up with the hash its group's prefetch computed.
 * Prints the median of each part over the batches; nothing is asserted, since timings depend
 * on the machine.
 *
 * `Test/runMain io.mapwithstate.state.StateMapChurnBench [keys] [batches] [prefetch]`
 */
object StateMapChurnBench {

  def main(args: Array[String]): Unit = {
    val keys = if (args.length > 0) args(0).toInt else 50000
    val batches = if (args.length > 1) args(1).toInt else 60
    val prefetch = args.length > 2 && args(2) == "prefetch"
    val group = io.mapwithstate.execution.ReadAheadRecords.GroupSize
    val keyRows = UnsafeProjection.create(Array[DataType](LongType))
    val stateRows = UnsafeProjection.create(Array[DataType](LongType, LongType))
    val input = InternalRow.fromSeq(Seq(0L, 0L))
    val order = Random.shuffle((0 until keys).map(_.toLong)).toArray
    // The keys as a shuffle hands them over: rows made beforehand, outside the timing.
    val keyCopies = order.map { k => input.setLong(0, k); keyRows(input).copy() }
    val hashes = new Array[Int](group)
    val file = File.createTempFile("statemap-churn", ".delta")
    var map: DeltaChainStateMap = StateMap.empty(1, 2)
    val times = Array.fill(3)(Seq.newBuilder[Long])
    try {
      for (batch <- 0 until batches) {
        val t0 = System.nanoTime()
        map = map.copy()
        val t1 = System.nanoTime()
        var i = 0
        while (i < keys) {
          val key = keyCopies(i)
          val old = if (!prefetch) map.get(key)
          else {
            val inGroup = i % group
            if (inGroup == 0) {
              val count = math.min(group, keys - i)
              var j = 0
              while (j < count) {
                hashes(j) = keyCopies(i + j).hashCode
                j += 1
              }
              map.prefetch(hashes, count)
            }
            map.get(key, hashes(inGroup))
          }
          val count = if (old == null) 1L else old.getLong(0) + 1
          input.setLong(0, count)
          input.setLong(1, batch.toLong)
          map.putInPlace(key, stateRows(input), batch)
          i += 1
        }
        val t2 = System.nanoTime()
        val out = new DataOutputStream(new FileOutputStream(file))
        try StateMapSerde.writeDelta(map.asInstanceOf[DeltaChainStateMap], out)
        finally out.close()
        val t3 = System.nanoTime()
        times(0) += (t1 - t0) / 1000
        times(1) += (t2 - t1) / 1000
        times(2) += (t3 - t2) / 1000
      }
    } finally {
      file.delete()
    }
    // The second half: the JIT has compiled the path by then.
    val medians = times.map { b =>
      val all = b.result().drop(batches / 2).sorted
      all(all.size / 2)
    }
    println(
      f"$keys%,d keys, full churn${if (prefetch) " (prefetch)" else ""}, " +
        f"median of the last ${batches - batches / 2} batches: " +
        f"copy ${medians(0)}%,d us, get+put every key ${medians(1)}%,d us, " +
        f"write the delta ${medians(2)}%,d us")
  }
}
