"""The running count written once as a Python state function, and the adapters that run that
same source through PySpark's own Python stateful operators.

``running_count`` is what a Python user writes with ``@mws.state_function``: ours compiles it
to Columns (no Python on the executors). The peers run the undecorated function
(``running_count.python``) in the server's Python workers, one call per record with a
:class:`mapwithstate.testing.State` per key, as a user porting the function would:

- :func:`apply_in_pandas` for ``applyInPandasWithState`` (``ProcessingTimeTimeout``, the
  idle timeout re-armed per batch, as ours' ``.timeout``);
- :class:`RowProcessor` for ``transformWithState`` (the row-based ``StatefulProcessor``) and
  :class:`PandasProcessor` for ``transformWithStateInPandas``, the state in a ``ValueState``.

The adapters carry the state and the emitted rows, not timers: the running count sets none.
They live in their own module so that the workers import them by reference (``bench/`` is on
their ``PYTHONPATH``, see bench/__main__.py).
"""
import inspect
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import pandas as pd
from pyspark.sql import Row
from pyspark.sql.streaming.state import GroupState
from pyspark.sql.streaming.stateful_processor import (StatefulProcessor, StatefulProcessorHandle,
                                                      TimerValues)
from pyspark.sql.types import LongType, StructField, StructType

import mapwithstate as mws
from mapwithstate.testing import State

#: As StructTypes: the Python workers have no session to parse DDL with.
STATE_SCHEMA = StructType([StructField("n", LongType())])
OUTPUT_SCHEMA = StructType([StructField("key", LongType()), StructField("count", LongType())])
#: As bench/connect_systems.py's IDLE_TIMEOUT_MS: nothing expires while measuring.
IDLE_TIMEOUT_MS = 3_600_000


@mws.state_function(STATE_SCHEMA)
def running_count(key, state):
    """Each record adds one to its key's count and emits (key, count)."""
    n = (state.n or 0) + 1
    state.update(n=n)
    return {"key": key, "count": n}


class KeyCalls:
    """The calls of one Python state function for one key in one batch: ``state`` is the
    key's state, carried from call to call; :meth:`record` calls the function for a record
    and returns the rows it emitted. The parameters are bound by name once, not per call."""

    def __init__(self, function: Callable[..., Any], schema: StructType,
                 stored: Optional[Tuple[Any, ...]]) -> None:
        self._function = function
        self._parameters = [p for p in inspect.signature(function).parameters if p != "state"]
        self._fields = schema.fieldNames()
        self.state = State(schema, None if stored is None
                           else dict(zip(self._fields, stored, strict=True)))

    def record(self, record: Dict[str, Any]) -> List[Dict[str, Any]]:
        result = self._function(state=self.state, **{p: record[p] for p in self._parameters})
        if result is None:
            return []
        return [result] if isinstance(result, dict) else list(result)

    def stored(self) -> Optional[Tuple[Any, ...]]:
        """The key's state after the calls, as a tuple of the state's fields (None: removed)."""
        return (tuple(getattr(self.state, f) for f in self._fields) if self.state.exists
                else None)


def apply_in_pandas(key: Tuple[Any, ...], pdfs: Iterator[pd.DataFrame],
                    group_state: GroupState) -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState``'s function: ``running_count.python`` once per record."""
    if group_state.hasTimedOut:
        group_state.remove()
        return
    calls = KeyCalls(running_count.python, STATE_SCHEMA,
                     group_state.get if group_state.exists else None)
    for pdf in pdfs:
        rows = [out for record in pdf.to_dict("records") for out in calls.record(record)]
        yield pd.DataFrame(rows, columns=["key", "count"])
    stored = calls.stored()
    if stored is None:
        group_state.remove()
    else:
        group_state.update(stored)
        group_state.setTimeoutDuration(IDLE_TIMEOUT_MS)


class RowProcessor(StatefulProcessor):
    """``transformWithState``'s processor: ``running_count.python`` once per input Row, the
    key's state in a ``ValueState``."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._value = handle.getValueState("state", STATE_SCHEMA)

    def _calls(self) -> KeyCalls:
        stored = self._value.get() if self._value.exists() else None
        return KeyCalls(running_count.python, STATE_SCHEMA,
                        None if stored is None else tuple(stored))

    def _store(self, calls: KeyCalls) -> None:
        stored = calls.stored()
        if stored is None:
            self._value.clear()
        else:
            self._value.update(stored)

    def handleInputRows(self, key: Any, rows: Iterable[Row],  # type: ignore[override]
                        timerValues: TimerValues) -> Iterator[Row]:
        calls = self._calls()
        for row in rows:
            for out in calls.record(row.asDict()):
                yield Row(**out)
        self._store(calls)

    def close(self) -> None:
        pass


class PandasProcessor(RowProcessor):
    """``transformWithStateInPandas``'s processor: the same calls over pandas chunks."""

    def handleInputRows(self, key: Any, rows: Iterable[pd.DataFrame],  # type: ignore[override]
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        calls = self._calls()
        for pdf in rows:
            out = [o for record in pdf.to_dict("records") for o in calls.record(record)]
            yield pd.DataFrame(out, columns=["key", "count"])
        self._store(calls)
