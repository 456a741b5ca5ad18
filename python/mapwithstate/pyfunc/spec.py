"""``state_function``: a state function written in Python, kept as a ``StateSpec``.

The decorator returns a :class:`PythonStateSpec`, a ``StateSpec`` whose builder methods chain
as usual and which also keeps the function: ``spec.python`` is the function itself (plain
Python, for tests without Spark), and ``map_with_state`` / ``map_groups_with_state`` compile
it against the input's columns and the state schema (:func:`compile_for`) before the request
is built, so no Python runs on the executors.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Union

from pyspark.sql.types import StructType

from mapwithstate.pyfunc.call_sites import without_call_sites
from mapwithstate.pyfunc.compiler import compile_function, input_columns
from mapwithstate.pyfunc.source import FunctionSource
from mapwithstate.spec import StateSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["PythonStateSpec", "state_function", "compile_for"]


@dataclass(frozen=True)
class PythonStateSpec(StateSpec):
    """A ``StateSpec`` whose state function is Python source, compiled per input.

    >>> import mapwithstate as mws
    >>> @mws.state_function("n BIGINT")
    ... def count(word, state):
    ...     n = (state.n or 0) + 1
    ...     state.update(n=n)
    ...     return {"word": word, "n": n}
    >>> spec = count.timeout("1 hour")        # still a PythonStateSpec
    >>> spec.python.__name__
    'count'
    """

    _function: Optional[Callable[..., Any]] = None

    @property
    def python(self) -> Callable[..., Any]:
        """The undecorated function, callable as plain Python."""
        assert self._function is not None
        return self._function

    @property
    def is_group_function(self) -> bool:
        """True for a function with a ``rows`` parameter (for ``map_groups_with_state``)."""
        return "rows" in _parameters(self.python)

    def compiled(self, df: "DataFrame", key: Any, value: Any = None) -> StateSpec:
        """The Column form of this spec for ``df`` with key column(s) ``key`` (and value
        columns ``value``, default every other column)."""
        keys = _as_list(key)
        values = _as_list(value) if value is not None else None
        columns = input_columns(df, keys, values)
        key_names = list(columns)[: len(keys)]
        with without_call_sites():
            result = compile_function(
                self.python,
                self.state_schema,
                df,
                columns,
                self.is_group_function,
                key_names,
                domain=str(self.settings.get("timeout_domain", "processing_time")),
            )
        settings = {name: getattr(self, name) for name in StateSpec.__dataclass_fields__}
        settings.update(
            update=result.update,
            remove=result.remove,
            emit=result.emit,
            timeout_at=result.timeout_at,
        )
        return StateSpec(**settings)

    def explain(self, df: "DataFrame", key: Any = None) -> Dict[str, str]:
        """The Columns this function compiles to over ``df``, as Spark SQL text, by
        ``StateSpec.function`` argument (``update``, ``remove``, ``emit``, ``timeout_at``;
        absent ones are left out). ``key`` defaults to a group function's key parameters,
        and to no key for a per-record function (every column is then a value)."""
        from mapwithstate.pyfunc.compiler import _Probe, _state_struct

        if key is None:
            key = (
                [p for p in _parameters(self.python) if p not in ("state", "rows")]
                if self.is_group_function
                else []
            )
        keys = _as_list(key)
        compiled = self.compiled(df, keys)
        probe = _Probe(df, input_columns(df, keys, None), _state_struct(df, self.state_schema))
        return {
            name: probe.sql(getattr(compiled, name), keys if self.is_group_function else None)
            for name in ("update", "remove", "emit", "timeout_at")
            if getattr(compiled, name) is not None
        }


def state_function(
    state_schema: Union[str, StructType],
) -> Callable[[Callable[..., Any]], PythonStateSpec]:
    """Decorates a Python state function: returns a :class:`PythonStateSpec` over a state of
    type ``state_schema`` (a DDL string or ``StructType``).

    Parameters bind by name: ``state`` is the key's state, ``rows`` (a group function, for
    ``map_groups_with_state``) the key's records of the batch, every other one a key or value
    column. ``return {...}`` emits a row, a generator (``yield {...}``) any number.

    >>> import mapwithstate as mws
    >>> @mws.state_function("clicks BIGINT")
    ... def clicks(user, page, state):
    ...     state.update(clicks=(state.clicks or 0) + 1)
    ...     if page == "checkout":
    ...         return {"user": user, "clicks": state.clicks}
    >>> clicks.python.__name__
    'clicks'
    """
    if not isinstance(state_schema, (str, StructType)):
        raise TypeError(
            f"state_schema must be a DDL string or a StructType, got {type(state_schema).__name__}"
        )

    def decorate(function: Callable[..., Any]) -> PythonStateSpec:
        if not callable(function):
            raise TypeError(f"state_function decorates a function, got {type(function).__name__}")
        FunctionSource.of(function)  # refuses a function without source now
        return PythonStateSpec(state_schema, _function=function)

    return decorate


def compile_for(
    spec: StateSpec, df: "DataFrame", key: Any, value: Any = None, groups: bool = False
) -> StateSpec:
    """``spec`` as the request needs it: a :class:`PythonStateSpec` compiled for ``df``
    (a group function for ``map_groups_with_state``, a per-record one otherwise); any other
    spec as it is."""
    if not isinstance(spec, PythonStateSpec) or not hasattr(df, "schema"):
        return spec
    if spec.is_group_function != groups:
        source = FunctionSource.of(spec.python)
        if groups:
            raise source.error(
                source.tree,
                f"{source.name} has no 'rows' parameter",
                "map_groups_with_state takes a group function: def f(<key columns>, rows, state)",
            )
        raise source.error(
            source.tree,
            f"{source.name} has a 'rows' parameter",
            "a group function runs with map_groups_with_state",
        )
    return spec.compiled(df, key, value)


def _parameters(function: Callable[..., Any]) -> List[str]:
    code = function.__code__
    return list(code.co_varnames[: code.co_argcount])


def _as_list(value: Any) -> List[Union[str, "Column"]]:
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value] if not isinstance(value, Sequence) or isinstance(value, str) else list(value)
