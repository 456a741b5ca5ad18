package io.mapwithstate.state

import java.io.{BufferedInputStream, DataInputStream, DataOutputStream, File}
import java.io.{FileInputStream, FileOutputStream}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.types.{DataType, LongType}

/**
 * Measures what a [[DeltaChainStateMap]] of small states (key BIGINT, state one BIGINT) costs:
 * heap bytes per entry, by the JVM's own count of used heap after a full GC and by the map's
 * accounting, and how long the main operations take. Prints only; nothing is asserted, since
 * timings depend on the machine.
 *
 * Run with the test classpath and the heap the target allows, e.g.
 * `java -Xmx4g -cp ... io.mapwithstate.state.StateMapMemoryBench 1000000 10000000`.
 */
object StateMapMemoryBench {

  def main(args: Array[String]): Unit = {
    val sizes = if (args.isEmpty) Seq(1000000, 10000000) else args.toSeq.map(_.toInt)
    println(s"max heap ${Runtime.getRuntime.maxMemory >> 20} MB")
    sizes.foreach(measure)
  }

  /**
   * Puts `entries` BIGINT keys from `firstKey` on into `map`, the i-th with state i * 7 at time
   * i.
   */
  def putSequentialKeys(map: StateMap, entries: Int, firstKey: Long = 0L): Unit = {
    val keys = UnsafeProjection.create(Array[DataType](LongType))
    val states = UnsafeProjection.create(Array[DataType](LongType))
    val input = InternalRow.fromSeq(Seq(0L))
    var i = 0
    while (i < entries) {
      input.setLong(0, firstKey + i)
      val key = keys(input)
      input.setLong(0, i * 7L)
      map.put(key, states(input), i)
      i += 1
    }
  }

  private def measure(entries: Int): Unit = {
    val keys = UnsafeProjection.create(Array[DataType](LongType))
    val states = UnsafeProjection.create(Array[DataType](LongType))
    val input = InternalRow.fromSeq(Seq(0L))

    val before = usedHeap()
    var map = StateMap.empty(1, 1)
    val putTime = timed(putSequentialKeys(map, entries))
    val after = usedHeap()
    val heapPerEntry = (after - before).toDouble / entries
    println(f"$entries%,d entries: ${(after - before) >> 20}%,d MB used heap " +
      f"($heapPerEntry%.1f bytes/entry), map's own count ${map.memoryUsedBytes >> 20}%,d MB " +
      f"(${map.memoryUsedBytes.toDouble / entries}%.1f bytes/entry); put ${putTime}%,d ms")

    // The expiry index (timers and idle timeouts): heap before and after building it.
    val withoutIndex = usedHeap()
    val indexTime = timed(map.buildExpiryIndex())
    val indexHeap = usedHeap() - withoutIndex
    println(f"  expiry index: ${indexHeap.toDouble / entries}%.1f bytes/key used heap, " +
      f"map's own count ${map.expiryIndexBytes.toDouble / entries}%.1f bytes/key; " +
      f"built in $indexTime%,d ms")

    val getTime = timed {
      var i = 0
      var sum = 0L
      while (i < entries) {
        input.setLong(0, i.toLong)
        sum += map.get(keys(input)).getLong(0)
        i += 1
      }
      require(sum == 7L * entries.toLong * (entries - 1) / 2)
    }
    val scanTime = timed(require(map.getByTime(entries / 2).size == entries / 2))
    println(f"  get all keys $getTime%,d ms, getByTime over all $scanTime%,d ms")

    // A batch's worth of layers: each copy takes 1% new writes, until the chain compacts.
    val chainTime = timed {
      for (layer <- 0 until StateMap.DefaultDeltaChainThreshold) {
        map = map.copy()
        var i = 0
        while (i < entries / 100) {
          input.setLong(0, (layer * 7919L + i * 101L) % entries)
          val key = keys(input)
          input.setLong(0, -1L)
          map.put(key, states(input), entries + layer)
          i += 1
        }
      }
    }
    val scanChainTime = timed(map.getByTime(entries / 2).size)
    val file = File.createTempFile("statemap-bench", ".snapshot")
    // A snapshot of the chain as the background writer takes it, without compacting it first.
    val chainSnapshotTime = timed(writeSnapshot(map, file))
    val compactTime = timed { map = map.copy() } // the chain is at the threshold: compacts
    require(map.deltaChainLength == 1 && map.size == entries)
    println(f"  20 layers of 1%% writes $chainTime%,d ms, getByTime over the 20-layer chain " +
      f"$scanChainTime%,d ms, snapshot of the 20-layer chain $chainSnapshotTime%,d ms, " +
      f"compacting copy $compactTime%,d ms, " +
      f"heap after compaction ${(usedHeap() - before) >> 20}%,d MB")

    try {
      val writeTime = timed(writeSnapshot(map, file))
      map = null
      usedHeap()
      var restored: DeltaChainStateMap = null
      val readTime = timed {
        val in = new DataInputStream(new BufferedInputStream(new FileInputStream(file), 1 << 16))
        try restored = StateMapSerde.readSnapshot(in, 1, 1)
        finally in.close()
      }
      require(restored.size == entries)
      println(f"  snapshot ${file.length >> 20}%,d MB: write $writeTime%,d ms, " +
        f"read $readTime%,d ms, " +
        f"heap after reading ${(usedHeap() - before) >> 20}%,d MB")
    } finally {
      file.delete()
    }
  }

  private def writeSnapshot(map: StateMap, file: File): Unit = {
    // No BufferedOutputStream: the writer buffers already.
    val out = new DataOutputStream(new FileOutputStream(file))
    try StateMapSerde.writeSnapshot(map, out)
    finally out.close()
  }

  private def timed(body: => Unit): Long = {
    val start = System.nanoTime()
    body
    (System.nanoTime() - start) / 1000000
  }

  private def usedHeap(): Long = {
    val runtime = Runtime.getRuntime
    for (_ <- 0 until 3) {
      System.gc()
      Thread.sleep(100)
    }
    runtime.totalMemory - runtime.freeMemory
  }
}
