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

Names are Spark Connect lambda variables made by the compiler (the public
``pyspark.sql.functions`` makes only anonymous ones); on a classic session, and in group
functions (whose values may hold aggregates, which a lambda must not reference), values are
copied where used, as before.
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

    def share(self, column: Column) -> Column:
        """``column``, or the name of its value where it is large enough to name."""
        if not self.enabled:
            if self.limit and len(str(column)) > self.limit:
                raise PlanTooLarge()
            return column
        if not _is_connect(column) or len(str(column)) <= self.inline:
            return column
        from pyspark.sql.connect.column import Column as ConnectColumn
        from pyspark.sql.connect.expressions import UnresolvedNamedLambdaVariable

        name = f"__mws_v{len(self.named)}__"
        variable = UnresolvedNamedLambdaVariable([name])
        self.named.append((name, variable, column))
        return ConnectColumn(variable)

    def resolve(self, column: Column) -> Column:
        """``column`` with every name it uses (directly or through other names) bound."""
        if not self.named or not _is_connect(column):
            return column
        from pyspark.sql.connect.column import Column as ConnectColumn
        from pyspark.sql.connect.expressions import LambdaFunction, UnresolvedFunction

        result = column
        used = self.used(column)
        self.deepest = max(self.deepest, len(used))
        for variable, value in used:
            function = LambdaFunction(_expression(result), [variable])
            result = ConnectColumn(UnresolvedFunction(LET, [_expression(value), function]))
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


def _expression(column: Column) -> Any:
    """A Spark Connect Column's expression."""
    return cast(Any, column)._expr
