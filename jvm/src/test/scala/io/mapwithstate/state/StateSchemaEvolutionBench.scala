package io.mapwithstate.state

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.StructType
import org.apache.spark.unsafe.types.UTF8String

/**
 * Times the conversion of stored state rows to a changed schema ([[StateSchemaEvolution]]'s
 * projection) for a number of keys: a flat change (a field added, one dropped, one widened,
 * the rest reordered) and a nested one (the same inside a struct and an array of structs).
 * The rows are made beforehand as UnsafeRows, as a store hands them over; each conversion's
 * row is copied, as a store's put copies it. Prints the best of a few rounds; nothing is
 * asserted, since timings depend on the machine.
 *
 * `Test/runMain io.mapwithstate.state.StateSchemaEvolutionBench [keys]`
 */
object StateSchemaEvolutionBench {

  def main(args: Array[String]): Unit = {
    val keys = if (args.length > 0) args(0).toInt else 1000000
    time("flat", keys, "n INT, last STRING, seen BIGINT, gone DOUBLE",
      "seen BIGINT, n BIGINT, last STRING, added STRING") { i =>
      InternalRow(i, UTF8String.fromString(s"page-$i"), i.toLong * 3, i * 0.5)
    }
    time("nested", keys, "s STRUCT<n: INT, last: STRING>, a ARRAY<STRUCT<p: INT, q: INT>>",
      "s STRUCT<last: STRING, n: BIGINT, added: INT>, a ARRAY<STRUCT<q: BIGINT>>") { i =>
      InternalRow(InternalRow(i, UTF8String.fromString(s"page-$i")),
        new org.apache.spark.sql.catalyst.util.GenericArrayData(
          Array[Any](InternalRow(i, i + 1), InternalRow(i + 2, i + 3))))
    }
  }

  private def time(name: String, keys: Int, from: String, to: String)(
      row: Int => InternalRow): Unit = {
    val (oldSchema, newSchema) = (StructType.fromDDL(from), StructType.fromDDL(to))
    val toStored = UnsafeProjection.create(oldSchema)
    val stored: Array[UnsafeRow] = Array.tabulate(keys)(i => toStored(row(i)).copy())
    val conversion = StateSchemaEvolution.plan(oldSchema, newSchema)
      .fold(p => sys.error(p.map(_.describe).mkString("; ")), identity)
    val convert = conversion.projection()
    val rounds = (1 to 3).map { _ =>
      val started = System.nanoTime()
      var bytes = 0L
      var i = 0
      while (i < keys) {
        bytes += convert(stored(i)).copy().getSizeInBytes
        i += 1
      }
      (System.nanoTime() - started) / 1e6 -> bytes
    }
    val best = rounds.map(_._1).min
    println(f"$name: $keys%d keys converted in $best%.0f ms " +
      f"(${keys / best * 1000}%.0f keys/s; ${rounds.head._2 / keys}%d bytes a new row)")
  }
}
