"""How deep a compiled function's named values may nest: the server analyzer's passes.

A named value is a ``__mws_python_let`` around each output that uses it
(:mod:`~mapwithstate.pyfunc.bindings`), and a value using another name is bound inside that
name's let. Spark's analyzer resolves one level of the nest a pass of its Resolution batch (it
binds a lambda once the values around it are resolved) and gives up after
``spark.sql.analyzer.maxIterations`` passes (100 by default) with "Max iterations (100)
reached": a failure naming neither the function nor the way out. A plan besides its lets takes
about 9 passes (measured on a branching function: 31 nested lets analyse in 40 passes and 32
do not, 91 in 100); the compiler leaves :data:`MARGIN` passes for them and for the other
lambdas an output nests (comprehensions), and refuses a deeper nest at compile time, naming
the function, the depth and the way out.
"""

from typing import TYPE_CHECKING, Any, Optional

from mapwithstate.pyfunc.source import FunctionSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SETTING", "MARGIN", "LetNesting"]

#: The session setting that bounds the analyzer's passes.
SETTING = "spark.sql.analyzer.maxIterations"

#: The passes of the analyzer's limit not given to lets.
MARGIN = 10


class LetNesting:
    """The deepest nest of lets a session's analyzer resolves, its setting read once, when a
    function first has names (most have none)."""

    def __init__(self, session: "SparkSession") -> None:
        self._session = session
        self._passes: Optional[int] = None

    def passes(self) -> int:
        """The session's ``spark.sql.analyzer.maxIterations``."""
        if self._passes is None:
            self._passes = int(_setting(self._session) or 100)
        return self._passes

    def check(self, source: FunctionSource, depth: int) -> None:
        """Raises :class:`CompileError` where ``depth`` nested lets pass what the analyzer
        resolves."""
        if depth == 0 or depth <= self.passes() - MARGIN:
            return
        raise source.error(
            source.tree,
            f"state function {source.name}: an output nests {depth} named values (a chain of "
            f"values, each computed from the one before), more than the "
            f"{self.passes() - MARGIN} the server's analyzer resolves in its {SETTING}="
            f"{self.passes()} passes (less {MARGIN} for the rest of the plan)",
            f"raise {SETTING} for the session (spark.conf.set('{SETTING}', "
            f"'{depth + MARGIN}')), or split the function: compute part of the chain as a "
            "column of the input",
        )


def _setting(session: Any) -> Optional[str]:
    value = session.conf.get(SETTING, None)
    return None if value is None else str(value)
