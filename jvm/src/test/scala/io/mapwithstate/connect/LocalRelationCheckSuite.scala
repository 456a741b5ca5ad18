package io.mapwithstate.connect

import java.io.ByteArrayOutputStream
import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.StandardCharsets

import scala.jdk.CollectionConverters._

import io.mapwithstate.{proto, MapWithStateException}
import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.{VarCharVector, VectorSchemaRoot}
import org.apache.arrow.vector.ipc.ArrowStreamWriter
import org.apache.spark.connect.proto.{Join, LocalRelation, Relation}
import org.scalatest.funsuite.AnyFunSuite
import org.sparkproject.connect.protobuf.ByteString

/**
 * Local data is checked wherever it sits in a message — nested relations, repeated fields —
 * and damaged Arrow data is refused with the path to it, before Spark reads it.
 */
class LocalRelationCheckSuite extends AnyFunSuite {

  /** An Arrow IPC stream of one string column holding "abc", "defg" (offsets 0, 3, 7). */
  private def arrowStrings(): Array[Byte] = {
    val allocator = new RootAllocator()
    val vector = new VarCharVector("word", allocator)
    vector.allocateNew(2)
    vector.setSafe(0, "abc".getBytes(StandardCharsets.UTF_8))
    vector.setSafe(1, "defg".getBytes(StandardCharsets.UTF_8))
    vector.setValueCount(2)
    val root = new VectorSchemaRoot(Seq(vector.getField).asJava,
      Seq[org.apache.arrow.vector.FieldVector](vector).asJava, 2)
    val out = new ByteArrayOutputStream()
    val writer = new ArrowStreamWriter(root, null, out)
    writer.start()
    writer.writeBatch()
    writer.end()
    root.close()
    allocator.close()
    out.toByteArray
  }

  private def ints(values: Int*): Array[Byte] = {
    val b = ByteBuffer.allocate(4 * values.size).order(ByteOrder.LITTLE_ENDIAN)
    values.foreach(v => b.putInt(v))
    b.array()
  }

  /** `data` with the only occurrence of `from` replaced by `to`. */
  private def patched(data: Array[Byte], from: Array[Byte], to: Array[Byte]): Array[Byte] = {
    val at = data.indices.filter(i => data.slice(i, i + from.length).sameElements(from))
    assert(at.size == 1, s"${at.size} occurrences")
    data.patch(at.head, to, from.length)
  }

  private def local(data: Array[Byte]): Relation = Relation.newBuilder()
    .setLocalRelation(LocalRelation.newBuilder().setData(ByteString.copyFrom(data))).build()

  /** A message whose input joins a good local relation with `right`. */
  private def message(right: Relation): proto.MapWithState = proto.MapWithState.newBuilder()
    .setInput(Relation.newBuilder().setJoin(
        Join.newBuilder().setLeft(local(arrowStrings())).setRight(right))).build()

  test("valid local data anywhere in the message passes") {
    LocalRelationCheck.check(message(local(arrowStrings())), "MapWithState")
  }

  test("an offset past its buffer is refused, naming the path to the relation") {
    val damaged = patched(arrowStrings(), ints(0, 3, 7), ints(0, 3, 1 << 30))
    val e = intercept[MapWithStateException] {
      LocalRelationCheck.check(message(local(damaged)), "MapWithState")
    }
    assert(
      e.getMessage.startsWith("[MAPWITHSTATE_MALFORMED_REQUEST] " +
        "MapWithState.input.join.right.local_relation: a LocalRelation's Arrow data is damaged"),
      e.getMessage)
  }

  test("bytes that are not an Arrow stream, or a cut one, are refused") {
    Seq("not arrow at all".getBytes(StandardCharsets.UTF_8), arrowStrings().dropRight(20))
      .foreach { bad =>
        val e = intercept[MapWithStateException] {
          LocalRelationCheck.check(message(local(bad)), "MapWithState")
        }
        assert(e.getMessage.contains("join.right.local_relation"), e.getMessage)
      }
  }
}
