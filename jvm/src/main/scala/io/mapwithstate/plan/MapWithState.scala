package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeSet}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan

/**
 * The logical mapWithState: the records of `child`, grouped by `keys`, run through `function`
 * against a per-key state; the result is what the function emits, or snapshots of the state.
 *
 * `child` produces the key, value, batch-time and ordering columns (the builder projects
 * them); `initialState`, when present, produces the key columns (of the same types) followed by
 * the state's fields, in that order. The node is built resolved by [[MapWithStateBuilder]],
 * and planned by the strategy in `io.mapwithstate.execution`.
 *
 * @param kind      per record or per group, with what only that kind has ([[FunctionKind]])
 * @param batchTime batch input only: the TIMESTAMP column that splits records into batches
 * @param output    the emitted columns, or `batch_time`, the keys and the state's fields
 * @param eventTime the input's event-time column (from `withWatermark`), a column of `child`
 * @param stateOperatorIndex over streaming input: which of its query's map_with_state
 *                  operators this is, numbered when the query starts by [[NumberStateOperators]]
 *                  (0 for the first or only one); its state lives under the operator id
 *                  `MapWithStateStreamExec.operatorId(stateOperatorIndex)`
 */
case class MapWithState(
    keys: Seq[Attribute],
    kind: FunctionKind,
    batchTime: Option[Attribute],
    function: StateFunction,
    options: MapWithStateOptions,
    output: Seq[Attribute],
    child: LogicalPlan,
    initialState: Option[LogicalPlan],
    eventTime: Option[Attribute] = None,
    stateOperatorIndex: Int = 0) extends LogicalPlan {

  override def children: Seq[LogicalPlan] = child +: initialState.toSeq

  /**
   * Over a stream, a stateful operator, as Spark's own are: Spark asks this of the query's plan
   * when it starts, and a Real-Time Mode query whose plan has none runs with asynchronous
   * progress tracking, which refuses every operator that keeps state in the checkpoint.
   */
  override def isStateful: Boolean = child.isStreaming

  /** The function a user called for this node, as errors name it. */
  def functionName: String = kind.functionName

  override lazy val references: AttributeSet =
    AttributeSet(keys ++ batchTime.toSeq ++ eventTime.toSeq) ++ kind.references ++
      AttributeSet(initialState.toSeq.flatMap(_.output))

  override def producedAttributes: AttributeSet = AttributeSet(output) ++ kind.producedAttributes

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[LogicalPlan])
      : LogicalPlan =
    copy(child = newChildren.head,
      initialState = if (newChildren.size > 1) Some(newChildren(1)) else None)
}
