package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeSet, Expression, SortOrder}
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
 * @param batchTime batch input only: the TIMESTAMP column that splits records into batches
 * @param orderBy   the order of a key's records within one batch
 * @param output    the emitted columns, or `batch_time`, the keys and the state's fields
 * @param eventTime the input's event-time column (from `withWatermark`), a column of `child`
 * @param groups    map_groups_with_state: one call per key per batch; `values` are then the
 *                  results of `aggregates` (over `child`'s columns, in `values` order), one row
 *                  per key and batch, which the planner computes before the stateful operator
 * @param aggregateInputs the columns of `child` the aggregates read, in `aggregates.inputs`
 *                  order: Spark rewrites these (a stream's micro-batch gives its source new
 *                  attributes), and [[boundAggregates]] follows them
 * @param stateOperatorIndex over streaming input: which of its query's map_with_state
 *                  operators this is, numbered when the query starts by [[NumberStateOperators]]
 *                  (0 for the first or only one); its state lives under the operator id
 *                  `MapWithStateStreamExec.operatorId(stateOperatorIndex)`
 */
case class MapWithState(
    keys: Seq[Attribute],
    values: Seq[Attribute],
    batchTime: Option[Attribute],
    orderBy: Seq[SortOrder],
    function: StateFunction,
    options: MapWithStateOptions,
    output: Seq[Attribute],
    child: LogicalPlan,
    initialState: Option[LogicalPlan],
    eventTime: Option[Attribute] = None,
    groups: Boolean = false,
    aggregateInputs: Seq[Attribute] = Nil,
    aggregates: GroupAggregates = GroupAggregates(Nil, Nil),
    stateOperatorIndex: Int = 0) extends LogicalPlan {

  override def children: Seq[LogicalPlan] = child +: initialState.toSeq

  /** The function a user called for this node, as errors name it. */
  def functionName: String = if (groups) "map_groups_with_state" else "map_with_state"

  /** The aggregates over the current attributes of `child`. */
  def boundAggregates: Seq[Expression] = {
    val current = aggregates.inputs.map(_.exprId).zip(aggregateInputs).toMap
    aggregates.expressions.map(_.transform {
      case a: Attribute if current.contains(a.exprId) => current(a.exprId)
    })
  }

  override lazy val references: AttributeSet =
    AttributeSet(keys ++ (if (groups) Nil else values) ++ batchTime.toSeq ++ eventTime.toSeq ++
      orderBy.flatMap(_.references)) ++ AttributeSet(aggregateInputs) ++
      AttributeSet(initialState.toSeq.flatMap(_.output))

  override def producedAttributes: AttributeSet =
    AttributeSet(output) ++ (if (groups) AttributeSet(values) else AttributeSet.empty)

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[LogicalPlan]): LogicalPlan =
    copy(child = newChildren.head, initialState = if (newChildren.size > 1) Some(newChildren(1)) else None)
}

/**
 * The aggregate expressions of a group function's [[MapWithState]], held out of sight of
 * Spark's analyzer rules: its checks refuse aggregates in any operator but its own, and it strips
 * aliases inside them. Spark's attribute rewrites cannot reach them either, so they come with
 * the `inputs` they read as of building, which the node keeps, in sight, as `aggregateInputs`.
 * They are planned by [[io.mapwithstate.execution.GroupAggregation]].
 */
case class GroupAggregates(expressions: Seq[Expression], inputs: Seq[Attribute])
