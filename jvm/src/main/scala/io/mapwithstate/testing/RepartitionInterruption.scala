package io.mapwithstate.testing

import org.apache.spark.sql.internal.SQLConf

/**
 * Test support: stops `repartition_state` at one of its steps, as a crash there would, so a
 * test can check that the checkpoint it leaves is usable. Set
 * `spark.mapwithstate.test.interruptRepartitionAfter` to `state` (the new layout's state files
 * are written, the offset log entry is not) or `offsets` (the offset log entry is written, the
 * commit is not).
 *
 * Inert unless Spark runs in testing mode, as [[TaskFailureInjection]] is.
 */
object RepartitionInterruption {
  val Conf = "spark.mapwithstate.test.interruptRepartitionAfter"

  /** Fails here when the session asks to be interrupted after `step`. */
  def after(step: String, conf: SQLConf): Unit =
    if (TaskFailureInjection.isTesting && conf.getConfString(Conf, "") == step) {
      throw new IllegalStateException(s"injected interruption ($Conf) after the $step step")
    }
}
