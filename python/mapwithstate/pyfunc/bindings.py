"""Local variables bound once: how a compiled function's plan grows with its source.

A Column is a tree, so a variable read twice holds two copies of its value's tree, and a
variable computed from one read twice holds four: ``x = i // j + i % j`` repeated down a
function doubles the plan at each line, and Python's checks (``ZeroDivisionError``, overflow)
copy the operands once more each. :class:`Bindings` gives a large value a name instead: the
variable's Column is a lambda variable, and each output Column the compiler hands to the server
is wrapped, for every name it uses, in the plugin's ``__mws_python_let(value, name -> output)``
(``io.mapwithstate.pyfunc.PythonLet``, the ``let`` SQL lacks), so each value is in each
output's plan once. A value may use earlier names, so an output's lets nest; the server
analyses the nest in time linear in its depth, and generates code for it that evaluates each
value once into a field and then the body.

Names stay second choice: a value named is out of reach of Spark's common subexpression
elimination, and the compiler's self-checks are made without them. So a function is first
compiled with its values copied, and compiled again with names only when a copied Column grows
past :func:`copied_plan_limit` (copies that multiply, not a long function's linear growth).

Names are lambda variables made by the compiler (the public ``pyspark.sql.functions`` makes
only anonymous ones): on Spark Connect its expression messages, on a classic session the JVM's
Columns PySpark itself makes for ``transform``'s lambda (``PythonSQLUtils``), so that both
compile a function to the same lets. Every name of a compilation is new (a loop's body and an
aggregate's records name values of their own, beside the names bound around them): a name is
never shadowed.

In a group function a named value may hold aggregates (``n = len(rows)``): the plugin computes
each aggregate before the call and reads its result in the let, as anywhere else in the
function. What an aggregate computes per record may not read a name bound around the output,
as its records are aggregated before the call: values computed per record are resolved inside
the aggregate with the names they read (:meth:`Bindings.in_aggregate`).
"""

from dataclasses import dataclass, field
from typing import Any, List, Tuple, cast

from pyspark.sql import Column

from mapwithstate.pyfunc.values import INLINE_LIMIT

__all__ = ["Bindings", "PlanTooLarge", "COPIED_PLAN_LIMIT", "copied_plan_limit"]

#: The largest text of a Column a compilation without names may make: small functions stay
#: copies and only those whose copies grow past this get names.
COPIED_PLAN_LIMIT = 20_000

#: A plan of copies growing linearly with the source (a long run of statements each building on
#: the last) stays copies up to this many characters a line: names would not shorten it.
COPIED_CHARS_PER_LINE = 400


#: The plugin's ``let``: ``__mws_python_let(value, name -> body)`` (``PythonLet``).
LET = "__mws_python_let"


def copied_plan_limit(lines: int) -> int:
    """The longest Column a compilation without names may make, for a function of ``lines``
    source lines."""
    return max(COPIED_PLAN_LIMIT, COPIED_CHARS_PER_LINE * lines)


class PlanTooLarge(Exception):
    """A compilation without names made a Column longer than its limit."""


@dataclass
class Bindings:
    """The named values of one compilation, in the order they were bound (a later value may
    use an earlier name, never the reverse)."""

    enabled: bool
    #: Without names: the longest value copied into its uses, beyond which the compilation
    #: stops with :class:`PlanTooLarge` (0: no limit).
    limit: int = 0
    named: List[Tuple[str, Any, Column]] = field(default_factory=list)
    #: The longest text of a value copied rather than named.
    inline: int = INLINE_LIMIT
    #: The most lets a Column :meth:`resolve` made nests (the analyzer resolves one a pass:
    #: :mod:`~mapwithstate.pyfunc.let_nesting`).
    deepest: int = 0
    #: How many names the compilation has made, shared with the bindings made inside it (a
    #: loop's body, an aggregate's records), so that no name there shadows one bound outside.
    made: List[int] = field(default_factory=lambda: [0])

    def in_lambda(self, inline: int) -> "Bindings":
        """The bindings of the body of a loop's lambda: its own names, resolved inside the
        lambda, which the lambda's Columns read beside this one's."""
        return Bindings(True, inline=inline, made=self.made)

    def in_aggregate(self) -> "Bindings":
        """The bindings of the values computed per record inside an aggregate of a group
        function: they read this one's names and name their own, all of which
        :meth:`resolve` binds inside the aggregate (a lambda variable bound outside an
        aggregate is out of its reach, as the aggregate is computed before the call)."""
        return Bindings(self.enabled, self.limit, list(self.named), self.inline, made=self.made)

    def share(self, column: Column) -> Column:
        """``column``, or the name of its value where it is large enough to name."""
        if not self.enabled:
            if self.limit and len(str(column)) > self.limit:
                raise PlanTooLarge()
            return column
        if len(str(column)) <= self.inline:
            return column
        name = f"__mws_v{self.made[0]}__"
        self.made[0] += 1
        variable = _variable(column, name)
        self.named.append((name, variable, column))
        return variable

    def resolve(self, column: Column) -> Column:
        """``column`` with every name it uses (directly or through other names) bound."""
        if not self.named:
            return column
        result = column
        used = self.used(column)
        self.deepest = max(self.deepest, len(used))
        for variable, value in used:
            result = _let(value, variable, result)
        return result

    def used(self, column: Column) -> List[Tuple[Any, Column]]:
        """The lambda variable and value of every name ``column`` uses, directly or through
        other names, the last bound first: the order a nest binds them in from the inside
        out (:meth:`resolve`; bench/named_values.py binds them another way to compare)."""
        text = str(column)
        used = []
        for name, variable, value in reversed(self.named):
            if name in text:
                used.append((variable, value))
                text += str(value)
        return used


def _is_connect(column: Column) -> bool:
    return type(column).__module__.startswith("pyspark.sql.connect")


def _variable(like: Column, name: str) -> Column:
    """A lambda variable named ``name`` (on a classic session, ``name`` and a number Spark
    adds), of the kind of Column ``like`` is."""
    if _is_connect(like):
        from pyspark.sql.connect.column import Column as ConnectColumn
        from pyspark.sql.connect.expressions import UnresolvedNamedLambdaVariable

        return ConnectColumn(UnresolvedNamedLambdaVariable([name]))
    from pyspark.sql.classic.column import Column as ClassicColumn

    return ClassicColumn(_python_sql_utils().unresolvedNamedLambdaVariable(name))


def _let(value: Column, variable: Column, body: Column) -> Column:
    """``__mws_python_let(value, variable -> body)``, of the kind of Column ``body`` is."""
    if _is_connect(body):
        from pyspark.sql.connect.column import Column as ConnectColumn
        from pyspark.sql.connect.expressions import LambdaFunction, UnresolvedFunction

        function = LambdaFunction(_expression(body), [_expression(variable)])
        return ConnectColumn(UnresolvedFunction(LET, [_expression(value), function]))
    from pyspark.sql.classic.column import Column as ClassicColumn
    from pyspark.sql.classic.column import _to_seq

    # As PySpark builds transform's lambda on a classic session (pyspark.sql.functions).
    utils, java = _python_sql_utils(), lambda c: cast(Any, c)._jc
    function = utils.lambdaFunction(java(body), _to_seq(_context(), [java(variable)]))
    return ClassicColumn(utils.fn(LET, _to_seq(_context(), [java(value), function])))


def _expression(column: Column) -> Any:
    """A Spark Connect Column's expression."""
    return cast(Any, column)._expr


def _context() -> Any:
    """The classic session's SparkContext."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    assert context is not None, "a classic Column without a SparkContext"
    return context


def _python_sql_utils() -> Any:
    """The JVM's ``PythonSQLUtils``: how PySpark builds the Columns Spark's Scala API keeps to
    itself (lambda variables and functions) on a classic session."""
    return _context()._jvm.PythonSQLUtils
