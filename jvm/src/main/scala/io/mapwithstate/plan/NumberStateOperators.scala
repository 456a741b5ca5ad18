package io.mapwithstate.plan

import org.apache.spark.sql.catalyst.plans.logical.{AnalysisHelper, LogicalPlan}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.streaming.WriteToStream

/**
 * Numbers the map_with_state (and map_groups_with_state) operators of a streaming query when it
 * starts: it owns each streaming [[MapWithState]]'s `stateOperatorIndex`, from which the planner
 * takes the operator's state operator id (`MapWithStateStreamExec.operatorId`), so that several
 * of them in one query keep their state, metrics and schema apart.
 *
 * Spark numbers its own stateful operators per micro-batch, walking the physical plan; ours
 * are planned by a strategy that sees one node at a time, so the number has to travel in the
 * logical node. It is given once, to the analyzed `WriteToStream` (the plan a streaming query
 * keeps and re-plans every micro-batch, so every batch sees the same numbers), in a fixed walk
 * of the query's plan: children before their parent, left before right — in a chain the
 * operator nearest the source is 0, in a union the left side's come first. The same query
 * plan started again on its checkpoint gets the same numbers, and a query's first (or only)
 * operator is always 0, the id every checkpoint written before numbering existed uses.
 */
object NumberStateOperators extends Rule[LogicalPlan] {

  override def apply(plan: LogicalPlan): LogicalPlan = plan match {
    case write: WriteToStream =>
      // The query's plan comes analyzed from its DataFrame; giving numbers to nodes inside it
      // is this rule's whole point, which Spark's guard against re-transforming analyzed
      // plans during analysis would otherwise refuse (in its tests).
      val numbered = AnalysisHelper.allowInvokingTransformsInAnalyzer {
        var next = 0
        write.inputQuery.transformUp {
          case m: MapWithState if m.child.isStreaming =>
            val index = next
            next += 1
            if (m.stateOperatorIndex == index) m else m.copy(stateOperatorIndex = index)
        }
      }
      // Unchanged when already numbered: the analyzer runs rules until nothing changes.
      if (numbered eq write.inputQuery) write else write.copy(inputQuery = numbered)
    case _ => plan
  }
}
