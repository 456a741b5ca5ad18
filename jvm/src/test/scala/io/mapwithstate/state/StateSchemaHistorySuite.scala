package io.mapwithstate.state

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import io.mapwithstate.{MapWithStateException, TempDirs}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.types.{IntegerType, LongType, StructType}
import org.scalatest.funsuite.AnyFunSuite

/**
 * The checkpoint's state schema history ([[StateSchemaHistory]]): entries read back as written,
 * the state type of each version, a damaged file refused, an uncommitted conversion's entry
 * dropped with its files; and a conversion of stored rows ([[StoredStateConversion]]).
 */
class StateSchemaHistorySuite extends AnyFunSuite with TempDirs {
  import StateSchemaHistory._

  private val conf = new Configuration()
  private def schema(ddl: String): StructType = StructType.fromDDL(ddl)

  test("entries read back as written, and each version's state type") {
    withDir { dir =>
      val operator = new Path(dir.toString)
      assert(read(operator, conf).isEmpty)
      val entries = Seq(Entry(3, schema("n BIGINT, tag STRING")), Entry(7, schema("n BIGINT")))
      write(operator, entries, conf)
      assert(read(operator, conf) == entries)
      val first = schema("n INT")
      assert(Seq(0L, 2L, 3L, 6L, 7L, 9L).map(v => stateTypeAt(entries, v, first)) ==
        Seq(first, first, entries(0).stateType, entries(0).stateType, entries(1).stateType,
          entries(1).stateType))
    }
  }

  test("a damaged history is refused naming the file") {
    withDir { dir =>
      val operator = new Path(dir.toString)
      write(operator, Seq(Entry(3, schema("n BIGINT"))), conf)
      val file = new File(dir, FileName)
      val text = new String(Files.readAllBytes(file.toPath), UTF_8)
      Files.write(file.toPath, text.replace("3 ", "4 ").getBytes(UTF_8))
      val e = intercept[MapWithStateException](read(operator, conf))
      assert(e.getMessage.contains(s"$FileName is damaged: its checksum does not match"))
    }
  }

  test("a restart before a conversion's batch committed drops its entry and its files") {
    withDir { dir =>
      val operator = new Path(dir.toString)
      val partition = new File(dir, "0")
      partition.mkdirs()
      Seq("4.delta", "5.delta", "5.snapshot", "6.zip", "6.changelog", "7_abc.zip")
        .foreach(name => new File(partition, name).createNewFile())
      val held = Entry(3, schema("n BIGINT"))
      write(operator, Seq(held, Entry(6, schema("n BIGINT, tag STRING"))), conf)
      // Batch 6 committed: the conversion at 6 holds, and nothing is deleted.
      assert(committed(operator, 6, conf).size == 2)
      assert(partition.list().length == 6)
      // The first batch loads version 5: the entry at 6 never committed.
      assert(committed(operator, 5, conf) == Seq(held))
      assert(read(operator, conf) == Seq(held))
      assert(partition.list().sorted.toSeq == Seq("4.delta", "5.delta", "5.snapshot"))
    }
  }

  test("an automatic conversion over the key and the stored state, as a task runs it") {
    val conversion = StateSchemaEvolution.plan(schema("n INT, gone DOUBLE"),
      schema("tag STRING, n BIGINT")).toOption.get
    val convert = StoredStateConversion.of(conversion, schema("k INT")).converter()
    val key = UnsafeProjection.create(Array[org.apache.spark.sql.types.DataType](IntegerType))
      .apply(InternalRow(7)).copy()
    val stored = UnsafeProjection.create(schema("n INT, gone DOUBLE"))
      .apply(InternalRow(5, null)).copy()
    val converted = convert(key, stored)
    assert(converted.numFields == 2 && converted.isNullAt(0))
    assert(converted.getLong(1) == 5L)
    assert(schema("tag STRING, n BIGINT")(1).dataType == LongType)
  }
}
