package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeSet, SortOrder}
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
    eventTime: Option[Attribute] = None) extends LogicalPlan {

  override def children: Seq[LogicalPlan] = child +: initialState.toSeq

  override lazy val references: AttributeSet =
    AttributeSet(keys ++ values ++ batchTime.toSeq ++ eventTime.toSeq ++
      orderBy.flatMap(_.references)) ++
      AttributeSet(initialState.toSeq.flatMap(_.output))

  override def producedAttributes: AttributeSet = AttributeSet(output)

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[LogicalPlan]): LogicalPlan =
    copy(child = newChildren.head, initialState = if (newChildren.size > 1) Some(newChildren(1)) else None)
}
