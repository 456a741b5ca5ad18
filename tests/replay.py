"""Builds batch replays of DStream-style test inputs: one list of records per batch."""
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Dict, List, Sequence, Tuple

START = datetime(2026, 1, 1, 0, 0, 0)
ONE_SECOND = timedelta(seconds=1)


def batch_time(i: int) -> datetime:
    """The time of batch ``i`` (counting from 0), one second apart."""
    return START + i * ONE_SECOND


def replay_input(spark, batches: Sequence[Sequence[str]]):
    """(word, value = 1, ts, seq) rows: batch i's words at batch_time(i), seq their order."""
    rows = [(w, 1, batch_time(i), n)
            for i, words in enumerate(batches) for n, w in enumerate(words)]
    return spark.createDataFrame(rows, "word STRING, value INT, ts TIMESTAMP, seq INT")


def by_batch(rows, time_column: str, value) -> Dict[datetime, List]:
    grouped = defaultdict(list)
    for r in rows:
        grouped[r[time_column]].append(value(r))
    return {t: sorted(v) for t, v in grouped.items()}


def expected_by_batch(expected: Sequence[Sequence], first: int = 0) -> Dict[datetime, List]:
    """Expected per-batch outputs as {batch time: sorted items}, leaving out empty batches."""
    return {batch_time(first + i): sorted(items) for i, items in enumerate(expected) if items}


def strip_empty_ends(batches: Sequence[Sequence], *expected: Sequence) -> Tuple:
    """A replay's batches run from the first to the last batch with records: leading and
    trailing empty input batches have no time to stand at, so they are left out (with the
    expectations for them)."""
    first = next(i for i, b in enumerate(batches) if b)
    last = max(i for i, b in enumerate(batches) if b)
    return (batches[first:last + 1],) + tuple(e[first:last + 1] for e in expected)
