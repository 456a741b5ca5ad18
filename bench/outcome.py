"""What one run of one system gives back: its batches, or why there are none. A failing
system becomes a note in its table row instead of ending the suite, so one broken baseline
does not hide the others."""
from dataclasses import dataclass
from typing import List, Optional

from bench.measure import Batch


@dataclass(frozen=True)
class Outcome:
    batches: Optional[List[Batch]] = None
    note: Optional[str] = None

    @staticmethod
    def failed(error: object) -> "Outcome":
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return Outcome(note=f"failed: {first_line[:160]}")
