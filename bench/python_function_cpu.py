"""Executor CPU time of the running count as a Python state function against the Column spec.

Run by hand, not part of bench/run (it starts its own local server with the jar
``mapwithstate.jar_path()`` finds, ``$MAPWITHSTATE_JAR`` if set):

    .venv/bin/python bench/python_function_cpu.py [--records 1000000] [--keys 20000]
        [--partitions 4] [--rounds 3]

The workload is S1/S2's running count (bench/python_function.py's ``running_count`` and
bench/connect_systems.py's Column spec) over a static DataFrame, the batch path of the same
operator: ``--records`` records over ``--keys`` keys in ``--partitions`` partitions, every
emitted row written to the ``noop`` sink. Each round runs the two specs one after the other,
in alternating order, in one server, after one unmeasured run of each (code generation, JIT).
What is measured is the executor CPU time of each query's stateful stage (the stage reading
the shuffle: the operator, its state and its output) from the Spark UI's REST API: the CPU the
compiled Columns cost, much less sensitive than wall time to other processes sharing the
machine, which the load average printed with the figures describes.

It prints both specs' compiled Columns (``spec.explain``), each round's CPU seconds, the median
of each spec and their ratio (the Python function's ÷ the Column spec's; issue 41's target is
at most 1.05), and the load average before and after.
"""
import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
from typing import Callable, Dict, List, Set

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir))

import mapwithstate as mws  # noqa: E402
from bench import connect_systems, python_function  # noqa: E402
from mapwithstate.pyfunc.spec import PythonStateSpec  # noqa: E402


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


class StageTimes:
    """The completed stages of the server's one application, from the REST API."""

    def __init__(self, ui_url: str) -> None:
        applications = _get(f"{ui_url}/api/v1/applications")
        assert isinstance(applications, list) and applications, applications
        self._stages_url = f"{ui_url}/api/v1/applications/{applications[0]['id']}/stages"
        self._seen: Set[int] = set()

    def _completed(self) -> List[dict]:
        stages = _get(f"{self._stages_url}?status=complete")
        assert isinstance(stages, list)
        return stages

    def mark(self) -> None:
        self._seen = {s["stageId"] for s in self._completed()}

    def stateful_cpu_seconds(self) -> float:
        """Executor CPU seconds of the stages completed since :meth:`mark` that read a
        shuffle (the stateful stage; the stage writing the shuffle is the input's)."""
        for _ in range(50):  # the listener may lag the query's end by a moment
            new = [s for s in self._completed() if s["stageId"] not in self._seen]
            reading = [s for s in new if s.get("shuffleReadRecords", 0) > 0]
            if reading:
                return sum(s["executorCpuTime"] for s in reading) / 1e9
            time.sleep(0.2)
        raise RuntimeError("no stage reading a shuffle completed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"mapwithstate from {os.path.dirname(mws.__file__)}, jar {mws.jar_path()}")
    load_before = os.getloadavg()
    server = mws.LocalConnectServer(conf={
        "spark.sql.shuffle.partitions": str(args.partitions),
        "spark.sql.adaptive.enabled": "false",  # the same stages in every run
    })
    try:
        spark = server.session()
        from pyspark.sql import functions as F

        df = spark.range(0, args.records, 1, args.partitions).select(
            (F.col("id") % args.keys).alias("key"), F.col("id").alias("value"))
        specs = {
            "column spec": connect_systems.running_count(),
            "python function": python_function.running_count.timeout(
                connect_systems.IDLE_TIMEOUT),
        }
        python = specs["python function"]
        assert isinstance(python, PythonStateSpec)
        for name, text in python.explain(df, "key").items():
            print(f"python function {name}: {text}")
        column = specs["column spec"]
        for name in ("update", "remove", "emit"):
            if getattr(column, name) is not None:
                print(f"column spec {name}: {getattr(column, name)}")
        stages = StageTimes(server.ui_url)

        def run(spec: mws.StateSpec) -> Callable[[], float]:
            def measured() -> float:
                stages.mark()
                out = mws.map_with_state(df, key="key", spec=spec)
                out.write.format("noop").mode("overwrite").save()
                return stages.stateful_cpu_seconds()
            return measured

        runs = {name: run(spec) for name, spec in specs.items()}
        for name, measured in runs.items():
            print(f"warm-up {name}: {measured():.3f} s CPU", flush=True)
        cpu: Dict[str, List[float]] = {name: [] for name in runs}
        order = list(runs)
        for i in range(args.rounds):
            for name in order if i % 2 == 0 else reversed(order):
                cpu[name].append(runs[name]())
            print(f"round {i + 1}: " + ", ".join(f"{n} {cpu[n][-1]:.3f} s" for n in order),
                  flush=True)
        medians = {name: statistics.median(times) for name, times in cpu.items()}
        print(", ".join(f"median {n}: {m:.3f} s CPU" for n, m in medians.items()))
        print(f"python function / column spec: "
              f"{medians['python function'] / medians['column spec']:.3f}x")
        spark.stop()
    finally:
        server.stop()
    load_after = os.getloadavg()
    print("load average before: " + " ".join(f"{x:.2f}" for x in load_before)
          + "; after: " + " ".join(f"{x:.2f}" for x in load_after))


if __name__ == "__main__":
    main()
