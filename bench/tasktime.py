"""Task wall time ÷ task CPU time of ours' stateful stage, from Spark's event log (issue 12): a
ratio well above 1 means the tasks wait (I/O, forks, locks) rather than compute, which the
batch latencies alone do not show.

The Connect server writes an uncompressed event log (``spark.eventLog.*`` in every system's
conf, so all pay the same); for a scenario, the stages whose RDDs carry the operator's scope
(``MapWithStateStream``) and whose job carries a measured ``streaming.sql.batchId`` are summed:
``Executor Run Time`` (ms) over ``Executor CPU Time`` (ns).

For comparison, not as a target, the same ratio of the spark-submit systems' post-shuffle
stages (the floor's shuffle read and projection, flatMapGroupsWithState's stateful stage): their
event logs tell the systems apart by the local property :data:`SYSTEM_PROPERTY`, which
bench/jvm's BenchMain sets around each measured query; and of the floor run on the Connect
server itself, told apart by its query's name. A floor whose tasks wait as much as ours says the
waiting is the process's (JIT compilers, GC, two cores), not the state store's."""
import glob
import json
import os
from typing import Callable, Dict, Iterable, Optional, Tuple

OPERATOR_SCOPE = "MapWithStateStream"
#: The local property naming a spark-submit system's measured query (bench/jvm's BenchMain).
SYSTEM_PROPERTY = "mapwithstate.bench.system"
#: The local property holding a job's description; a streaming query's begins with its name.
JOB_DESCRIPTION = "spark.job.description"


def event_log_conf(directory: str) -> Dict[str, str]:
    os.makedirs(directory, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": directory,
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


class EventLog:
    """The one application's event log in ``directory``; :meth:`mark` starts a scenario."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.offset = 0

    def mark(self) -> None:
        path = _newest(self.directory)
        self.offset = os.path.getsize(path) if path else 0

    def wall_over_cpu(self, batch_ids: Iterable[int]) -> Optional[float]:
        """Over the stateful stages of the given batches since :meth:`mark`; None if none."""
        def ours(info: dict, props: dict) -> bool:
            return any(OPERATOR_SCOPE in (rdd.get("Scope") or "") for rdd in info.get("RDD Info", []))
        return ratio([_task_times(_newest(self.directory), self.offset, batch_ids, ours)])

    def post_shuffle_wall_over_cpu(self, query_name: str, batch_ids: Iterable[int]) -> Optional[float]:
        """Over the post-shuffle stages of the query named ``query_name`` (its jobs' descriptions
        start with the name: Spark's ``StreamExecution``), in the given batches since
        :meth:`mark`; None if none."""
        def named(info: dict, props: dict) -> bool:
            return _post_shuffle(info) and (props.get(JOB_DESCRIPTION) or "").startswith(query_name)
        return ratio([_task_times(_newest(self.directory), self.offset, batch_ids, named)])


def post_shuffle_times(directory: str, system: str, batch_ids: Iterable[int]) -> Tuple[int, int]:
    """(task run ms, task CPU ns) of ``system``'s post-shuffle stages (those with a parent
    stage) in the given batches, from the one event log in a spark-submit's ``directory``."""
    def post_shuffle(info: dict, props: dict) -> bool:
        return props.get(SYSTEM_PROPERTY) == system and _post_shuffle(info)
    return _task_times(_newest(directory), 0, batch_ids, post_shuffle)


def ratio(times: Iterable[Tuple[int, int]]) -> Optional[float]:
    """Summed task run time ÷ summed task CPU time; None without CPU time."""
    pairs = list(times)
    run_ms, cpu_ns = sum(t[0] for t in pairs), sum(t[1] for t in pairs)
    return run_ms / (cpu_ns / 1e6) if cpu_ns else None


def _post_shuffle(info: dict) -> bool:
    """Whether a stage reads a shuffle: it has a parent stage."""
    return bool(info.get("Parent IDs"))


def _newest(directory: str) -> Optional[str]:
    """The application's event log: the newest file in ``directory``, if any."""
    return max(glob.glob(os.path.join(directory, "*")), key=os.path.getmtime, default=None)


def _task_times(path: Optional[str], offset: int, batch_ids: Iterable[int],
                chosen: Callable[[dict, dict], bool]) -> Tuple[int, int]:
    """(run ms, CPU ns) summed over the tasks of the stages of the given micro-batches that
    ``chosen(stage info, properties)`` picks, in the event log ``path`` from ``offset`` on."""
    if path is None:
        return 0, 0
    wanted = set(batch_ids)
    stages: set = set()
    run_ms = cpu_ns = 0
    with open(path, "rb") as f:
        f.seek(offset)
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line still being written
            kind = event.get("Event")
            if kind == "SparkListenerStageSubmitted":
                info, props = event["Stage Info"], event.get("Properties") or {}
                batch = props.get("streaming.sql.batchId")
                if batch is not None and int(batch) in wanted and chosen(info, props):
                    stages.add(info["Stage ID"])
            elif kind == "SparkListenerTaskEnd" and event.get("Stage ID") in stages:
                metrics = event.get("Task Metrics") or {}
                run_ms += metrics.get("Executor Run Time", 0)
                cpu_ns += metrics.get("Executor CPU Time", 0)
    return run_ms, cpu_ns
