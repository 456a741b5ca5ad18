"""From one system's per-batch numbers to the figures the tables quote. One place decides how
a run's raw batches map to the scenario's batches, so every system is measured alike."""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

#: (records, milliseconds, state bytes or -1, output rows or -1): one micro-batch, as every
#: system reports it (older raw results have no output rows).
Batch = Tuple[int, ...]


def per_file(batches: Sequence[Batch], n_files: int) -> List[Batch]:
    """One entry per input file, in order. Should a system run batches without input (the suite
    turns them off, see SPARK_CONF in bench/__main__.py), their time (and output) is charged to
    the data batch before them: it is work that batch caused."""
    out: List[list] = []
    for batch in batches:
        records, millis, memory = batch[:3]
        rows = batch[3] if len(batch) > 3 else -1
        if records > 0 or not out:
            out.append([records, millis, memory, rows])
        else:
            out[-1][1] += millis
            out[-1][2] = max(out[-1][2], memory)
            if rows >= 0:
                out[-1][3] = max(out[-1][3], 0) + rows
    if len(out) != n_files:
        raise ValueError(f"expected {n_files} data batches, got {len(out)}")
    width = max((len(b) for b in batches), default=3)  # as wide as what the system reported
    return [tuple(b[:width]) for b in out]


@dataclass(frozen=True)
class Figures:
    """What a table row says about one system in one phase."""

    records_per_s: float
    median_s: float
    p90_s: float
    batches: int
    peak_state_bytes: Optional[int]
    #: Median output rows of the measured batches, where the system reports them.
    median_output_rows: Optional[float] = None


def figures(runs: Sequence[Sequence[Batch]], measured: Sequence[int]) -> Figures:
    """Pools the measured batches of every run (every round) of one system; the peak state
    memory is over every batch up to the phase's last, loading ones included (so an early
    phase of S3 does not show the state of a later one)."""
    chosen = [run[i] for run in runs for i in measured]
    seconds = np.array([b[1] for b in chosen], dtype=float) / 1000.0
    records = sum(b[0] for b in chosen)
    memory = [b[2] for run in runs for b in run[:max(measured) + 1] if b[2] >= 0]
    rows = [b[3] for b in chosen if len(b) > 3 and b[3] >= 0]
    return Figures(records_per_s=records / seconds.sum() if seconds.sum() > 0 else float("inf"),
                   median_s=float(np.median(seconds)), p90_s=float(np.percentile(seconds, 90)),
                   batches=len(chosen), peak_state_bytes=max(memory) if memory else None,
                   median_output_rows=float(np.median(rows)) if len(rows) == len(chosen) else None)
