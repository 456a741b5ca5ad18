package io.mapwithstate.state

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  ArrayTransform,
  BoundReference,
  Cast,
  CreateNamedStruct,
  Expression,
  GetStructField,
  If,
  IsNull,
  LambdaFunction,
  Literal,
  NamedLambdaVariable,
  TransformValues,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.types._

/**
 * The rules by which a restarted query's state schema may differ from the one its checkpoint
 * was written with, and the conversion of a state row from the old schema to the new one.
 *
 * A change is allowed, and converted automatically, when every difference is one of:
 *  - a field added (its value null for every existing key; so it must be nullable);
 *  - a field dropped;
 *  - fields reordered (fields are matched by name, exactly as spelled);
 *  - a type widened: `TINYINT → SMALLINT → INT → BIGINT`, `FLOAT → DOUBLE`, any of those
 *    integral types `→ DOUBLE`, `DECIMAL(p, s) → DECIMAL(p', s')` with `s' ≥ s` and
 *    `p' - s' ≥ p - s` (neither scale nor integer digits shrink, so every value fits exactly);
 *  - a NOT NULL field, array element or map value becoming nullable;
 *  - any of these inside a nested struct, an array's elements or a map's values.
 *
 * Anything else is refused, naming each offending field by its path (`a.b` for a struct's
 * field, `a[]` for an array's elements, `m{}` for a map's values, so `a.b[].c`), its old and new
 * type and why: a narrowing or any other type change (`STRING → INT`), a map's key type
 * changed, a nullable field becoming NOT NULL (existing keys may hold nulls), a NOT NULL field
 * added (existing keys have no value for it), and a likely rename: a field dropped and another
 * added in the same struct with the same type in one change. A rename looks exactly like a
 * drop plus an add, which would silently lose the field's values, so it needs a migration,
 * which these rules do not judge. The key columns are not evolved: a changed key is refused
 * before these rules apply.
 */
object StateSchemaEvolution {

  /**
   * A difference the rules refuse: the field's `path`, its old and new types (None: the field
   * is absent on that side) and why.
   */
  final case class Incompatibility(
      path: String,
      oldType: Option[DataType],
      newType: Option[DataType],
      reason: String) {

    /** One line for an error message: `a.b: INT -> STRING (not a widening ...)`. */
    def describe: String = {
      def typed(t: Option[DataType]): String = t.map(_.sql).getOrElse("(absent)")
      s"$path: ${typed(oldType)} -> ${typed(newType)} ($reason)"
    }
  }

  /**
   * How state rows of the old schema become rows of the new one. `identity` when the rows are
   * bit for bit the same (nothing changed, or only nullability was relaxed), so stored rows
   * can be kept as they are.
   */
  final class Conversion private[StateSchemaEvolution] (
      val oldSchema: StructType,
      val newSchema: StructType,
      fields: Seq[Expression]) {

    /** Whether stored rows need no conversion at all. */
    val identity: Boolean = DataType.equalsIgnoreNullability(oldSchema, newSchema)

    /**
     * The expressions of the new schema's fields over a row of the old schema (bound by
     * ordinal), for a projection of one's own or for wrapping in more expressions.
     */
    def expressions: Seq[Expression] = fields

    /**
     * A projection from old-schema rows to new-schema UnsafeRows (reused: copy a result that
     * must outlive the next call). Not thread-safe: one per task.
     */
    def projection(): UnsafeProjection = UnsafeProjection.create(fields)

    /** Converts one row (a convenience for tests and one-off reads; a copy). */
    def apply(row: InternalRow): UnsafeRow = projection()(row).copy()
  }

  /** The types each type widens to, besides itself. */
  private val Widenings: Map[DataType, Set[DataType]] = Map(
    ByteType -> Set(ShortType, IntegerType, LongType, DoubleType),
    ShortType -> Set(IntegerType, LongType, DoubleType),
    IntegerType -> Set(LongType, DoubleType),
    LongType -> Set(DoubleType),
    FloatType -> Set(DoubleType))

  /** The allowed widenings, for error messages. */
  val AllowedWidenings: String =
    "TINYINT -> SMALLINT -> INT -> BIGINT, FLOAT -> DOUBLE, integral -> DOUBLE, DECIMAL with " +
      "neither scale nor integer digits smaller"

  /**
   * The conversion of `oldSchema`'s rows to `newSchema`'s, or every difference the rules refuse
   * (in the new schema's field order, then dropped fields).
   */
  def plan(oldSchema: StructType, newSchema: StructType)
      : Either[Seq[Incompatibility], Conversion] = {
    val fields = structFields(oldSchema, newSchema, "",
      (ordinal, field) => BoundReference(ordinal, field.dataType, field.nullable))
    fields match {
      case Right(exprs) => Right(new Conversion(oldSchema, newSchema, exprs))
      case Left(problems) => Left(problems)
    }
  }

  /**
   * The expressions of `to`'s fields, each from the field of `from` with its name (`field`
   * reads one of `from`'s fields by ordinal), or the problems.
   */
  private def structFields(
      from: StructType,
      to: StructType,
      prefix: String,
      field: (Int, StructField) => Expression): Either[Seq[Incompatibility], Seq[Expression]] = {
    def path(name: String): String = if (prefix.isEmpty) name else s"$prefix.$name"
    val oldByName = from.fields.zipWithIndex.map { case (f, i) => f.name -> (f, i) }.toMap
    val newNames = to.fieldNames.toSet
    val dropped = from.fields.filterNot(f => newNames.contains(f.name))
    val added = to.fields.filterNot(f => oldByName.contains(f.name))
    // Each added field pairs with the first dropped field of its type not taken yet.
    val renames = added.foldLeft(List.empty[(StructField, StructField)]) { (pairs, add) =>
      dropped.find(d =>
        !pairs.exists(_._1 eq d) &&
        DataType.equalsIgnoreNullability(d.dataType, add.dataType)) match {
        case Some(drop) => pairs :+ (drop -> add)
        case None => pairs
      }
    }
    val renamed = renames.map(_._2.name).toSet
    val results: Seq[Either[Seq[Incompatibility], Expression]] = to.fields.toSeq.map { f =>
      oldByName.get(f.name) match {
        case Some((old, ordinal)) =>
          val nullability =
            if (old.nullable && !f.nullable) {
              Seq(Incompatibility(path(f.name), Some(old.dataType), Some(f.dataType),
                  "becomes NOT NULL, but existing keys may hold nulls in it"))
            } else Nil
          val converted = convert(field(ordinal, old), old.dataType, f.dataType, path(f.name))
          if (nullability.isEmpty) converted
          else Left(nullability ++ converted.left.getOrElse(Nil))
        case None if renamed.contains(f.name) =>
          val from = renames.find(_._2.name == f.name).get._1
          Left(Seq(Incompatibility(path(f.name), None, Some(f.dataType),
                s"added while ${path(from.name)} of the same type is dropped: a likely rename, " +
                  s"which would lose ${path(from.name)}'s values; a rename needs a migration " +
                  s"that sets ${f.name} from the old state's ${from.name}")))
        case None if !f.nullable =>
          Left(Seq(Incompatibility(path(f.name), None, Some(f.dataType),
                "added as NOT NULL, but existing keys have no value for it: add it nullable")))
        case None => Right(Literal(null, f.dataType))
      }
    }
    val problems = results.flatMap(_.left.getOrElse(Nil))
    if (problems.nonEmpty) Left(problems) else Right(results.map(_.toOption.get))
  }

  /**
   * The conversion of each of a collection's elements (or values), bound to `variable`, to type
   * `to` (`nullable` after), made by `transform` of the converted `variable`: None when they
   * need none, or the problems; `path` and `what` name them.
   */
  private def convertEach(
      variable: NamedLambdaVariable,
      to: DataType,
      nullable: Boolean,
      path: String,
      what: String)(
      transform: Expression => Expression): Either[Seq[Incompatibility], Option[Expression]] = {
    val nullability =
      if (variable.nullable && !nullable) {
        Seq(Incompatibility(path, Some(variable.dataType), Some(to),
            s"$what become NOT NULL, but existing ones may be null"))
      } else Nil
    (convert(variable, variable.dataType, to, path), nullability) match {
      case (Right(body), Nil) => Right(if (body eq variable) None else Some(transform(body)))
      case (converted, problems) => Left(problems ++ converted.left.getOrElse(Nil))
    }
  }

  /** `input` (of type `from`) as type `to`, or the problems; `path` names it. */
  private def convert(input: Expression, from: DataType, to: DataType, path: String)
      : Either[Seq[Incompatibility], Expression] = (from, to) match {
    case _ if from == to => Right(input)
    case (f: StructType, t: StructType) =>
      structFields(f, t, path,
        (ordinal, field) =>
          GetStructField(input, ordinal, Some(field.name))).map { fields =>
        val struct = CreateNamedStruct(t.fields.toSeq.zip(fields).flatMap {
          case (field, value) => Seq(Literal(field.name), value)
        })
        If(IsNull(input), Literal(null, t), struct)
      }
    case (ArrayType(f, fNull), ArrayType(t, tNull)) =>
      val element = NamedLambdaVariable("element", f, fNull)
      convertEach(element, t, tNull, s"$path[]", "array elements") { body =>
        ArrayTransform(input, LambdaFunction(body, Seq(element)))
      }.map(_.getOrElse(input))
    case (MapType(fk, fv, fNull), MapType(tk, tv, tNull)) =>
      if (!DataType.equalsIgnoreNullability(fk, tk)) {
        Left(Seq(Incompatibility(path, Some(from), Some(to),
              s"the map's key type changes from ${fk.sql} to ${tk.sql}; map keys cannot change")))
      } else {
        val key = NamedLambdaVariable("key", fk, nullable = false)
        val value = NamedLambdaVariable("value", fv, fNull)
        convertEach(value, tv, tNull, s"$path{}", "map values") { body =>
          TransformValues(input, LambdaFunction(body, Seq(key, value)))
        }.map(_.getOrElse(input))
      }
    case (f: DecimalType, t: DecimalType) =>
      if (t.scale >= f.scale && t.precision - t.scale >= f.precision - f.scale) {
        Right(Cast(input, t))
      } else {
        Left(Seq(Incompatibility(path, Some(from), Some(to),
              "a DECIMAL may widen only with neither its scale nor its integer digits smaller")))
      }
    case _ if Widenings.get(from).exists(_.contains(to)) => Right(Cast(input, to))
    case _ if DataType.equalsIgnoreNullability(from, to) =>
      // Only nullability inside differs (checked where it can tighten): the same bits.
      Right(input)
    case _ =>
      Left(Seq(Incompatibility(path, Some(from), Some(to),
            s"not a widening; allowed: $AllowedWidenings; other changes need a migration")))
  }
}
