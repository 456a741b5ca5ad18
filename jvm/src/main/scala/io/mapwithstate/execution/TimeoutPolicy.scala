package io.mapwithstate.execution

/**
 * Which batches look for keys that time out, and which keys do: those whose state was last
 * updated strictly before the batch's threshold.
 *
 * Batches are numbered from 1 in the query (a batch replay's timeline, or a streaming query's
 * micro-batches: the store version the batch makes), so that a replay and a stream over the
 * same batches fire the same timeouts. The policy also says whether a record refreshes its
 * key's update time when it leaves the state as it was: only when there is something to time
 * out.
 */
sealed trait TimeoutPolicy extends Serializable {

  /** Whether a record that keeps its key's state still refreshes the key's update time. */
  def refreshesIdleKeys: Boolean

  /**
   * For the `batchNumber`-th batch (counting from 1), at `batchTime` (micros), the update time
   * below which keys time out; None when the batch looks for no timeouts.
   */
  def threshold(batchNumber: Long, batchTime: Long): Option[Long]
}

object TimeoutPolicy {

  /** Keys never time out. */
  case object Never extends TimeoutPolicy {
    override def refreshesIdleKeys: Boolean = false
    override def threshold(batchNumber: Long, batchTime: Long): Option[Long] = None
  }

  /**
   * DStream's mapWithState idle timeout: a key times out once no record has come for it for
   * `timeoutMicros`; timed-out keys are found by a scan on every `scanEvery`-th batch only, as
   * a DStream scans when it checkpoints (every 10 batches by default), so a key may stay idle
   * for up to `scanEvery` batches longer than the timeout.
   */
  final case class Idle(timeoutMicros: Long, scanEvery: Int) extends TimeoutPolicy {
    require(timeoutMicros > 0 && scanEvery > 0, s"bad idle timeout: $this")

    override def refreshesIdleKeys: Boolean = true

    override def threshold(batchNumber: Long, batchTime: Long): Option[Long] =
      if (batchNumber % scanEvery == 0) Some(batchTime - timeoutMicros) else None
  }

  /** The policy of a mapWithState's options: an idle timeout (ms), scanned every n batches. */
  def of(timeoutMs: Option[Long], checkpointInterval: Int): TimeoutPolicy = timeoutMs match {
    case Some(ms) => Idle(ms * 1000L, checkpointInterval)
    case None => Never
  }
}
