"""Peak resident memory of a process: the kernel's high-water mark (``VmHWM`` in
/proc/<pid>/status), sampled while the process runs, so a process that is gone by the time
anyone asks (spark-submit) still has its figure. The JVM's whole footprint — heap, and the
native memory RocksDB allocates outside it — is in it."""
import threading
from typing import Optional


def high_water_bytes(pid: int) -> Optional[int]:
    """The process's peak resident set so far, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class PeakRss:
    """Samples a process's ``VmHWM`` every ``interval`` seconds from ``start()`` to ``stop()``;
    ``peak`` is the largest seen (spark-submit execs the JVM, so the pid stays the same)."""

    def __init__(self, pid: int, interval: float = 0.5):
        self.pid, self.interval, self.peak = pid, interval, None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "PeakRss":
        self._thread.start()
        return self

    def stop(self) -> Optional[int]:
        self._sample()
        self._done.set()
        self._thread.join()
        return self.peak

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        now = high_water_bytes(self.pid)
        if now is not None and (self.peak is None or now > self.peak):
            self.peak = now
