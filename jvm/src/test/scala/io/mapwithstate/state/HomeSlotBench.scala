package io.mapwithstate.state

import java.nio.file.{Files, Paths}

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.types.{DataType, LongType}
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.array.ByteArrayMethods

/**
 * Measures what the heap state map's home slot costs per lookup: [[RowHashMap.homeSlot]] mixes
 * the key hash with Murmur3's finalizer and the table's seed (its own and its capacity's, so
 * that filling it from another table's records, in that table's slot order, stays linear),
 * where it used to take the hash's own low bits (`hash & mask`, kept here only to compare),
 * and a cheaper mix (one multiply and one shift) that only this program uses.
 *
 * Two parts, over `keys` BIGINT keys (default 1M) taken in sequential and in random order, each
 * key hashed as the state map hashes its row: the real [[RowHashMap]] (puts of new keys into a
 * table sized for them, then gets of every key), and a model of its probe (the same slot arrays,
 * tags and key comparison against the records' bytes) run with each placement, which tells the
 * placements' costs apart on otherwise the same code. Each figure is the median of `rounds`
 * rounds, in nanoseconds per operation; the load average is printed before and after. Prints
 * only; nothing is asserted, since timings depend on the machine.
 *
 * `dev/sbt "plugin/Test/runMain io.mapwithstate.state.HomeSlotBench [keys] [rounds]"`
 */
object HomeSlotBench {

  /** Where a key of a given hash starts its probe in a table of `mask + 1` slots. */
  sealed trait Placement {
    def label: String
  }

  /** The hash's own low bits: the table's placement before the mix. */
  case object LowBits extends Placement { val label = "hash & mask (before)" }

  /** The table's placement now. */
  case object Murmur3Finalizer extends Placement { val label = "Murmur3 finalizer (now)" }

  /** A cheaper mix: one multiply of the seeded hash, its high half folded onto the low. */
  case object MultiplyShift extends Placement { val label = "multiply-shift" }

  private val Placements = Seq(LowBits, Murmur3Finalizer, MultiplyShift)

  /** A BIGINT key row's size: its null bits' word and the value. */
  private val KeyLength = 16

  def main(args: Array[String]): Unit = {
    val keys = if (args.length > 0) args(0).toInt else 1000000
    val rounds = if (args.length > 1) args(1).toInt else 7
    println(f"$keys%,d keys, $rounds rounds, medians in ns per operation; " +
      s"load average ${loadAverage()}")
    val keyBytes = keyRows(keys)
    val random = new scala.util.Random(7)
    for ((order, sequence) <- Seq(
        "sequential" -> Array.range(0, keys),
        "random" -> random.shuffle(Seq.range(0, keys)).toArray)) {
      val real = (1 to rounds).map { _ =>
        putThenGet(new RealTable(keys, keyBytes), keyBytes, sequence)
      }
      println(f"$order%-10s  real RowHashMap (now):      put ${median(real.map(_._1))}%6.1f" +
        f"  get ${median(real.map(_._2))}%6.1f")
      // The placements alternate within each round, so that a change of the machine's load
      // falls on all of them alike.
      val modelTimes =
        (1 to rounds).map(_ =>
          Placements.map { p =>
            p -> putThenGet(new ProbeModel(keys, p, keyBytes), keyBytes, sequence)
          })
      Placements.foreach { p =>
        val times = modelTimes.map(_.collectFirst { case (`p`, t) => t }.get)
        println(f"$order%-10s  model, ${p.label}%-24s put ${median(times.map(_._1))}%6.1f" +
          f"  get ${median(times.map(_._2))}%6.1f")
      }
    }
    println(s"load average ${loadAverage()}")
  }

  /** The rows of the BIGINT keys 0 until `keys`, back to back. */
  private def keyRows(keys: Int): Array[Byte] = {
    val project = UnsafeProjection.create(Array[DataType](LongType))
    val input = InternalRow.fromSeq(Seq(0L))
    val bytes = new Array[Byte](keys * KeyLength)
    var i = 0
    while (i < keys) {
      input.setLong(0, i.toLong)
      val row = project(input)
      require(row.getSizeInBytes == KeyLength)
      row.writeToMemory(bytes, Platform.BYTE_ARRAY_OFFSET + i.toLong * KeyLength)
      i += 1
    }
    bytes
  }

  private def offsetOf(key: Int): Long = Platform.BYTE_ARRAY_OFFSET + key.toLong * KeyLength

  private def hashOf(keyBytes: Array[Byte], key: Int): Int =
    DeltaChainStateMap.hashOf(keyBytes, offsetOf(key), KeyLength)

  /** A table under measurement: the keys are indexes of rows in the keys' bytes. */
  private sealed trait Table {
    def put(hash: Int, key: Int): Unit
    def contains(hash: Int, key: Int): Boolean
  }

  /** The real table, each key's row its state too. */
  private final class RealTable(keys: Int, keyBytes: Array[Byte]) extends Table {
    private val table = DeltaChainStateMap.newLayer(keys, keys.toLong * (2 * KeyLength + 8))

    def put(hash: Int, key: Int): Unit = {
      val probe = table.probe(hash, keyBytes, offsetOf(key), KeyLength)
      table.insertLive(hash, keyBytes, offsetOf(key), KeyLength, keyBytes, offsetOf(key),
        KeyLength, key.toLong, shadowsParent = false, emptySlot = -1 - probe)
    }

    def contains(hash: Int, key: Int): Boolean =
      table.find(hash, keyBytes, offsetOf(key), KeyLength) >= 0
  }

  /** ns per put and per get of `table`: every key of `sequence` put (new), then got. */
  private def putThenGet(
      table: Table, keyBytes: Array[Byte], sequence: Array[Int]): (Double, Double) = {
    val put = nanosPerOp(sequence.length) {
      var i = 0
      while (i < sequence.length) {
        val key = sequence(i)
        table.put(hashOf(keyBytes, key), key)
        i += 1
      }
    }
    val get = nanosPerOp(sequence.length) {
      var i = 0
      var found = 0
      while (i < sequence.length) {
        val key = sequence(i)
        if (table.contains(hashOf(keyBytes, key), key)) found += 1
        i += 1
      }
      require(found == sequence.length, s"$found of ${sequence.length} keys found")
    }
    (put, get)
  }

  /**
   * [[RowHashMap]]'s probe with a given placement: a slot's word carries its record's index
   * and the top bits of its hash as a tag, the hash has an array of its own, and a tagged slot
   * compares the key's bytes with its record's. The records are the keys' rows where they
   * are, so a comparison misses the cache less often than in the real table, whose records
   * are in an arena in the order of their puts: if anything, the placement's own cost stands
   * out more here.
   */
  private final class ProbeModel(keys: Int, placement: Placement, records: Array[Byte])
    extends Table {
    private val capacity = RowHashMap.capacityFor(keys)
    private val mask = capacity - 1
    private val seed = RowHashMap.homeSeedFor(RowHashMap.nextTableSeed(), capacity)
    private val hashes = new Array[Int](capacity)
    private val words = new Array[Long](capacity)
    private val TagBits = 0xfff80000L

    private def home(hash: Int): Int = placement match {
      case LowBits => hash & mask
      case Murmur3Finalizer => RowHashMap.homeSlot(hash, seed, mask)
      case MultiplyShift =>
        val h = (hash ^ seed) * 0x9e3779b9
        (h ^ (h >>> 16)) & mask
    }

    def put(hash: Int, key: Int): Unit = {
      val slot = -1 - probe(hash, key)
      hashes(slot) = hash
      words(slot) = ((key + 1).toLong << 32) | (hash & TagBits)
    }

    def contains(hash: Int, key: Int): Boolean = probe(hash, key) >= 0

    /** The slot holding `key`, or `-1 - s` for the empty slot `s` its probe ended at. */
    private def probe(hash: Int, key: Int): Int = {
      var slot = home(hash)
      while (true) {
        val word = words(slot)
        if (word == 0) return -1 - slot
        if ((word & TagBits) == (hash & TagBits)) {
          val record = (word >>> 32).toInt - 1
          if (ByteArrayMethods.arrayEquals(
              records, offsetOf(record), records, offsetOf(key), KeyLength)) return slot
        }
        slot = (slot + 1) & mask
      }
      -1 // unreachable: the table always has an empty slot
    }
  }

  private def nanosPerOp(ops: Int)(body: => Unit): Double = {
    val start = System.nanoTime()
    body
    (System.nanoTime() - start).toDouble / ops
  }

  private def median(values: Seq[Double]): Double = values.sorted.apply(values.size / 2)

  private def loadAverage(): String =
    new String(Files.readAllBytes(Paths.get("/proc/loadavg"))).split(" ").take(3).mkString(" ")
}
