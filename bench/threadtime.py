"""Where ours' Connect server spent its CPU while ours ran (and while the Connect floor ran on
it), by kind of thread, and how long its task threads waited for a CPU (issue 12).

The stateful stage's task wall time ÷ CPU time (bench/tasktime.py) says that tasks wait, not
for what. On a 2-core machine a task thread also waits, runnable, while another thread holds
the cores: the JIT compilers (a young server still compiles Spark's planning and scheduling
code), the garbage collector, the state stores' background thread. Linux counts, per thread,
the CPU time used (``/proc/<pid>/task/<tid>/stat``) and the time spent runnable in a run queue
(``schedstat``); the difference between the two phases of a run, summed by thread kind, is
printed under each scenario's targets. Linux only; elsewhere (or without access) the line
says so.
"""
import os
import time
from collections import Counter
from contextlib import contextmanager
from typing import Dict, Iterator, Optional, Tuple

#: Thread kinds, by the start of the kernel's (15-character) thread name; the rest is "other".
KINDS = (("task threads", ("Executor task",)),
         # a streaming query's thread (planning, logs, progress) and the DAG scheduler's loop
         ("query driver", ("stream executio", "dag-scheduler-e")),
         ("JIT compilers", ("C1 CompilerThre", "C2 CompilerThre")),
         ("GC", ("GC Thread", "G1 ")),
         ("state background", ("mapwithstate-st",)))
OTHER = "other"

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def kind_of(thread_name: str) -> str:
    for kind, prefixes in KINDS:
        if thread_name.startswith(prefixes):
            return kind
    return OTHER


def _threads(pid: int) -> Dict[int, Tuple[str, float, float]]:
    """Each thread of ``pid``: (name, CPU seconds, seconds runnable but waiting for a CPU)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                waited_ns = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime + stime
        out[int(tid)] = (name, cpu, waited_ns / 1e9)
    return out


class ThreadTimes:
    """Sums, over the spans :meth:`measuring` wraps, the CPU time of ``pid``'s threads by kind
    and the run-queue wait of its task threads."""

    def __init__(self, pid: Optional[int], cores: int) -> None:
        self.pid, self.cores = pid, cores
        self.cpu: Counter = Counter()
        self.task_wait = 0.0
        self.elapsed = 0.0

    def available(self) -> bool:
        return self.pid is not None and os.path.isdir(f"/proc/{self.pid}/task")

    @contextmanager
    def measuring(self) -> Iterator[None]:
        if not self.available():
            yield
            return
        started, before = time.monotonic(), _threads(self.pid)
        yield
        if not self.available():
            return
        self.elapsed += time.monotonic() - started
        for tid, (name, cpu, waited) in _threads(self.pid).items():
            _, cpu0, waited0 = before.get(tid, (name, 0.0, 0.0))
            # Spark renames a task thread while it runs one; either name tells its kind.
            kind = kind_of(name)
            if kind == OTHER and tid in before:
                kind = kind_of(before[tid][0])
            self.cpu[kind] += cpu - cpu0
            if kind == "task threads":
                self.task_wait += waited - waited0

    def summary(self, what: str) -> str:
        total = sum(self.cpu.values())
        if not self.available():
            return f"{what}: not measured (needs Linux's /proc)"
        if not self.elapsed or not total:
            return f"{what}: not measured (no run on this server)"
        order = [kind for kind, _ in KINDS] + [OTHER]
        shares = ", ".join(f"{kind} {100 * self.cpu[kind] / total:.0f}%" for kind in order)
        return (f"{what}: {total:.1f} s of CPU in {self.elapsed:.1f} s "
                f"({100 * total / self.elapsed / self.cores:.0f}% of {self.cores} cores): {shares}; "
                f"task threads waited {self.task_wait:.1f} s for a CPU (run queue) against "
                f"{self.cpu['task threads']:.1f} s on one")
