package io.mapwithstate.connect

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.arrow.memory.RootAllocator
import org.apache.arrow.vector.ValueVector
import org.apache.arrow.vector.complex.{ListVector, MapVector}
import org.apache.arrow.vector.ipc.ArrowStreamReader
import org.apache.arrow.vector.types.pojo.ArrowType
import org.apache.arrow.vector.validate.{
  ValidateVectorBufferVisitor,
  ValidateVectorDataVisitor,
  ValidateVectorTypeVisitor
}
import org.apache.spark.connect.proto.LocalRelation
import org.sparkproject.connect.protobuf.{ByteString, Descriptors, Message}

/**
 * Checks the Arrow data of every `LocalRelation` in a message a client sent, before Spark
 * Connect's planner reads it. Spark reads a local relation's strings and binaries straight from
 * the Arrow buffers' memory at the offsets the data gives (`ArrowColumnVector`), without bounds
 * checks, so damaged offsets in the bytes a client sent make the server read outside the buffer:
 * a wrong answer, or the whole server killed by the operating system (SIGSEGV in an array copy
 * on the Connect execute thread — found by the fuzz test, where a mutated message's Arrow data
 * took the server down). Arrow's full validation checks every offset against its buffer; data
 * that fails it, or cannot be read at all, is refused with an error saying where it is.
 *
 * Spark's planner would read the same data right after, so the cost is a second read of the
 * local data a plan carries (small by design: large local data travels as an artifact, which
 * this does not see).
 */
object LocalRelationCheck {

  /** Refuses `message` if any `LocalRelation` in it (at any depth) holds damaged Arrow data. */
  def check(message: Message, name: String): Unit = {
    // An explicit stack: the plan is as deep as the client made it (up to Connect's nesting
    // limit), deeper than a thread's stack should have to be.
    val pending = new java.util.ArrayDeque[(Message, String)]()
    pending.push((message, name))
    while (!pending.isEmpty) {
      val (m, path) = pending.pop()
      m match {
        case local: LocalRelation if local.hasData => checkArrow(local.getData, path)
        case _ =>
      }
      m.getAllFields.asScala.foreach { case (field, value) =>
        if (field.getJavaType == Descriptors.FieldDescriptor.JavaType.MESSAGE) {
          val at = s"$path.${field.getName}"
          value match {
            case list: java.util.List[_] =>
              list.asScala.zipWithIndex.foreach { case (v, i) =>
                pending.push((v.asInstanceOf[Message], s"$at[$i]"))
              }
            case v: Message => pending.push((v, at))
            case _ =>
          }
        }
      }
    }
  }

  private def checkArrow(data: ByteString, path: String): Unit = {
    // A damaged length may ask for any amount of memory: at most a generous multiple of the data.
    val limit = 16L * data.size + (16L << 20)
    val allocator = new RootAllocator(limit)
    try {
      val reader = new ArrowStreamReader(data.newInput(), allocator) // no copy of the data
      try {
        while (reader.loadNextBatch()) {
          reader.getVectorSchemaRoot.getFieldVectors.asScala.foreach(validateFull)
        }
      } finally reader.close()
    } catch {
      case NonFatal(e) =>
        throw new MapWithStateException(ErrorCondition.MalformedRequest,
          s"$path: a LocalRelation's Arrow data is damaged (${e.getClass.getSimpleName}: " +
            s"${e.getMessage}); refused before Spark reads it. The message was changed on the " +
            "way, or the client built it wrong", e)
    } finally {
      // Buffers a failed read left open would make close() throw over the error above.
      try allocator.close()
      catch { case NonFatal(_) => }
    }
  }

  /**
   * Arrow's full validation, as `ValueVectorUtility.validateFull` runs it — the types, the
   * buffers, then the data — but with a map's type checked as a map ([[TypeCheck]]).
   */
  private def validateFull(vector: ValueVector): Unit = {
    vector.accept(new TypeCheck, null)
    vector.accept(new ValidateVectorBufferVisitor, null)
    vector.accept(new ValidateVectorDataVisitor, null)
  }

  /**
   * Arrow's type check, which visits a `MapVector` as the `ListVector` it extends and expects
   * a List type there, so it refuses every valid map ("Incorrect arrow type for MapVector:
   * Map(false)"): a map must have a Map type instead; its entries are checked as Arrow does.
   */
  private class TypeCheck extends ValidateVectorTypeVisitor {
    override def visit(vector: ListVector, value: Void): Void = vector match {
      case map: MapVector =>
        val arrowType = map.getField.getFieldType.getType
        if (!arrowType.isInstanceOf[ArrowType.Map]) {
          throw new IllegalArgumentException(s"Incorrect arrow type for a map: $arrowType")
        }
        Option(map.getDataVector).foreach(_.accept(this, null))
        null
      case list => super.visit(list, value)
    }
  }
}
