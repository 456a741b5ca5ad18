package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{
  Attribute,
  AttributeSet,
  BoundReference,
  Expression,
  GenericInternalRow,
  SortOrder,
  Unevaluable,
  UnsafeProjection,
  UnsafeRow
}
import org.apache.spark.sql.catalyst.expressions.aggregate.{
  AggregateExpression,
  DeclarativeAggregate,
  ImperativeAggregate
}
import org.apache.spark.sql.types.{DataType, NullType}

/**
 * What kind of function a [[MapWithState]] runs, and what only that kind has: a function
 * called per record (`map_with_state`, DStream's mapWithState) or once per key and batch over
 * aggregates of its records (`map_groups_with_state`, Spark's flatMapGroupsWithState). The
 * logical node holds it and its physical operators get it unchanged; each layer matches on it
 * where the kinds differ, so a new kind is a new case the compiler points at in each of them.
 *
 * It is an (unevaluable) expression so that the attributes it holds stay in sight of Spark's
 * attribute rewrites, as Spark's own `MergeAction`s in `MergeIntoTable` are: its children are
 * the columns of the node's child it reads.
 */
sealed trait FunctionKind extends Expression with Unevaluable {

  /**
   * The function's value columns, columns of the stateful operator's input rows after the
   * keys: the child's columns a per-record function reads, or a group function's aggregates.
   */
  def values: Seq[Attribute]

  /** The columns the node produces itself besides its output. */
  def producedAttributes: AttributeSet

  /** The function a user called, as errors name it. */
  def functionName: String

  override def nullable: Boolean = true
  override def dataType: DataType = NullType
}

object FunctionKind {

  /**
   * A function called once per record: `values` are columns of the node's child, and a key's
   * records of one batch run in `orderBy` order (of a replay's batch, or of a micro-batch).
   */
  case class PerRecord(values: Seq[Attribute], orderBy: Seq[SortOrder]) extends FunctionKind {
    override def producedAttributes: AttributeSet = AttributeSet.empty
    override def functionName: String = "map_with_state"
    override def children: Seq[Expression] = values ++ orderBy

    override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression])
        : PerRecord = {
      val (newValues, newOrderBy) = newChildren.splitAt(values.size)
      copy(values = newValues.map(_.asInstanceOf[Attribute]),
        orderBy = newOrderBy.map(_.asInstanceOf[SortOrder]))
    }
  }

  /**
   * A function called once per key and batch (the keys with records in it, the timing-out
   * keys, and in the first batch every key of the initial state): `values` are the results of
   * `aggregates` over the key's records of the batch, one row per key and batch, which the
   * planner computes before the stateful operator (`GroupAggregation`); the node produces them.
   *
   * @param aggregates the aggregate expressions, out of sight of Spark's analyzer (see
   *                   [[GroupAggregates]])
   * @param inputs     the columns of the node's child the aggregates read, in
   *                   `aggregates.inputs` order: Spark rewrites these (a stream's micro-batch
   *                   gives its source new attributes), and [[boundAggregates]] follows them
   * @param values     the aggregates' results, in `aggregates.expressions` order
   * @param emptyInput the aggregates over no records — `count` 0, `sum` null, `collect_list`
   *                   empty — as one row in the order of `values`: what a call for a key
   *                   without records in the batch (timing out, or only in the initial state)
   *                   sees, as there is nothing to aggregate
   * @param orderBy    the order of a key's records of one batch as the aggregates read them
   *                   (what `collect_list`, `first` or `last` give depends on it), over columns
   *                   of the node's child; none: the order the aggregation reads them in
   */
  case class PerGroup(
      aggregates: GroupAggregates,
      inputs: Seq[Attribute],
      values: Seq[Attribute],
      emptyInput: UnsafeRow,
      orderBy: Seq[SortOrder] = Nil) extends FunctionKind {

    override def producedAttributes: AttributeSet = AttributeSet(values)
    override def functionName: String = "map_groups_with_state"
    override def children: Seq[Expression] = inputs ++ orderBy

    override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression])
        : PerGroup = {
      val (newInputs, newOrderBy) = newChildren.splitAt(inputs.size)
      copy(inputs = newInputs.map(_.asInstanceOf[Attribute]),
        orderBy = newOrderBy.map(_.asInstanceOf[SortOrder]))
    }

    /** The aggregates over the current attributes of the node's child. */
    def boundAggregates: Seq[AggregateExpression] = {
      val current = aggregates.inputs.map(_.exprId).zip(inputs).toMap
      aggregates.expressions.map(e =>
        aggregateOf(e.transform {
          case a: Attribute if current.contains(a.exprId) => current(a.exprId)
        }))
    }
  }

  object PerGroup {

    /** The kind of a group function whose `values` are the results of `aggregates`. */
    def apply(aggregates: GroupAggregates, values: Seq[Attribute]): PerGroup = {
      val overNoRecords = aggregates.expressions.map(e => resultOverNoRecords(aggregateOf(e)))
      val emptyInput = UnsafeProjection.create(values.zipWithIndex.map { case (v, i) =>
        BoundReference(i, v.dataType, nullable = true)
      })(new GenericInternalRow(overNoRecords.toArray)).copy()
      PerGroup(aggregates, aggregates.inputs, values, emptyInput)
    }
  }

  private def aggregateOf(e: Expression): AggregateExpression = e match {
    case agg: AggregateExpression => agg
    case other => throw new IllegalStateException(s"not an aggregate: ${other.sql}")
  }

  /** An aggregate's result over no records: its initial buffer, evaluated. */
  private def resultOverNoRecords(agg: AggregateExpression): Any = agg.aggregateFunction match {
    case d: DeclarativeAggregate =>
      val initial = d.aggBufferAttributes.map(_.exprId).zip(d.initialValues).toMap
      d.evaluateExpression.transform {
        case a: Attribute if initial.contains(a.exprId) => initial(a.exprId)
      }.eval(InternalRow.empty)
    case i: ImperativeAggregate =>
      val buffer = new GenericInternalRow(i.aggBufferAttributes.size)
      val f = i.withNewMutableAggBufferOffset(0).withNewInputAggBufferOffset(0)
      f.initialize(buffer)
      f.eval(buffer)
  }
}

/**
 * The aggregate expressions of a group function's [[FunctionKind.PerGroup]], held out of sight
 * of Spark's analyzer rules: its checks refuse aggregates in any operator but its own, and it
 * strips aliases inside them. Spark's attribute rewrites cannot reach them either, so they come
 * with the `inputs` they read as of building, which the kind keeps, in sight, as its own
 * `inputs`. They are planned by [[io.mapwithstate.execution.GroupAggregation]].
 */
case class GroupAggregates(expressions: Seq[Expression], inputs: Seq[Attribute])
