"""From one system's per-batch numbers to the figures the tables quote. One place decides how
a run's raw batches map to the scenario's batches, so every system is measured alike."""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

#: (records, milliseconds, state bytes or -1): one micro-batch, as every system reports it.
Batch = Tuple[int, int, int]


def per_file(batches: Sequence[Batch], n_files: int) -> List[Batch]:
    """One entry per input file, in order. Should a system run batches without input (the suite
    turns them off, see SPARK_CONF in bench/__main__.py), their time is charged to the data
    batch before them: it is work that batch caused."""
    out: List[list] = []
    for records, millis, memory in batches:
        if records > 0 or not out:
            out.append([records, millis, memory])
        else:
            out[-1][1] += millis
            out[-1][2] = max(out[-1][2], memory)
    if len(out) != n_files:
        raise ValueError(f"expected {n_files} data batches, got {len(out)}")
    return [tuple(b) for b in out]  # type: ignore[misc]


@dataclass(frozen=True)
class Figures:
    """What a table row says about one system in one phase."""

    records_per_s: float
    median_s: float
    p90_s: float
    batches: int
    peak_state_bytes: Optional[int]


def figures(runs: Sequence[Sequence[Batch]], measured: Sequence[int]) -> Figures:
    """Pools the measured batches of every run (every round) of one system; the peak state
    memory is over every batch up to the phase's last, loading ones included (so an early
    phase of S3 does not show the state of a later one)."""
    chosen = [run[i] for run in runs for i in measured]
    seconds = np.array([b[1] for b in chosen], dtype=float) / 1000.0
    records = sum(b[0] for b in chosen)
    memory = [b[2] for run in runs for b in run[:max(measured) + 1] if b[2] >= 0]
    return Figures(records_per_s=records / seconds.sum() if seconds.sum() > 0 else float("inf"),
                   median_s=float(np.median(seconds)), p90_s=float(np.percentile(seconds, 90)),
                   batches=len(chosen), peak_state_bytes=max(memory) if memory else None)
