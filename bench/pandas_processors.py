"""transformWithStateInPandas's processors for S4 and S5, vectorized as a pandas user writes
them (S1 and S2 run it per record instead, through the Python state function:
bench/python_function.py). They do what bench/jvm's transformWithState systems do, over
pandas chunks, with the state in a ``ValueState`` on Spark's RocksDB store:

- :class:`CountSumProcessor` (S5): each batch's count and sum of a key's records added to its
  state, one row (key, count, sum) out; the idle timeout kept as bench/jvm's
  ``IdleTimeoutProcessor`` keeps it (one processing-time timer per key, registered again when
  it fires early);
- :class:`TimerCountProcessor` (S4): bench/jvm's ``TransformWithStateTimers``, the key's
  timer ``(key % 100 + 1) × step`` after the batch, re-armed a cycle later when it fires.

They live in their own module so that the Python workers import them by reference (``bench/``
is on their ``PYTHONPATH``, see bench/__main__.py).
"""
from typing import Any, Iterator

import pandas as pd
from pyspark.sql.streaming.stateful_processor import (ExpiredTimerInfo, StatefulProcessor,
                                                      StatefulProcessorHandle, TimerValues)
from pyspark.sql.types import LongType, StructField, StructType

__all__ = ["COUNT_SUM_OUTPUT", "TIMER_OUTPUT", "CountSumProcessor", "TimerCountProcessor"]

#: As bench/connect_systems.py's IDLE_TIMEOUT_MS: nothing expires while measuring.
IDLE_TIMEOUT_MS = 3_600_000
#: A day: the timer of keys from ``timed_keys`` on (bench/jvm's TimerCount.FarMs).
FAR_MS = 86_400_000


def _longs(*names: str) -> StructType:
    return StructType([StructField(name, LongType()) for name in names])


COUNT_SUM_OUTPUT = _longs("key", "count", "sum")
TIMER_OUTPUT = _longs("key", "count")


class CountSumProcessor(StatefulProcessor):
    """S5: per key and batch, the count and sum of its records added to the state (with when
    the key last had records, for the idle timeout) and (key, count, sum) returned."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._state = handle.getValueState("state", _longs("count", "sum", "last_seen_ms"))

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # type: ignore[override]
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        now = timerValues.getCurrentProcessingTimeInMs()
        stored = self._state.get()
        if stored is None:
            self._handle.registerTimer(now + IDLE_TIMEOUT_MS)
        n, total = (stored[0], stored[1]) if stored is not None else (0, 0)
        for pdf in rows:
            n += len(pdf)
            total += int(pdf["value"].sum())
        self._state.update((n, total, now))
        yield pd.DataFrame({"key": [key[0]], "count": [n], "sum": [total]})

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,  # type: ignore[override]
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        stored = self._state.get()
        if stored is not None:
            due = stored[2] + IDLE_TIMEOUT_MS
            if due <= timerValues.getCurrentProcessingTimeInMs():
                self._state.clear()
            else:
                self._handle.registerTimer(due)
        return iter([])

    def close(self) -> None:
        pass


class TimerCountProcessor(StatefulProcessor):
    """S4: records add to the key's count and set its timer ``(key % 100 + 1) × step_ms``
    after the batch (a day from ``timed_keys`` on), replacing the one before (its time is kept
    in the state); a fired timer returns (key, count) and registers the next 100 steps later."""

    def __init__(self, step_ms: int, timed_keys: int) -> None:
        self._step_ms = step_ms
        self._timed_keys = timed_keys

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._state = handle.getValueState("state", _longs("count", "timer_ms"))

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # type: ignore[override]
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        stored = self._state.get()
        if stored is not None:
            self._handle.deleteTimer(stored[1])
        k = key[0]
        after = (k % 100 + 1) * self._step_ms if k < self._timed_keys else FAR_MS
        timer_ms = timerValues.getCurrentProcessingTimeInMs() + after
        self._handle.registerTimer(timer_ms)
        n = (stored[0] if stored is not None else 0) + sum(len(pdf) for pdf in rows)
        self._state.update((n, timer_ms))
        return iter([])

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,  # type: ignore[override]
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:
        stored = self._state.get()
        count = stored[0] if stored is not None else 0
        timer_ms = timerValues.getCurrentProcessingTimeInMs() + 100 * self._step_ms
        self._handle.registerTimer(timer_ms)
        self._state.update((count, timer_ms))
        yield pd.DataFrame({"key": [key[0]], "count": [count]})

    def close(self) -> None:
        pass
