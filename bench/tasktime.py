"""Task wall time ÷ task CPU time of ours' stateful stage, from Spark's event log (issue 12): a
ratio well above 1 means the tasks wait (I/O, forks, locks) rather than compute, which the
batch latencies alone do not show.

The Connect server writes an uncompressed event log (``spark.eventLog.*`` in every system's
conf, so all pay the same); for a scenario, the stages whose RDDs carry the operator's scope
(``MapWithStateStream``) and whose job carries a measured ``streaming.sql.batchId`` are summed:
``Executor Run Time`` (ms) over ``Executor CPU Time`` (ns)."""
import glob
import json
import os
from typing import Dict, Iterable, Optional

OPERATOR_SCOPE = "MapWithStateStream"


def event_log_conf(directory: str) -> Dict[str, str]:
    os.makedirs(directory, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": directory,
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


class EventLog:
    """The one application's event log in ``directory``; :meth:`mark` starts a scenario."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.offset = 0

    def _file(self) -> Optional[str]:
        files = sorted(glob.glob(os.path.join(self.directory, "*")), key=os.path.getmtime)
        return files[-1] if files else None

    def mark(self) -> None:
        path = self._file()
        self.offset = os.path.getsize(path) if path else 0

    def wall_over_cpu(self, batch_ids: Iterable[int]) -> Optional[float]:
        """Over the stateful stages of the given batches since :meth:`mark`; None if none."""
        path, wanted = self._file(), set(batch_ids)
        if path is None:
            return None
        stages: set = set()
        run_ms = cpu_ns = 0
        with open(path, "rb") as f:
            f.seek(self.offset)
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                kind = event.get("Event")
                if kind == "SparkListenerStageSubmitted":
                    info, props = event["Stage Info"], event.get("Properties") or {}
                    batch = props.get("streaming.sql.batchId")
                    ours = any(OPERATOR_SCOPE in (rdd.get("Scope") or "")
                               for rdd in info.get("RDD Info", []))
                    if ours and batch is not None and int(batch) in wanted:
                        stages.add(info["Stage ID"])
                elif kind == "SparkListenerTaskEnd" and event.get("Stage ID") in stages:
                    metrics = event.get("Task Metrics") or {}
                    run_ms += metrics.get("Executor Run Time", 0)
                    cpu_ns += metrics.get("Executor CPU Time", 0)
        return run_ms / (cpu_ns / 1e6) if cpu_ns else None
