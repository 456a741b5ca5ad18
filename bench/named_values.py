"""How a Python state function's named values cost on the server: compile time (the client's
type probes are analyses on the server too), the server's analysis of the query, and rows/s,
for a branching function with more and more steps, each of which the compiler names (see
python/mapwithstate/pyfunc/bindings.py).

A script, not a test and not part of ``bench/run``: it starts its own local server, and stops a
size once one of its phases passes ``--budget`` seconds (the server's analysis of a size that
has not finished is cancelled with the session's ``interruptAll``, or the server is stopped).

    .venv/bin/python bench/named_values.py --steps 5 10 15 20 30 [--form transform]

Each line: steps, the most names an output nests, the Columns' text length, the wall seconds
of compile, analysis and the first run (each with the CPU seconds of the server and of this
process: on a loaded machine the CPU says more), and rows/s over a larger input (the difference
of two runs, so that analysis and the job's fixed costs cancel).
"""
import argparse
import importlib.util
import os
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate.pyfunc.bindings import Bindings

T0 = datetime(2026, 1, 1)


def branching_function(directory: Path, steps: int, group: bool = False) -> Any:
    """A function of ``steps`` if/else statements, each reading the step before three times
    (the condition and both branches), so that copies triple a step and the compiler names
    (tests/test_state_function_compiler.py runs one of 39 steps both ways, per record and as a
    group function, and tests/test_classic.py on a classic session). ``group``: a group
    function, whose ``i`` and ``j`` are aggregates of the key's records of the batch, ``i``'s
    records reading a value of the key, and which sums a nested loop over the records."""
    name = "branching_group" if group else "branching"
    lines = ["import mapwithstate as mws", "", "", "@mws.state_function('n BIGINT')"]
    if group:
        # w, named, is read per record inside an aggregate, and divmod names its operand.
        lines += [f"def {name}(k, rows, state):", "    w = len(k) // 2 + len(k) % 3",
                  "    i = sum(divmod(r.i + w, 3)[0] for r in rows)",
                  "    j = min(r.j for r in rows)"]
    else:
        lines += [f"def {name}(k, i, j, state):"]
    lines += ["    x0 = i + (state.n or 0) % 5"]
    for s in range(1, steps + 1):
        lines += [f"    if x{s - 1} > j:", f"        x{s} = x{s - 1} - j",
                  "    else:", f"        x{s} = x{s - 1} + 2 * j"]
    returned = f"'k': k, 'n': x{steps}"
    if group:
        # A loop's body names its inner loop's fold, beside names made outside it.
        lines += ["    total, es, gs = 0, [r.i for r in rows], [r.j for r in rows]",
                  "    for e in es:", "        for g in gs:", "            total += e * g",
                  "        total += x0 + w"]
        returned += ", 'total': total"
    lines += [f"    state.update(n=x{steps})", f"    return {{{returned}}}"]
    path = directory / f"{name}{steps}.py"
    path.write_text("\n".join(lines) + "\n")
    loader = importlib.util.spec_from_file_location(f"{name}{steps}", path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return getattr(module, name)


class Timeout(Exception):
    pass


def cpu_seconds(pid: int) -> float:
    """The CPU seconds (user and system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Phase:
    """The wall seconds of a phase, with the CPU seconds the server and this process used in
    it (on a loaded machine, CPU seconds say more than wall seconds)."""

    def __init__(self, wall: float, server: float, client: float) -> None:
        self.wall, self.server, self.client = wall, server, client

    def __str__(self) -> str:
        return f"{self.wall:.1f}s(server {self.server:.1f} cpu, client {self.client:.1f} cpu)"


def timed(spark: Any, server_pid: int, budget: float, action: Callable[[], Any]) -> Phase:
    """The time ``action`` takes; past ``budget`` the session's operations are interrupted."""
    done = threading.Event()

    def watchdog() -> None:
        if not done.wait(budget):
            spark.interruptAll()

    thread = threading.Thread(target=watchdog, daemon=True)
    start, server, client = time.perf_counter(), cpu_seconds(server_pid), time.process_time()
    thread.start()
    try:
        action()
    except Exception as e:  # noqa: BLE001 - an interrupted operation
        if not done.is_set() and time.perf_counter() - start >= budget:
            raise Timeout() from e
        raise
    finally:
        done.set()
    phase = Phase(time.perf_counter() - start, cpu_seconds(server_pid) - server,
                  time.process_time() - client)
    if phase.wall >= budget:
        raise Timeout()
    return phase


def frame(spark: Any, rows: int) -> Any:
    return spark.range(rows).select(
        (F.col("id") % 1000).cast("string").alias("k"), (F.col("id") % 50).alias("i"),
        (F.col("id") % 7 + 1).alias("j"), F.lit(T0).alias("t"))


def transform_resolve(self: Bindings, column: Any) -> Any:
    """The form names had before ``__mws_python_let``: ``transform(array(value), x -> c)[0]``
    (``--form transform``, to compare on one build)."""
    from pyspark.sql.connect.column import Column as ConnectColumn
    from pyspark.sql.connect.expressions import LambdaFunction, UnresolvedFunction

    result = column
    for variable, value in self.used(column):
        function = LambdaFunction(result._expr, [variable._expr])
        array = F.array(value)._expr  # type: ignore[attr-defined]
        result = ConnectColumn(UnresolvedFunction("transform", [array, function]))[0]
    return result


def measure(spark: Any, server_pid: int, spec: Any, budget: float, small: int, large: int,
            report: Callable[[str, Any], None]) -> None:
    def phase(action: Callable[[], Any]) -> Phase:
        return timed(spark, server_pid, budget, action)

    probe = frame(spark, 1)
    compiled: Dict[str, str] = {}
    report("compile", phase(lambda: compiled.update(spec.explain(probe))))
    # Each name is a lambda around the output it is used in (the function has no loops).
    report("names", max(text.count("lambdafunction(") for text in compiled.values()))
    report("chars", sum(map(len, compiled.values())))
    out: Dict[int, Any] = {}
    for rows in (small, large):
        out[rows] = mws.map_with_state(frame(spark, rows), key="k", spec=spec, batch_time="t")
    report("analysis", phase(lambda: out[small].schema))

    def run(rows: int) -> Callable[[], Any]:
        return lambda: out[rows].write.format("noop").mode("overwrite").save()

    report("first_run", phase(run(small)))
    seconds_small = min(phase(run(small)).wall for _ in range(2))
    seconds_large = min(phase(run(large)).wall for _ in range(2))
    report("rows_per_s", round((large - small) / max(seconds_large - seconds_small, 1e-9)))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[5, 10, 15, 20, 30])
    parser.add_argument("--budget", type=float, default=300.0, help="seconds per phase")
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=220_000)
    parser.add_argument("--form", choices=["let", "transform"], default="let",
                        help="how names are bound: the plugin's let, or transform as before")
    args = parser.parse_args(argv)
    if args.form == "transform":
        Bindings.resolve = transform_resolve  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as directory, mws.LocalConnectServer(
            conf={"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g"}) as server:
        print(f"server pid {server.pid}", flush=True)
        spark = server.session()
        for steps in args.steps:
            spec = branching_function(Path(directory), steps)
            print(f"steps={steps}", end="", flush=True)

            def report(name: str, value: Any) -> None:
                print(f" {name}={value}", end="", flush=True)

            try:
                measure(spark, server.pid, spec, args.budget, args.small, args.large, report)
            except Timeout:
                print(f" (the next phase passed {args.budget:.0f} s; stopping)", flush=True)
                break
            print(flush=True)


if __name__ == "__main__":
    sys.exit(main())
