"""The operators' semantics in plain Python: a Python state function run over batches of
records as ``map_with_state`` (per record) and ``map_groups_with_state`` (per key and batch)
run it on the server, so a state function's logic is unit-tested in milliseconds, without
Spark — the role Spark's ``TwsTester`` plays for ``transformWithState``.

:class:`Tester` holds the keys' states and timers and runs one batch at a time;
:func:`replay` cuts recorded data into batches by a batch-time column, as a batch replay does.
"""

import datetime
import inspect
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

from pyspark.sql import Row

from mapwithstate.testing.schema import emitted_as, to_stored
from mapwithstate.testing.schema import state_schema as state_schema_of
from mapwithstate.testing.settings import (
    SpecSettings,
    checked_domain,
    duration,
    spec_settings,
)
from mapwithstate.testing.state import State, call

__all__ = ["Tester", "BatchResult", "replay"]

EPOCH = datetime.datetime(1970, 1, 1)
_MICRO = datetime.timedelta(microseconds=1)
Record = Mapping[str, Any]
Key = Any


@dataclass(frozen=True)
class BatchResult:
    """What one batch did.

    ``emitted``: the rows the batch's calls emitted (``output="emitted"``), each a dict: the
    data calls' rows in record order (a group function's in the order its keys first
    appear), then those of the timing-out calls. ``snapshots``: the rows of
    ``output="snapshots"`` (``batch_time``, the key columns, the state's fields) for every key
    with a state after the batch. ``state`` and ``timers``: each key's state (a dict) and
    timer after the batch, keyed by the key's value (a tuple for several key columns).
    ``watermark``: the batch's watermark (``None`` without one); ``late_rows``: how many
    records were dropped as late."""

    batch_time: datetime.datetime
    watermark: Optional[datetime.datetime]
    emitted: List[Dict[str, Any]]
    snapshots: List[Dict[str, Any]]
    state: Dict[Key, Dict[str, Any]]
    timers: Dict[Key, datetime.datetime]
    late_rows: int


class Tester:
    """Runs a Python state function over batches with the operator's semantics.

    ``spec`` is a spec made by ``mws.state_function`` (its ``.timeout``,
    ``.checkpoint_interval``, ``.timeout_domain`` and initial state are obeyed), or a plain
    function with ``state_schema=``; the keyword settings override the spec's. A function
    with a parameter ``rows`` runs as ``map_groups_with_state`` runs it (once per key and
    batch, ``rows`` the key's records of the batch in order), any other one as
    ``map_with_state`` does (once per record).

    The semantics are the server's:

    - a key's records are called in order; each call sees the state the previous one left;
    - ``.timeout(d)``: a key idle for longer than ``d`` (no record since) gets one call with
      ``state.timing_out`` true, on every ``checkpoint_interval``-th batch (counted from 1),
      after the batch's data calls; its state is then removed whatever the call does;
    - timers (``state.set_timer``): compared with the batch time (``"processing_time"``, the
      default) or the watermark (``"event_time"``); a key times out in the first batch whose
      time (watermark) is strictly after its timer, unless it has data in that batch; the
      timing-out call keeps the state unless it removes it; a timer the call leaves must be
      after the batch time (processing time), or after the epoch and not before the
      watermark (event time), else the call fails as on the server; a key may hold a timer
      without a state;
    - ``event_time`` (the input's ``withWatermark`` column) with ``watermark_delay``: each
      batch's watermark is the largest event time of the batches before it (whole
      milliseconds) minus the delay, never moving back; a replay has none before its first
      batch with event times completes, a stream starts at the epoch (``stream=True``); with
      event-time timers, records at or before the watermark are dropped as late (a group
      whose records were all late is not called);
    - ``initial_state`` (rows of key columns and state fields, or a DataFrame, collected):
      loaded before the first batch; a group function also calls each of its keys in the
      first batch, with no rows when it has none there. With ``initial_state_last_updated``
      (a column name) it is resumed state read back, as ``spec.initial_state(df,
      last_updated=...)``: a key's idle clock runs from that time (null: the first batch's),
      and no key is called for it.

    Datetimes are naive, as PySpark returns them, and taken as UTC. An int the function
    emits or stores must fit its column (64 bits for an emitted int), else the call fails as
    on the server; with ``output_schema`` (the compiled function's output columns, DDL or a
    ``StructType``) an int emitted in a DOUBLE column becomes a float, and must be exactly
    one (else ``OverflowError``), as the server's column holds it. An intermediate int beyond
    64 bits, which fails the compiled function, is fine in Python and goes unnoticed here.

    >>> from datetime import datetime, timedelta
    >>> def count(word, state):
    ...     if state.timing_out:
    ...         return {"word": word, "n": -1}
    ...     state.update(n=(state.n or 0) + 1)
    ...     return {"word": word, "n": state.n}
    >>> tester = Tester(count, key="word", state_schema="n BIGINT",
    ...                 timeout="10 seconds", checkpoint_interval=1)
    >>> t0 = datetime(2024, 1, 1)
    >>> tester.batch([{"word": "a"}, {"word": "b"}, {"word": "a"}], t0).emitted
    [{'word': 'a', 'n': 1}, {'word': 'b', 'n': 1}, {'word': 'a', 'n': 2}]
    >>> tester.batch([{"word": "b"}], t0 + timedelta(seconds=11)).emitted
    [{'word': 'b', 'n': 2}, {'word': 'a', 'n': -1}]
    >>> tester.state
    {'b': {'n': 2}}
    """

    __test__ = False  # not a test class for pytest, whatever its name says

    def __init__(
        self,
        spec: Any,
        *,
        key: Union[str, Sequence[str]],
        state_schema: Optional[str] = None,
        timeout: Optional[Union[str, datetime.timedelta]] = None,
        checkpoint_interval: Optional[int] = None,
        timeout_domain: Optional[str] = None,
        initial_state: Optional[Union[Iterable[Record], Any]] = None,
        initial_state_timeout_at: Optional[str] = None,
        initial_state_last_updated: Optional[str] = None,
        event_time: Optional[str] = None,
        watermark_delay: Optional[Union[str, datetime.timedelta]] = None,
        stream: bool = False,
        output_schema: Optional[Any] = None,
    ) -> None:
        settings = _settings(spec, state_schema)
        self._output = None if output_schema is None else state_schema_of(output_schema)
        self._function = settings.function
        self._schema = settings.state_schema
        self._keys = [key] if isinstance(key, str) else list(key)
        if not self._keys:
            raise ValueError("key: at least one key column is needed")
        timeout = timeout if timeout is not None else settings.timeout
        self._timeout = duration(timeout, "timeout") if timeout is not None else None
        if self._timeout is not None and self._timeout <= datetime.timedelta(0):
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self._interval = checkpoint_interval or settings.checkpoint_interval
        domain = timeout_domain or settings.timeout_domain
        self._domain = checked_domain(domain) if domain is not None else None
        if self._timeout is not None and self._domain is not None:
            raise ValueError(
                "timeout and timers cannot be used together: timeout removes keys "
                "idle for a fixed duration, timers fire at each key's time"
            )
        self._timers = self._domain is not None
        self._groups = "rows" in inspect.signature(self._function).parameters
        if (event_time is None) != (watermark_delay is None):
            raise ValueError(
                "event_time and watermark_delay go together (withWatermark's column and delay)"
            )
        self._event_time = event_time
        self._delay_ms = (
            duration(watermark_delay, "watermark_delay") // datetime.timedelta(milliseconds=1)
            if watermark_delay is not None
            else 0
        )
        # Spark's tracker: a stream's watermark starts at the epoch; a replay has none until
        # its first batch with event times is done.
        self._watermark_ms: Optional[int] = 0 if stream and event_time is not None else None
        self._states: Dict[Key, Dict[str, Any]] = {}
        # A key's time: its last update (idle timeout) or its timer (timers).
        self._times: Dict[Key, datetime.datetime] = {}
        self._batches = 0
        #: The input's columns seen so far: a timing-out call passes None for each parameter
        #: naming one (a parameter naming none keeps its default, as compiled).
        self._columns: Set[str] = set()
        self._last_batch_time: Optional[datetime.datetime] = None
        self._initial = _initial_rows(
            initial_state if initial_state is not None else settings.initial_state
        )
        self._initial_timer = initial_state_timeout_at or settings.initial_state_timeout_at
        self._initial_updated = initial_state_last_updated or settings.initial_state_last_updated
        self._initial_has_state = settings.initial_state_has_state
        # A resumed run's starting watermark, below which no batch's goes.
        resumed = settings.initial_state_watermark
        self._resumed_ms: Optional[int] = (
            (resumed - EPOCH) // datetime.timedelta(milliseconds=1)
            if resumed is not None and event_time is not None
            else None
        )
        self._initial_keys: List[Key] = []

    @property
    def state(self) -> Dict[Key, Dict[str, Any]]:
        """Every key's state now (a copy), keyed by the key's value."""
        return {k: dict(v) for k, v in self._states.items()}

    @property
    def timers(self) -> Dict[Key, datetime.datetime]:
        """Every key's timer now."""
        return dict(self._times) if self._timers else {}

    @property
    def watermark(self) -> Optional[datetime.datetime]:
        """The watermark the next batch will have (``None`` without one): never before a
        resumed run's starting watermark."""
        known = [ms for ms in (self._watermark_ms, self._resumed_ms) if ms is not None]
        return EPOCH + datetime.timedelta(milliseconds=max(known)) if known else None

    def batch(
        self, records: Iterable[Union[Record, Row]], batch_time: datetime.datetime
    ) -> BatchResult:
        """Runs one batch of ``records`` (dicts or Rows: the key and value columns) at
        ``batch_time``: the data calls, then the timing-out calls."""
        if not isinstance(batch_time, datetime.datetime):
            raise TypeError(f"batch_time must be a datetime, got {type(batch_time).__name__}")
        if self._last_batch_time is not None and batch_time < self._last_batch_time:
            raise ValueError(
                f"batch_time {batch_time} is before the previous batch's "
                f"{self._last_batch_time}: batches run in time order"
            )
        rows = [r.asDict() if isinstance(r, Row) else dict(r) for r in records]
        for row in rows:
            self._columns.update(row)
        self._batches += 1
        watermark = self.watermark
        if self._batches == 1:
            self._load_initial_state(batch_time)
        late = 0
        kept = []
        for row in rows:
            if self._is_late(row, watermark):
                late += 1
            else:
                kept.append(row)
        emitted: List[Dict[str, Any]] = []
        called: Set[Key] = set()
        context = (batch_time, watermark)
        if self._groups:
            groups: "OrderedDict[Key, List[Dict[str, Any]]]" = OrderedDict()
            for row in kept:
                groups.setdefault(self._key_of(row), []).append(row)
            if self._batches == 1:
                for key in self._initial_keys:
                    groups.setdefault(key, [])
            for key, group in groups.items():
                emitted += self._call(key, self._key_columns(key), group, context, called)
        else:
            for row in kept:
                emitted += self._call(self._key_of(row), row, None, context, called)
        for key in self._timing_out(batch_time, watermark, called):
            emitted += self._time_out(key, context)
        self._advance_watermark(rows)
        self._last_batch_time = batch_time
        snapshots = [
            {"batch_time": batch_time, **self._key_columns(k), **v} for k, v in self._states.items()
        ]
        return BatchResult(batch_time, watermark, emitted, snapshots, self.state, self.timers, late)

    # --- calls -------------------------------------------------------------------------

    def _call(
        self,
        key: Key,
        record: Dict[str, Any],
        rows: Optional[List[Dict[str, Any]]],
        context: Tuple[datetime.datetime, Optional[datetime.datetime]],
        called: Set[Key],
    ) -> List[Dict[str, Any]]:
        batch_time, watermark = context
        before = self._states.get(key)
        state = State(
            self._schema,
            before,
            batch_time=batch_time,
            watermark=watermark,
            timer=self._times.get(key) if self._timers else None,
        )
        result = call(self._function, state, record, rows)
        if result.timer_set:
            self._use_timers()
        if self._timers:
            called.add(key)
            timer = result.timer
            if not result.timer_set and timer is not None and self._is_due(timer, context):
                # The key has data, so it does not time out in this batch: a timer it kept
                # that is already due is spent (Spark resets a timer a call does not set).
                timer = None
            self._keep(key, result.state, timer, context, timing_out=False)
        elif result.state is None:
            self._states.pop(key, None)
            self._times.pop(key, None)
        else:
            self._states[key] = result.state
            if self._timeout is not None:
                # A record refreshes its key's idle time, whether it updates the state or not.
                self._times[key] = batch_time
        return self._as_output(result.emitted)

    def _as_output(self, rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Emitted rows as the server's output columns hold them, given ``output_schema``."""
        if self._output is None:
            return rows
        name = getattr(self._function, "__qualname__", repr(self._function))
        return [
            {
                column: emitted_as(value, self._output[column].dataType, name, column)
                if column in self._output.fieldNames()
                else value
                for column, value in row.items()
            }
            for row in rows
        ]

    def _time_out(
        self, key: Key, context: Tuple[datetime.datetime, Optional[datetime.datetime]]
    ) -> List[Dict[str, Any]]:
        batch_time, watermark = context
        state = State(
            self._schema,
            self._states.get(key),
            timing_out=True,
            batch_time=batch_time,
            watermark=watermark,
            timer=self._times.get(key) if self._timers else None,
        )
        record = self._key_columns(key)
        parameters = inspect.signature(self._function).parameters
        # A timing-out call has no record: its value columns are null, its rows empty.
        record.update(
            {
                p: None
                for p, parameter in parameters.items()
                if p not in record
                and p not in ("state", "rows")
                and (p in self._columns or parameter.default is parameter.empty)
            }
        )
        result = call(self._function, state, record, [] if self._groups else None)
        if self._timers:
            self._keep(key, result.state, result.timer, context, timing_out=True)
        else:
            self._states.pop(key, None)  # an idle key's state ends with its timeout
            self._times.pop(key, None)
        return self._as_output(result.emitted)

    def _keep(
        self,
        key: Key,
        value: Optional[Dict[str, Any]],
        timer: Optional[datetime.datetime],
        context: Tuple[datetime.datetime, Optional[datetime.datetime]],
        timing_out: bool,
    ) -> None:
        """Stores the outcome of a call with timers: the state and the timer, either of which
        the key may hold without the other."""
        if timer is not None:
            self._check_timer(key, timer, context, timing_out)
            self._times[key] = timer
        else:
            self._times.pop(key, None)
        if value is None:
            self._states.pop(key, None)
        else:
            self._states[key] = value

    def _check_timer(
        self,
        key: Key,
        timer: datetime.datetime,
        context: Tuple[datetime.datetime, Optional[datetime.datetime]],
        timing_out: bool,
    ) -> None:
        """A timer a call leaves must not be due already, as the server (and Spark's
        GroupState) require."""
        batch_time, watermark = context
        where = (
            f"the timer of the key {key!r} is {timer} (left by its "
            f"{'timing-out ' if timing_out else ''}call in the batch at {batch_time})"
        )
        if self._domain == "event_time":
            if timer <= EPOCH:
                raise ValueError(
                    f"{where}, not after 1970-01-01 00:00:00: an event-time timer "
                    f"must be after the epoch (Timeout timestamp must be positive)"
                )
            if watermark is not None and timer < watermark:
                raise ValueError(
                    f"{where}, earlier than the batch's watermark {watermark}: it "
                    f"would already be due (Timeout timestamp cannot be earlier "
                    f"than the current watermark)"
                )
        elif timer <= batch_time:
            raise ValueError(
                f"{where}, not after that batch time: a processing-time timer must "
                f"be later than the batch time (Timeout duration must be "
                f"positive)"
            )

    def _is_due(
        self,
        timer: datetime.datetime,
        context: Tuple[datetime.datetime, Optional[datetime.datetime]],
    ) -> bool:
        """Whether a timer kept through a call is already due: as a timer set would be
        refused (:meth:`_check_timer`)."""
        batch_time, watermark = context
        if self._domain == "event_time":
            return watermark is not None and timer < watermark
        return timer <= batch_time

    def _use_timers(self) -> None:
        if self._timeout is not None:
            raise ValueError(
                "the function sets a timer, but the spec has an idle timeout "
                "(.timeout): timers and timeout cannot be used together"
            )
        if not self._timers:
            self._timers, self._domain = True, "processing_time"

    # --- timeouts and watermarks -------------------------------------------------------

    def _timing_out(
        self,
        batch_time: datetime.datetime,
        watermark: Optional[datetime.datetime],
        called: Set[Key],
    ) -> List[Key]:
        if self._timers:
            threshold = watermark if self._domain == "event_time" else batch_time
            if threshold is None:
                return []
            due = [(t, k) for k, t in self._times.items() if t < threshold and k not in called]
        elif self._timeout is not None and self._batches % self._interval == 0:
            threshold = batch_time - self._timeout
            due = [(t, k) for k, t in self._times.items() if t < threshold and k in self._states]
        else:
            return []
        return [k for _, k in sorted(due, key=lambda item: item[0])]

    def _is_late(self, row: Dict[str, Any], watermark: Optional[datetime.datetime]) -> bool:
        if self._domain != "event_time" or not self._timers or watermark is None:
            return False
        event = row.get(self._event_time) if self._event_time else None
        return event is not None and event <= watermark

    def _reach_event_time(self, time: datetime.datetime) -> None:
        """Moves the watermark on to ``time`` minus the delay (a replay's ``until``), as if
        the input's event time had reached ``time``."""
        if self._event_time is None:
            return
        time_ms = (time - EPOCH) // datetime.timedelta(milliseconds=1)
        self._watermark_ms = max(self._watermark_ms or 0, max(time_ms - self._delay_ms, 0))

    def _advance_watermark(self, rows: List[Dict[str, Any]]) -> None:
        if self._event_time is None:
            return
        events = [r[self._event_time] for r in rows if r.get(self._event_time) is not None]
        if events:
            largest_ms = (max(events) - EPOCH) // datetime.timedelta(milliseconds=1)
            self._watermark_ms = max(self._watermark_ms or 0, largest_ms - self._delay_ms)

    # --- keys and initial state --------------------------------------------------------

    def _key_of(self, row: Mapping[str, Any]) -> Key:
        missing = [k for k in self._keys if k not in row]
        if missing:
            raise KeyError(f"a record has no key column {', '.join(missing)}: {dict(row)}")
        values = tuple(row[k] for k in self._keys)
        return values[0] if len(values) == 1 else values

    def _key_columns(self, key: Key) -> Dict[str, Any]:
        values = (key,) if len(self._keys) == 1 else key
        return dict(zip(self._keys, values, strict=False))

    def _stored(self, value: Mapping[str, Any]) -> Dict[str, Any]:
        names = self._schema.fieldNames()
        unknown = [n for n in value if n not in names]
        if unknown:
            raise ValueError(
                f"unknown state field(s) {', '.join(unknown)}; the state's fields "
                f"are {', '.join(names)}"
            )
        return {
            f.name: to_stored(value.get(f.name), f.dataType, f"state.{f.name}")
            for f in self._schema.fields
        }

    def _load_initial_state(self, batch_time: datetime.datetime) -> None:
        for row in self._initial:
            key = self._key_of(row)
            if key in self._states:
                raise ValueError(f"initial_state has more than one row for the key {key!r}")
            timer = row.get(self._initial_timer) if self._initial_timer else None
            if self._initial_has_state and row.get(self._initial_has_state) is False:
                # A key that held only its timer (none: nothing to resume).
                if self._initial_timer and timer is not None:
                    self._use_timers()
                    self._times[key] = timer
                continue
            fields = {n: row.get(n) for n in self._schema.fieldNames()}
            self._states[key] = self._stored(fields)
            if self._initial_timer and timer is not None:
                self._use_timers()
                self._times[key] = timer  # not checked: no call set it
            elif not self._timers:
                updated = row.get(self._initial_updated) if self._initial_updated else None
                self._times[key] = updated if updated is not None else batch_time
            if self._initial_updated is None:  # resumed keys were called by the earlier run
                self._initial_keys.append(key)


def replay(
    spec: Any,
    records: Iterable[Union[Record, Row]],
    *,
    key: Union[str, Sequence[str]],
    batch_time: str,
    batch_interval: Optional[Union[str, datetime.timedelta]] = None,
    order_by: Optional[Union[str, Sequence[str]]] = None,
    until: Optional[datetime.datetime] = None,
    **settings: Any,
) -> List[BatchResult]:
    """Runs ``records`` as ``map_with_state(df, key, spec, batch_time=...)`` replays them:
    one batch per distinct ``batch_time`` in time order, or with ``batch_interval`` one per
    step from the first batch time to the last (empty ones included, a record in the first
    batch not before its own time); within a batch records keep their order, or are sorted
    by ``order_by`` (ascending, ``None`` first). ``settings`` are :class:`Tester`'s.

    ``until`` (not before the last batch time) goes on after the last record as the server's
    ``until=`` does: an empty batch every ``batch_interval`` before it, then one at ``until``
    (without ``batch_interval``, that one alone), whose watermark, with ``event_time``, is
    ``until`` minus the delay when that is later.

    >>> from datetime import datetime
    >>> def total(k, v, state):
    ...     state.update(sum=(state.sum or 0) + v)
    ...     return {"k": k, "sum": state.sum}
    >>> rows = [{"k": "a", "v": 1, "t": datetime(2024, 1, 1, 0, 0, 2)},
    ...         {"k": "a", "v": 2, "t": datetime(2024, 1, 1, 0, 0, 1)}]
    >>> [b.emitted for b in replay(total, rows, key="k", batch_time="t",
    ...                            state_schema="sum BIGINT")]
    [[{'k': 'a', 'sum': 2}], [{'k': 'a', 'sum': 3}]]
    """
    tester = Tester(spec, key=key, **settings)
    rows = [r.asDict() if isinstance(r, Row) else dict(r) for r in records]
    for row in rows:
        if row.get(batch_time) is None:
            raise ValueError(f"a record has no batch time (column {batch_time!r}): {row}")
    times = sorted({r[batch_time] for r in rows})
    step = duration(batch_interval, "batch_interval") if batch_interval is not None else None
    if step is not None and step <= datetime.timedelta(0):
        raise ValueError(f"batch_interval must be positive, got {batch_interval!r}")
    if step is not None and times:
        count = -((times[0] - times[-1]) // step) + 1
        times = [times[0] + i * step for i in range(count)]
    batches: Dict[datetime.datetime, List[Dict[str, Any]]] = {t: [] for t in times}
    for row in rows:
        batches[next(t for t in times if t >= row[batch_time])].append(row)
    if order_by is not None:
        columns = [order_by] if isinstance(order_by, str) else list(order_by)
        for group in batches.values():
            group.sort(key=lambda r: [(r[c] is not None, r[c]) for c in columns])
    if until is not None and times and until < times[-1]:
        raise ValueError(
            f"until ({until}) is before the replay's last batch time ({times[-1]}): the "
            "timeline only goes on after its last record"
        )
    results = [tester.batch(batches[t], t) for t in times]
    if until is not None and (not times or until > times[-1]):
        for t in _times_until(times[-1] if times else None, until, step):
            if t == until:
                tester._reach_event_time(until)
            results.append(tester.batch([], t))
    return results


def _times_until(
    last: Optional[datetime.datetime],
    until: datetime.datetime,
    step: Optional[datetime.timedelta],
) -> List[datetime.datetime]:
    """The batch times after ``last`` up to ``until``: each step before it, then ``until``."""
    times = []
    if step is not None and last is not None:
        t = last + step
        while t < until:
            times.append(t)
            t += step
    return times + [until]


def _settings(spec: Any, schema: Optional[str]) -> SpecSettings:
    if schema is not None:
        if not callable(spec):
            raise TypeError(
                f"with state_schema, spec is a plain function, got {type(spec).__name__}"
            )
        return SpecSettings(
            function=getattr(spec, "python", spec), state_schema=state_schema_of(schema)
        )
    if inspect.isfunction(spec):
        raise TypeError(
            f"{spec.__qualname__} is a plain function: give its state_schema=, or "
            f"decorate it with mws.state_function"
        )
    return spec_settings(spec)


def _initial_rows(initial: Any) -> List[Dict[str, Any]]:
    if initial is None:
        return []
    if hasattr(initial, "collect") and hasattr(initial, "schema"):
        initial = initial.collect()  # a DataFrame: its rows, brought to the client
    return [r.asDict() if isinstance(r, Row) else dict(r) for r in initial]
