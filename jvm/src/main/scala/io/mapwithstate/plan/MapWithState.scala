package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeSet, SortOrder}
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
 * @param groups    map_groups_with_state: one call per key per batch; `values` are then the
 *                  results of `aggregates` (over `child`'s columns), one row per key and batch,
 *                  which the planner computes before the stateful operator
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
    groups: Boolean = false,
    aggregates: Seq[Alias] = Nil) extends LogicalPlan {

  override def children: Seq[LogicalPlan] = child +: initialState.toSeq

  override lazy val references: AttributeSet =
    AttributeSet(keys ++ (if (groups) Nil else values) ++ batchTime.toSeq ++
      orderBy.flatMap(_.references)) ++ AttributeSet(aggregates.flatMap(_.references)) ++
      AttributeSet(initialState.toSeq.flatMap(_.output))

  override def producedAttributes: AttributeSet =
    AttributeSet(output) ++ (if (groups) AttributeSet(values) else AttributeSet.empty)

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[LogicalPlan]): LogicalPlan =
    copy(child = newChildren.head, initialState = if (newChildren.size > 1) Some(newChildren(1)) else None)
}
