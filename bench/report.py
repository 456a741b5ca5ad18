"""The markdown the suite prints and writes to bench/results/latest.md: one table per scenario,
every system's figures as ratios to ours and to the stateless floor, and the issue's targets
checked against this run's medians (never against absolute times from elsewhere)."""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Set

from bench.measure import Figures
from bench.systems import FLOOR, GROUP_BY, LABELS, OURS


@dataclass(frozen=True)
class Row:
    """One system in one measured phase; ``figures`` is None when it has no numbers (``note``
    says why). ``scaled`` is the input size relative to the others (1.0 = the same input)."""

    system: str
    phase: str
    figures: Optional[Figures]
    note: str = ""
    scaled: float = 1.0


def streaming_table(title: str, rows: Sequence[Row], reference: str = OURS.name,
                    expired_column: Optional[Set[str]] = None) -> str:
    """A scenario's table. Ratios compare median batch latency with ours and with the floor in
    the same phase; for a scaled-down row batch latencies are not comparable, so its ratios are
    of time per record instead (marked †). With ``expired_column`` (the systems whose output
    rows are expired keys: S4's) a last column gives their median output rows per batch."""
    extra = " keys expired per batch (median) |" if expired_column is not None else ""
    lines = [f"### {title}", "",
             "| system | phase | input | records/s | median batch | p90 batch | peak state memory "
             "| × ours | × floor |" + extra,
             "|---|---|---|--:|--:|--:|--:|--:|--:|" + ("--:|" if extra else "")]
    for row in rows:
        label = LABELS.get(row.system, row.system)
        size = "full" if row.scaled == 1.0 else f"{row.scaled:g}× (scaled down)"
        f = row.figures
        if f is None:
            lines.append(f"| {label} | {row.phase} | {size} | {row.note} | | | | | |"
                         + (" |" if extra else ""))
            continue
        ours = _find(rows, reference, row.phase)
        floor = _find(rows, FLOOR.name, row.phase)
        lines.append(
            f"| {label} | {row.phase} | {size} | {f.records_per_s:,.0f} | {f.median_s:.3f} s | "
            f"{f.p90_s:.3f} s | {bytes_text(f.peak_state_bytes)} | {_ratio(row, ours)} | "
            f"{_ratio(row, floor)} |" + (_expired(row, expired_column) if extra else ""))
    return "\n".join(lines)


def batch_table(title: str, ours: Sequence[float], group_by: Sequence[float], rows: int) -> str:
    lines = [f"### {title}", "", "| system | runs | records/s | median time | × ours | × groupBy |",
             "|---|--:|--:|--:|--:|--:|"]
    medians = {}
    for name, times in ((OURS.name, ours), (GROUP_BY.name, group_by)):
        medians[name] = median(times) if times else None
    for name, times in ((OURS.name, ours), (GROUP_BY.name, group_by)):
        m = medians[name]
        if m is None:
            lines.append(f"| {LABELS[name]} | 0 | failed | | | |")
            continue
        lines.append(f"| {LABELS[name]} | {len(times)} | {rows / m:,.0f} | {m:.3f} s | "
                     f"{_div(m, medians[OURS.name])} | {_div(m, medians[GROUP_BY.name])} |")
    return "\n".join(lines)


def targets(lines: List[str]) -> str:
    return "\n".join(["", "Targets (ours, this run):", *[f"- {line}" for line in lines]])


def check(what: str, value: Optional[float], limit: float, *, at_least: bool = False) -> str:
    """``what``: measured ``value`` against ``limit`` (at most, or at least)."""
    if value is None:
        return f"{what}: not measured"
    met = value >= limit if at_least else value <= limit
    sign = "≥" if at_least else "≤"
    return f"{what}: {value:.2f}× (target {sign} {limit:g}×) — {'met' if met else '**missed**'}"


def _find(rows: Sequence[Row], system: str, phase: str) -> Optional[Row]:
    for row in rows:
        if row.system == system and row.phase == phase and row.figures is not None:
            return row
    return None


def _ratio(row: Row, reference: Optional[Row]) -> str:
    if reference is None or reference.figures is None or row.figures is None:
        return "n/a"
    if row.scaled != reference.scaled:
        return f"{reference.figures.records_per_s / row.figures.records_per_s:.2f}†"
    return f"{row.figures.median_s / reference.figures.median_s:.2f}"


def _expired(row: Row, systems: Set[str]) -> str:
    rows = row.figures.median_output_rows if row.figures else None
    return f" {rows:,.0f} |" if row.system in systems and rows is not None else " – |"


def bytes_text(n: Optional[int]) -> str:
    if n is None:
        return "not reported"
    return f"{n / 2**20:,.1f} MB" if n < 10 * 2**20 else f"{n / 2**20:,.0f} MB"


def _div(a: Optional[float], b: Optional[float]) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}"


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
