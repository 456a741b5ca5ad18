package io.mapwithstate.bench

/**
 * One micro-batch as the harness sees it: input records, wall time, the state memory the
 * engine reported after it and the rows the sink took (each -1 when not reported). The Python
 * side decides which batches are warm-up; this side reports them all, in order.
 */
final case class Batch(records: Long, millis: Long, stateBytes: Long, outputRows: Long = -1L)

/** The one JSON shape the Python side reads (bench/jvm_systems.py); written by hand to keep
 * this project free of dependencies beyond Spark's jars. */
object Json {
  def result(system: String, outcome: Either[String, Seq[Batch]]): String = outcome match {
    case Right(batches) =>
      val rows = batches.map(b =>
        s"[${b.records},${b.millis},${b.stateBytes},${b.outputRows}]").mkString(",")
      s"""{"system":"$system","batches":[$rows]}"""
    case Left(error) =>
      s"""{"system":"$system","error":"${escape(error)}"}"""
  }

  private def escape(s: String): String = s.flatMap {
    case '"' => "\\\""
    case '\\' => "\\\\"
    case c if c < ' ' => " "
    case c => c.toString
  }
}
