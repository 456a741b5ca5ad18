package io.mapwithstate.plan

import java.util.concurrent.atomic.AtomicLong

import io.mapwithstate.pyfunc.PythonFunctions
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.analysis.{FunctionRegistry, UnresolvedFunction}
import org.apache.spark.sql.catalyst.expressions.{
  Alias,
  Attribute,
  AttributeReference,
  ExprId,
  Expression,
  PlanExpression,
  UnresolvedNamedLambdaVariable
}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.{DataType, Metadata, StructType}

/**
 * The state functions a session has resolved ([[StateFunctionResolver.resolve]]), kept so
 * that a query of a function the session has already resolved skips Spark's analyzer: a test
 * or an application running the same function in query after query spent most of the server's
 * planning CPU analyzing it anew each time.
 *
 * A function is reused only for exactly what its resolution depends on ([[Key]]): its
 * expressions as sent (up to the ids Spark gives aliases and the names of lambda variables,
 * which are fresh in every request), the names, types, nullability and metadata of the input
 * columns in order, the state type, every SQL conf the session has set (the time zone and ANSI
 * mode among them: casts and arithmetic resolve differently under them), and the current
 * catalog and namespace (`current_database()`). Not cached: a function calling anything but a
 * built-in or the plugin's function (a temporary or catalog function can be redefined between
 * queries), one with a subquery (a view can be), and one whose resolved expressions are
 * nondeterministic (`rand()` draws its seed when resolved: each query gets its own). A function that fails to
 * resolve is not cached either. Each session keeps at most [[MaxPerSession]] functions, the
 * least recently used dropped first; a session's functions go with the session.
 *
 * A function taken from the cache is given fresh attributes ([[withFreshAttributes]]), as a
 * new resolution has: two queries of one session never share an attribute id.
 */
private[plan] object ResolvedStateFunctions {

  private val MaxPerSession = 64

  /** What a resolution depends on (see the object's documentation). */
  final case class Key(
      columns: Seq[(String, DataType, Boolean, Metadata)],
      stateType: StructType,
      expressions: Seq[Option[Expression]],
      confs: Map[String, String],
      catalog: String,
      namespace: Seq[String])

  private type Functions = java.util.LinkedHashMap[Key, StateFunction]

  /** Each session's functions, least recently used first. Guarded by itself. */
  private val bySession = new java.util.WeakHashMap[SparkSession, Functions]()

  private val analyses = new AtomicLong()

  /** How many functions this JVM has resolved with the analyzer here (for tests). */
  def resolutions: Long = analyses.get()

  /**
   * The function of these inputs, from the session's cache or else `resolve`d (and kept when
   * it may be).
   */
  def apply(
      session: SparkSession,
      dataColumns: Seq[Attribute],
      stateType: StructType,
      expressions: Seq[Option[Expression]])(resolve: => StateFunction): StateFunction = {
    if (!expressions.flatten.forall(cacheable(session, _))) {
      analyses.incrementAndGet()
      return resolve
    }
    val key = keyOf(session, dataColumns, stateType, expressions)
    val cached = bySession.synchronized {
      val functions = bySession.get(session)
      if (functions == null) null else functions.get(key)
    }
    if (cached != null) withFreshAttributes(cached)
    else {
      analyses.incrementAndGet()
      val resolved = resolve
      val all = resolved.update ++ resolved.remove ++ resolved.emit ++ resolved.timeoutAt
      if (all.forall(_.deterministic)) {
        bySession.synchronized {
          var functions = bySession.get(session)
          if (functions == null) {
            functions = new Functions(16, 0.75f, true) {
              override def removeEldestEntry(
                  eldest: java.util.Map.Entry[Key, StateFunction]): Boolean =
                size > MaxPerSession
            }
            bySession.put(session, functions)
          }
          functions.put(key, resolved)
        }
      }
      resolved
    }
  }

  private def keyOf(
      session: SparkSession,
      dataColumns: Seq[Attribute],
      stateType: StructType,
      expressions: Seq[Option[Expression]]): Key = {
    val catalogs = session.sessionState.catalogManager
    Key(
      dataColumns.map(a => (a.name, a.dataType, a.nullable, a.metadata)).toVector,
      stateType,
      expressions.map(_.map(normalized)).toVector,
      session.sessionState.conf.getAllConfs,
      catalogs.currentCatalog.name,
      catalogs.currentNamespace.toSeq)
  }

  /**
   * Whether `e` resolves the same way whatever the session's catalog holds: only built-in
   * functions and the plugin's own (the Python compiler's, registered in every session), no
   * subqueries.
   */
  private def cacheable(session: SparkSession, e: Expression): Boolean = !e.exists {
    case f: UnresolvedFunction =>
      val id = FunctionIdentifier(f.nameParts.last)
      val known = f.nameParts.length == 1 &&
        (FunctionRegistry.builtin.functionExists(id) || PythonFunctions.reserves(id.funcName))
      !known || session.sessionState.catalog.isTemporaryFunction(id)
    case _: PlanExpression[_] => true
    case _ => false
  }

  /**
   * `e` with what differs between two requests of the same function made equal: every alias's
   * id, and the lambda variables renamed in order of appearance (a one-to-one renaming, so two
   * normalized expressions are equal only if the originals are the same up to it).
   */
  private def normalized(e: Expression): Expression = {
    val names = scala.collection.mutable.LinkedHashMap.empty[Seq[String], Seq[String]]
    e.transformUp {
      case a: Alias =>
        Alias(a.child, a.name)(ExprId(0), a.qualifier, a.explicitMetadata,
          a.nonInheritableMetadataKeys)
      case v: UnresolvedNamedLambdaVariable =>
        UnresolvedNamedLambdaVariable(
          names.getOrElseUpdate(v.nameParts, Seq(s"lambda_${names.size}")))
    }
  }

  /** `function` with new attributes (new ids) in place of its data and context attributes. */
  private def withFreshAttributes(function: StateFunction): StateFunction = {
    val fresh = (function.dataAttributes ++ function.contextAttributes)
      .map(a => a.exprId -> a.newInstance()).toMap
    def rebound(e: Expression): Expression = e.transform {
      case a: AttributeReference if fresh.contains(a.exprId) =>
        a.withExprId(fresh(a.exprId).exprId)
    }
    function.copy(
      dataAttributes = function.dataAttributes.map(a => fresh(a.exprId)),
      contextAttributes = function.contextAttributes.map(a => fresh(a.exprId)),
      update = function.update.map(rebound),
      remove = function.remove.map(rebound),
      emit = function.emit.map(rebound),
      timeoutAt = function.timeoutAt.map(rebound))
  }
}
