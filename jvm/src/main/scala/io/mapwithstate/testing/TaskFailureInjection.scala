package io.mapwithstate.testing

import java.io.File

import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.internal.SQLConf

/**
 * Test support: makes the first streaming task (of any query) that reaches its second record
 * fail once, after its first record changed its state, so a test can check that the retried
 * task starts from exactly the committed state. Set `spark.mapwithstate.test.failTaskOnceMarker`
 * to a file path; the task that fails creates the file, and once it exists every task runs
 * normally.
 *
 * Inert unless Spark runs in testing mode (`spark.testing`, as Spark's own test hooks are):
 * otherwise any client could make an executor create a file wherever it likes.
 */
object TaskFailureInjection {
  val MarkerConf = "spark.mapwithstate.test.failTaskOnceMarker"

  /** The marker file to fail on, read on the driver at planning time; None outside tests. */
  def marker(conf: SQLConf): Option[String] =
    if (!isTesting) None
    else Option(conf.getConfString(MarkerConf, null)).filter(_.nonEmpty)

  /** Spark's own test switch (`Utils.isTesting`, which is private to Spark). */
  private[testing] def isTesting: Boolean =
    sys.env.contains("SPARK_TESTING") || sys.props.contains("spark.testing")

  /** `records`, failing once at the second record when `marker` is set and does not exist. */
  def around(records: Iterator[InternalRow], marker: Option[String]): Iterator[InternalRow] =
    marker match {
      case None => records
      case Some(path) =>
        new Iterator[InternalRow] {
          private var seen = 0
          override def hasNext: Boolean = records.hasNext
          override def next(): InternalRow = {
            if (seen == 1 && new File(path).createNewFile()) {
              throw new RuntimeException(s"injected failure ($MarkerConf) in partition " +
                s"${TaskContext.getPartitionId()} after its first record")
            }
            seen += 1
            records.next()
          }
        }
    }
}
