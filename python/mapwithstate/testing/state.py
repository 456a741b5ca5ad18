"""One call of a Python state function: the ``state`` object it sees, and the call itself.

A state function written in Python (``mws.state_function``) reads and changes its key's state
through ``state``; :class:`State` is that object for one call, as the compiled function gives
it on the executors. :func:`call` makes one call — parameters bound by name to the record's
columns, ``state``, and ``rows`` for a group function — and returns what it emitted and what
it left: the key's state and timer.
"""

import datetime
import dis
import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from pyspark.sql import Row
from pyspark.sql.types import StructType

from mapwithstate.testing.schema import state_schema, to_stored

__all__ = ["State", "CallResult", "call"]

# The names State answers itself; a state field cannot be read through one of them.
_OWN_NAMES = frozenset(
    {
        "exists",
        "timing_out",
        "batch_time",
        "watermark",
        "timer",
        "update",
        "remove",
        "set_timer",
        "clear_timer",
    }
)


def _augmented(frame: Any) -> bool:
    """Whether ``frame`` is storing an attribute's augmented assignment (``state.n += 1``): the
    store follows an in-place operator (CPython 3.10's ``INPLACE_*``, 3.11's ``BINARY_OP``
    ``+=``), where a plain assignment stores a value it loaded or computed."""
    instructions = list(dis.get_instructions(frame.f_code))
    for index, instruction in enumerate(instructions):
        if instruction.offset == frame.f_lasti:
            return any(
                i.opname.startswith("INPLACE_")
                or (i.opname == "BINARY_OP" and i.argrepr.endswith("="))
                for i in instructions[max(index - 2, 0) : index]
            )
    return False


class State:
    """One call's view of a key's state, as a Python state function's ``state`` parameter.

    - ``state.<field>``: the field's value; ``None`` while the key has no state; after
      ``state.update(...)`` in the same call, the new value (after ``state.remove()``,
      ``None``).
    - ``state.exists``: whether the key has a state at this point of the call (``update``
      makes one, ``remove`` ends it), as Spark's ``GroupState.exists``.
    - ``state.timing_out``: the call is the key's timeout (a timer passed, or the key was idle
      for ``.timeout(...)``); a record's columns are then ``None``, a group's ``rows`` empty.
    - ``state.batch_time``, ``state.watermark`` (``None`` without one): the batch's.
    - ``state.timer``: the key's timer at this point of the call, ``None`` if none. A timer
      stays until a call sets or clears it, except that a timing-out call's timer is the one
      that fired, which the key loses unless the call sets a new one (a timer fires once).
      A call for data in a batch its key's timer is already due in (the key has data, so it
      does not time out) spends that timer too, unless it sets or clears one, as Spark resets
      a timer every call that does not set it. A timer a call sets obeys the server's rules
      (a processing-time timer after the batch time, an event-time one not before the
      watermark).
    - ``state.update(**fields)``: the fields named take the values given, converted as the
      state's column types store them; the others keep their current value (``None`` for a
      key without a state). An unknown field raises ``TypeError``. ``state.n += 1`` is
      ``state.update(n=state.n + 1)`` (a plain ``state.n = 1`` raises ``AttributeError``).
    - ``state.remove()``; ``state.set_timer(ts)``; ``state.clear_timer()``.

    Operations apply in the order the code runs them: the last of ``update``/``remove`` in a
    call decides whether the key keeps a state, the last of ``set_timer``/``clear_timer`` its
    timer.

    >>> from datetime import datetime
    >>> state = State("n BIGINT, last STRING", {"n": 2, "last": "a"},
    ...               batch_time=datetime(2024, 1, 1))
    >>> state.n, state.exists
    (2, True)
    >>> state.update(n=state.n + 1)
    >>> state.n, state.last
    (3, 'a')
    >>> state.remove()
    >>> state.exists, state.n
    (False, None)
    """

    def __init__(
        self,
        schema: Union[str, StructType],
        value: Optional[Mapping[str, Any]] = None,
        *,
        timing_out: bool = False,
        batch_time: Optional[datetime.datetime] = None,
        watermark: Optional[datetime.datetime] = None,
        timer: Optional[datetime.datetime] = None,
    ) -> None:
        """``schema``: the state's type (DDL or ``StructType``); ``value``: the key's state
        before the call (a mapping of field to value), ``None`` for a key without one; the
        others: what the call is, as the attributes of the same names."""
        struct = state_schema(schema)
        clashes = sorted(_OWN_NAMES.intersection(struct.fieldNames()))
        if clashes:
            raise ValueError(
                f"state field(s) {', '.join(clashes)} clash with the state's "
                f"own attributes; rename them"
            )
        self._schema = struct
        self._types = {f.name: f.dataType for f in struct.fields}
        self._values: Optional[Dict[str, Any]] = None
        if value is not None:
            self._values = self._stored(dict(value), "state")
        self._timing_out = bool(timing_out)
        self._batch_time = batch_time
        self._watermark = watermark
        self._timer_before = timer
        # In a timing-out call the fired timer is spent unless the call sets another.
        self._timer = None if timing_out else timer
        self._timer_read = timer
        self._timer_set = False
        self._state_set = False

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not attributes: the state's fields.
        types = self.__dict__.get("_types")
        if types is None or name.startswith("_"):
            raise AttributeError(name)
        if name not in types:
            raise AttributeError(
                f"the state has no field {name!r}; its fields are {', '.join(types)}"
            )
        return None if self._values is None else self._values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        elif name in self.__dict__.get("_types", {}) and _augmented(sys._getframe(1)):
            # state.n += 1: the field's new value, as state.update(n=state.n + 1); a plain
            # state.n = 1 is refused, as the compiler refuses it.
            self.update(**{name: value})
        else:
            raise AttributeError(f"state.{name} cannot be assigned: use state.update({name}=...)")

    def __repr__(self) -> str:
        return f"State({self._values!r}, timer={self.timer!r}, timing_out={self._timing_out!r})"

    @property
    def exists(self) -> bool:
        return self._values is not None

    @property
    def timing_out(self) -> bool:
        return self._timing_out

    @property
    def batch_time(self) -> Optional[datetime.datetime]:
        return self._batch_time

    @property
    def watermark(self) -> Optional[datetime.datetime]:
        return self._watermark

    @property
    def timer(self) -> Optional[datetime.datetime]:
        return self._timer_read

    def update(self, **fields: Any) -> None:
        """Sets the fields named to the values given; the others keep their current value."""
        unknown = [name for name in fields if name not in self._types]
        if unknown:
            raise TypeError(
                f"state.update() got unknown field(s) {', '.join(unknown)}; the "
                f"state's fields are {', '.join(self._types)}"
            )
        current = self._values or dict.fromkeys(self._types)
        self._values = {**current, **self._stored(fields, "state")}
        self._state_set = True

    def remove(self) -> None:
        """Removes the key's state (a later ``update`` in the call makes a new one)."""
        self._values = None
        self._state_set = True

    def set_timer(self, timestamp: datetime.datetime) -> None:
        """Sets the key's timer: the call with ``timing_out`` true comes in the first batch
        whose time (or watermark, in event time) is strictly after it."""
        if not isinstance(timestamp, datetime.datetime):
            raise TypeError(f"state.set_timer() takes a datetime, got {type(timestamp).__name__}")
        self._timer = self._timer_read = timestamp
        self._timer_set = True

    def clear_timer(self) -> None:
        """Removes the key's timer."""
        self._timer = self._timer_read = None
        self._timer_set = True

    def _stored(self, values: Dict[str, Any], where: str) -> Dict[str, Any]:
        return {
            name: to_stored(v, self._types[name], f"{where}.{name}") for name, v in values.items()
        }


@dataclass(frozen=True)
class CallResult:
    """What one call did: the rows it emitted (each a dict of output column to value), the
    key's state after it (a dict of field to value, ``None`` without one) and its timer after
    it (``None`` without one); ``state_set`` and ``timer_set`` say whether the call updated or
    removed the state, and whether it set or cleared the timer."""

    emitted: List[Dict[str, Any]]
    state: Optional[Dict[str, Any]]
    timer: Optional[datetime.datetime]
    state_set: bool
    timer_set: bool


def call(
    function: Callable[..., Any],
    state: State,
    record: Optional[Mapping[str, Any]] = None,
    rows: Optional[Sequence[Mapping[str, Any]]] = None,
) -> CallResult:
    """Calls ``function`` once, as the operator does, and returns what the call did.

    Each parameter is bound by name: ``state`` to ``state``; ``rows`` (a group function's) to
    ``rows``, each row a :class:`pyspark.sql.Row` (``r.v``); every other one to the column
    of that name in ``record`` (a group function's key columns). A timing-out call of a
    per-record function has ``None`` for the value columns. The function's result —
    ``return {...}`` (one row), ``None`` (none) or a generator's dicts (any number) — becomes
    a list of dicts; every dict of a call must have the same keys.

    >>> def count(word, state):
    ...     state.update(n=(state.n or 0) + 1)
    ...     return {"word": word, "n": state.n}
    >>> call(count, State("n BIGINT", {"n": 1}), {"word": "a"}).emitted
    [{'word': 'a', 'n': 2}]
    """
    record = {} if record is None else record
    arguments: Dict[str, Any] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(
                f"{_name(function)}: parameter {name!r} is variadic; a state "
                f"function's parameters are column names, 'state' and 'rows'"
            )
        if name == "state":
            arguments[name] = state
        elif name == "rows":
            if rows is None:
                raise TypeError(
                    f"{_name(function)} has a parameter 'rows' (a group function, "
                    f"for map_groups_with_state) but was given a record"
                )
            arguments[name] = [r if isinstance(r, Row) else Row(**r) for r in rows]
        elif name in record:
            arguments[name] = record[name]
        elif parameter.default is parameter.empty:
            # A parameter with a default naming no column keeps its default (as compiled).
            raise TypeError(
                f"{_name(function)}: parameter {name!r} names no column; the "
                f"columns are {', '.join(record) or '(none)'}"
            )
    if "state" not in arguments:
        raise TypeError(f"{_name(function)} has no parameter 'state'")
    emitted = _rows_of(function, function(**arguments))
    return CallResult(emitted, state._values, state._timer, state._state_set, state._timer_set)


def _rows_of(function: Callable[..., Any], result: Any) -> List[Dict[str, Any]]:
    """A call's result as the rows it emits."""
    if result is None:
        rows: List[Any] = []
    elif isinstance(result, dict):
        rows = [result]
    elif inspect.isgenerator(result):
        rows = list(result)
    else:
        raise TypeError(
            f"{_name(function)} returned a value of type {type(result).__name__}; "
            f"a state function returns a dict, None, or yields dicts"
        )
    for row in rows:
        if not isinstance(row, dict):
            raise TypeError(
                f"{_name(function)} emitted a {type(row).__name__}; each emitted "
                f"row is a dict of output column to value"
            )
        if list(row) != list(rows[0]):
            raise ValueError(
                f"{_name(function)} emitted rows with different keys: "
                f"{list(rows[0])} and {list(row)}"
            )
        for column, value in row.items():
            _check_fits(value, f"{_name(function)}'s output column {column!r}")
    return [dict(row) for row in rows]


def _check_fits(value: Any, where: str) -> None:
    """An emitted int must fit a BIGINT, as the server's column does, else the call fails."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not -(1 << 63) <= value < (1 << 63):
            raise OverflowError(f"{where}: {value} does not fit bigint")
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_fits(item, where)
    elif isinstance(value, dict):
        for item in value.values():
            _check_fits(item, where)


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", repr(function))
