package io.mapwithstate.state

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}

/**
 * Measures how long a state partition of N keys (key BIGINT, state one BIGINT) takes to load
 * from its files, as a restart loads it: one delta holding every key (a partition's first
 * batch), and a snapshot. A file's records come in its writer's slot order; loading them must
 * stay linear in N (a table that places them by the hash's low bits falls into linear probing's
 * quadratic case, see [[RowHashMap]]). Prints only; nothing is asserted.
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
    println(f"$entries%,d keys: delta loaded in $deltaMs%,d ms, snapshot in $snapshotMs%,d ms")
  }

  private def timed(body: => Unit): Long = {
    val start = System.nanoTime()
    body
    (System.nanoTime() - start) / 1000000
  }
}
