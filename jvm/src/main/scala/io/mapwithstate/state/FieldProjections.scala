package io.mapwithstate.state

import java.util.concurrent.atomic.AtomicLong

import scala.util.control.NonFatal

import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection}
import org.apache.spark.sql.catalyst.expressions.codegen.{
  CodeAndComment,
  CodeFormatter,
  CodeGenerator,
  CodegenContext,
  GenerateUnsafeProjection,
  GeneratedClass
}
import org.apache.spark.sql.types.DataType

/**
 * The projections that copy fields of a row into an [[org.apache.spark.sql.catalyst.expressions.UnsafeRow]]
 * (a list of [[BoundReference]]s: a store's value split into state and time, a key taken out of
 * a record, ...), their generated classes kept by this JVM between tasks.
 *
 * `UnsafeProjection.create` generates a projection's Java source every time it is called, and
 * Spark's compiler cache saves only the compiling of that source: the state's stores, the expiry
 * index and a batch's key ordering made theirs anew in every task, a few milliseconds of a small
 * task's CPU each. Here the source is generated and compiled once per list of fields (at most
 * [[MaxClasses]] lists, the least recently used dropped first), and each [[create]] makes a new
 * instance of the compiled class: an instance owns its row buffer, so instances are never shared,
 * only their class. The class is Spark's own (the same source `GenerateUnsafeProjection` makes),
 * so its rows are byte for byte those of `UnsafeProjection.create`. A list whose generated code
 * keeps objects of its own (`references`, which instances would share) is not cached: it gets
 * `UnsafeProjection.create`'s projection, as before.
 */
object FieldProjections {

  private val MaxClasses = 256

  /** The compiled class of each list of fields, least recently used first. Guarded by itself. */
  private val classes = new java.util.LinkedHashMap[Seq[BoundReference], Option[GeneratedClass]](
    16, 0.75f, true) {
    override def removeEldestEntry(
        eldest: java.util.Map.Entry[Seq[BoundReference], Option[GeneratedClass]]): Boolean =
      size > MaxClasses
  }

  private val generated = new AtomicLong()

  /** How many projection classes this JVM has generated here (for tests and profiles). */
  def generations: Long = generated.get()

  /** A new projection writing `fields` (each read from its ordinal of the input) in order. */
  def create(fields: Seq[BoundReference]): UnsafeProjection = {
    val key = fields.toVector
    val cached = classes.synchronized(classes.get(key))
    val compiled = if (cached != null) cached
    else {
      // Generated outside the lock; two tasks that race both generate, one class is kept.
      val made = generate(key)
      classes.synchronized(classes.put(key, made))
      made
    }
    compiled match {
      case Some(c) => c.generate(Array.empty[Any]).asInstanceOf[UnsafeProjection]
      case None => UnsafeProjection.create(key)
    }
  }

  /** A projection of a row's fields of `types`, from its first ordinal on, nullable. */
  def of(types: Seq[DataType], from: Int = 0): UnsafeProjection =
    create(types.zipWithIndex.map { case (t, i) => BoundReference(from + i, t, nullable = true) })

  /**
   * `GenerateUnsafeProjection`'s class for `fields` (its `create`, without subexpression
   * elimination, which field references have nothing for), or None if the code keeps objects.
   */
  private def generate(fields: Seq[BoundReference]): Option[GeneratedClass] = {
    generated.incrementAndGet()
    val ctx = new CodegenContext
    val eval = GenerateUnsafeProjection.createCode(ctx, fields, false)
    val body =
      s"""
         |public java.lang.Object generate(Object[] references) {
         |  return new SpecificUnsafeProjection(references);
         |}
         |
         |class SpecificUnsafeProjection extends ${classOf[UnsafeProjection].getName} {
         |
         |  private Object[] references;
         |  ${ctx.declareMutableStates()}
         |
         |  public SpecificUnsafeProjection(Object[] references) {
         |    this.references = references;
         |    ${ctx.initMutableStates()}
         |  }
         |
         |  public void initialize(int partitionIndex) {
         |    ${ctx.initPartition()}
         |  }
         |
         |  // Scala.Function1 need this
         |  public java.lang.Object apply(java.lang.Object row) {
         |    return apply((InternalRow) row);
         |  }
         |
         |  public UnsafeRow apply(InternalRow ${ctx.INPUT_ROW}) {
         |    ${eval.code}
         |    return ${eval.value};
         |  }
         |
         |  ${ctx.declareAddedFunctions()}
         |}
       """.stripMargin
    if (ctx.references.nonEmpty) None
    else {
      val code = CodeFormatter.stripOverlappingComments(
        new CodeAndComment(body, ctx.getPlaceHolderToComments()))
      // A class that fails to compile: `UnsafeProjection.create`'s own fallback decides.
      try Some(CodeGenerator.compile(code)._1)
      catch { case NonFatal(_) => None }
    }
  }
}
