package io.mapwithstate.state

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}

/**
 * Measures how long a state partition of N keys (key BIGINT, state one BIGINT) takes to load
 * from its files, as a restart loads it: one delta holding every key (a partition's first
 * batch), and a snapshot; and how long one map takes to fill from two maps of N / 2 keys each,
 * in their slot order, as a repartition merges two partitions or a conversion a map's layers.
 * Records come in their source table's slot order; filling a table from them must stay linear
 * in N (tables that place keys alike fall into linear probing's quadratic case, see
 * [[RowHashMap]]). Prints only; nothing is asserted.
 *
 * `java -Xmx8g -cp <test classpath> io.mapwithstate.state.StateMapLoadBench 250000 2500000`
 */
object StateMapLoadBench {

  def main(args: Array[String]): Unit = {
    val sizes = if (args.isEmpty) Seq(250000, 2500000) else args.toSeq.map(_.toInt)
    sizes.foreach(measure)
  }

  private def measure(entries: Int): Unit = {
    val map = StateMap.empty(1, 1).asInstanceOf[DeltaChainStateMap].copy()
    StateMapMemoryBench.putSequentialKeys(map, entries)
    val delta = new ByteArrayOutputStream()
    val deltaOut = new DataOutputStream(delta)
    StateMapSerde.writeDelta(map, deltaOut)
    deltaOut.flush()
    val snapshot = new ByteArrayOutputStream()
    val snapshotOut = new DataOutputStream(snapshot)
    StateMapSerde.writeSnapshot(map, snapshotOut)
    snapshotOut.flush()

    val deltaMs = timed {
      val in = new DataInputStream(new ByteArrayInputStream(delta.toByteArray))
      val loaded =
        StateMapSerde.readDelta(in, StateMap.empty(1, 1).asInstanceOf[DeltaChainStateMap])
      require(loaded.size == entries, s"${loaded.size} keys loaded of $entries")
    }
    val snapshotMs = timed {
      val in = new DataInputStream(new ByteArrayInputStream(snapshot.toByteArray))
      val loaded = StateMapSerde.readSnapshot(in, 1, 1)
      require(loaded.size == entries, s"${loaded.size} keys loaded of $entries")
    }
    val halves = Seq(0L, entries / 2L).map { first =>
      val half = StateMap.empty(1, 1).copy()
      StateMapMemoryBench.putSequentialKeys(half, entries / 2, first)
      half
    }
    val mergeMs = timed {
      val merged = StateMap.empty(1, 1).copy()
      halves.foreach(_.getAll().foreach(e => merged.put(e.key, e.state, e.updateTime)))
      require(merged.size == entries / 2 * 2, s"${merged.size} keys merged of $entries")
    }
    println(f"$entries%,d keys: delta loaded in $deltaMs%,d ms, snapshot in $snapshotMs%,d ms, " +
      f"two halves merged in $mergeMs%,d ms")
  }

  private def timed(body: => Unit): Long = {
    val start = System.nanoTime()
    body
    (System.nanoTime() - start) / 1000000
  }
}
