package io.mapwithstate.plan

import scala.util.Try

import io.mapwithstate.{ErrorCondition, MapWithStateException}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{ArrayType, DataType, MapType, StructType}

/**
 * Upper bounds on what one mapWithState request may ask of the server. Any Connect client can
 * send any numbers; without bounds a single request could ask for two billion partitions, a
 * state that is never compacted or scanned for timeouts, or a state row too wide to compile.
 * Each limit has a Spark setting (session or server) to raise it, and the error names the
 * argument, the value, the limit and that setting.
 */
object RequestLimits {

  /** A limit: its setting and the value it has when the setting is absent. */
  final case class Limit(key: String, default: Int)

  val MaxNumPartitions: Limit = Limit("spark.mapwithstate.maxNumPartitions", 10000)
  val MaxCheckpointInterval: Limit = Limit("spark.mapwithstate.maxCheckpointInterval", 10000)
  val MaxStateSchemaFields: Limit = Limit("spark.mapwithstate.maxStateSchemaFields", 1000)

  /** Refuses a request above one of the limits in `conf`. */
  def check(request: MapWithStateRequest, conf: SQLConf): Unit = {
    val spec = request.spec
    spec.numPartitions.foreach(atMost(_, "num_partitions", MaxNumPartitions, conf))
    spec.checkpointInterval.foreach(atMost(_, "checkpoint_interval", MaxCheckpointInterval, conf))
    // A schema that does not parse is the builder's to report, with its own message.
    stateType(spec.stateSchema).foreach { schema =>
      atMost(fieldCount(schema), "the number of fields in state_schema (nested ones included)",
        MaxStateSchemaFields, conf)
    }
  }

  /** The value of `limit` in `conf`; a setting that is not a positive number is refused. */
  def value(limit: Limit, conf: SQLConf): Int = {
    val raw = conf.getConfString(limit.key, limit.default.toString)
    Try(raw.trim.toInt).toOption.filter(_ > 0).getOrElse(throw MapWithStateException(
        ErrorCondition.InvalidConf, s"${limit.key} must be a positive whole number, got '$raw'"))
  }

  private def atMost(n: Int, what: String, limit: Limit, conf: SQLConf): Unit = {
    val max = value(limit, conf)
    if (n > max) {
      throw MapWithStateException(ErrorCondition.LimitExceeded,
        s"$what is $n, above the limit of $max; set ${limit.key} to allow more")
    }
  }

  private def stateType(schema: Either[String, DataType]): Option[DataType] = schema match {
    case Left(ddl) => Try(StructType.fromDDL(ddl)).toOption
    case Right(dataType) => Some(dataType)
  }

  /** Every field of every struct in `dataType`, however deeply nested. */
  private def fieldCount(dataType: DataType): Int = dataType match {
    case s: StructType => s.fields.length + s.fields.map(f => fieldCount(f.dataType)).sum
    case a: ArrayType => fieldCount(a.elementType)
    case m: MapType => fieldCount(m.keyType) + fieldCount(m.valueType)
    case _ => 0
  }
}
