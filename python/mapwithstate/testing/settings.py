"""What a runner needs from a spec: its Python function and the settings the operator obeys.

:func:`spec_settings` is the one place that reads a ``StateSpec``'s fields, so a change to
how specs keep their settings touches only it.
"""

import datetime
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Optional, Union

from pyspark.sql.types import StructType

from mapwithstate.testing.schema import state_schema

__all__ = ["SpecSettings", "spec_settings", "duration"]

DOMAINS = ("processing_time", "event_time")
# Units of Spark's interval strings with a fixed length, in microseconds.
_UNITS = {
    "week": 7 * 86_400_000_000,
    "day": 86_400_000_000,
    "hour": 3_600_000_000,
    "minute": 60_000_000,
    "second": 1_000_000,
    "millisecond": 1_000,
    "ms": 1_000,
    "microsecond": 1,
    "us": 1,
}
_PART = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([a-z]+?)s?\b", re.IGNORECASE)


@dataclass(frozen=True)
class SpecSettings:
    """A spec's Python function, state type and the operator settings it chose.

    ``timeout``: the idle timeout (``.timeout(...)``), ``None`` without one;
    ``checkpoint_interval``: every how many batches idle keys are looked for (default 10);
    ``timeout_domain``: ``.timeout_domain(...)`` if named (timers then count from the start);
    ``initial_state``: the spec's initial-state DataFrame, with the columns of its timers and,
    when it resumes state read back, of its keys' last update times, of whether each key has a
    state (``has_state``), and the event-time watermark it resumes from."""

    function: Callable[..., Any]
    state_schema: StructType
    timeout: Optional[datetime.timedelta] = None
    checkpoint_interval: int = 10
    timeout_domain: Optional[str] = None
    initial_state: Any = None
    initial_state_timeout_at: Optional[str] = None
    initial_state_last_updated: Optional[str] = None
    initial_state_has_state: Optional[str] = None
    initial_state_watermark: Optional[datetime.datetime] = None


def spec_settings(spec: Any) -> SpecSettings:
    """The settings of ``spec``: a spec made by ``mws.state_function`` (its function is
    ``spec.python``)."""
    function = getattr(spec, "python", None)
    if not callable(function):
        raise TypeError(
            f"a runner needs a spec made by mws.state_function (with spec.python, "
            f"its Python function), got {type(spec).__name__}"
        )
    settings = spec.settings
    timeout = settings.get("timeout")
    domain = settings.get("timeout_domain")
    initial = spec.initial
    return SpecSettings(
        function=function,
        state_schema=state_schema(spec.state_schema),
        timeout=duration(timeout, "timeout") if timeout is not None else None,
        checkpoint_interval=settings.get("checkpoint_interval") or 10,
        timeout_domain=checked_domain(domain) if domain is not None else None,
        initial_state=initial.df if initial is not None else None,
        initial_state_timeout_at=initial.timeout_at if initial is not None else None,
        initial_state_last_updated=initial.last_updated if initial is not None else None,
        initial_state_has_state=initial.has_state if initial is not None else None,
        initial_state_watermark=(
            _timestamp(initial.watermark, "initial_state's watermark")
            if initial is not None and initial.watermark is not None
            else None
        ),
    )


def _timestamp(value: Any, what: str) -> datetime.datetime:
    """A timestamp argument: a datetime, or a string as Spark casts it ('2026-01-01 10:00:00')."""
    if isinstance(value, datetime.datetime):
        return value
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError as e:
        raise ValueError(f"{what}: {value!r} is not a timestamp") from e


def checked_domain(domain: str) -> str:
    if domain not in DOMAINS:
        raise ValueError(
            f"timeout_domain: {domain!r} is not a timeout domain; expected "
            f"'processing_time' or 'event_time'"
        )
    return domain


def duration(value: Union[str, datetime.timedelta], what: str) -> datetime.timedelta:
    """A duration as the server reads it: a ``timedelta``, or a string of Spark's interval
    syntax with fixed-length units (``"30 seconds"``, ``"1 minute 30 seconds"``, ``"250 ms"``),
    cut to whole milliseconds.

    >>> duration("1 minute 30 seconds", "timeout")
    datetime.timedelta(seconds=90)
    """
    if isinstance(value, datetime.timedelta):
        micros = value // datetime.timedelta(microseconds=1)
    elif isinstance(value, str):
        text = value.strip()
        if text.lower().startswith("interval"):
            text = text[len("interval") :]
        micros, position = 0, 0
        for part in _PART.finditer(text):
            unit = part.group(2).lower()
            if part.start() != position or unit not in _UNITS:
                break
            micros += int(Decimal(part.group(1)) * _UNITS[unit])
            position = part.end()
        if position == 0 or text[position:].strip():
            raise ValueError(
                f"{what}: {value!r} is not a duration; expected e.g. '30 seconds', "
                f"'1 minute' or '500 milliseconds'"
            )
    else:
        raise TypeError(
            f"{what} must be a string such as '30 seconds' or a timedelta, got "
            f"{type(value).__name__}"
        )
    return datetime.timedelta(milliseconds=micros // 1000)
