"""``bench/run [--quick] [--keys N] [--rounds N] [--only S1,S2,S3,S4,S5,B1,S6]``: the whole
suite in one command (S6 only when named).

Generates missing data, starts one local Connect server with the plugin (ours,
the stateless floor as a comparison, applyInPandasWithState, transformWithStateInPandas,
groupBy), runs the Scala systems through spark-submit, interleaving
the systems round by round (A B A B …) so that drift on a shared machine hits them alike,
and prints one markdown table per scenario, also written to bench/results/latest.md."""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from contextlib import nullcontext
from datetime import datetime
from typing import Any, Callable, Dict, List, Optional

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)

import pyspark  # noqa: E402

import mapwithstate as mws  # noqa: E402
from bench import connect_systems, data, jvm_systems, report, tasktime, threadtime  # noqa: E402
from bench.rss import high_water_bytes  # noqa: E402
from bench.systems import (FLOOR, FLOOR_CONNECT, GROUP_BY, GROUPS, OURS, OURS_HEAP,  # noqa: E402
                           OURS_ORDERED, OURS_PYTHON, OURS_ROCKSDB, PANDAS, PANDAS_PYTHON,
                           PER_RECORD, SCALED_DOWN, TIMERS_OURS, TWS_PANDAS_PYTHON,
                           TWS_PANDAS_SUM, TWS_PANDAS_TIMERS, TWS_PYTHON)
from bench.measure import Figures, figures, per_file  # noqa: E402
from bench.outcome import Outcome  # noqa: E402
from bench.scenarios import WARMUP, Scenario, Suite, TimerLoad, suite  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "latest.md")
#: Every run's per-batch numbers, for looking into a table's figures (spikes, warm-up).
RAW = os.path.join(os.path.dirname(RESULTS), "latest-raw.json")
#: Every system, Connect server and spark-submit alike, runs with these (2 cores here).
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    # AvailableNow runs can have hundreds of batches; keep every progress for the harness.
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
    # ProcessingTimeTimeout asks for a batch without data after every batch, forever, so an
    # AvailableNow query would never end. Without them the timeout scan runs inside each data
    # batch (flatMapGroupsWithState and applyInPandasWithState look for timed-out keys in every
    # batch), so its cost stays in the measured batches.
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    # The fork-free checkpoint file manager server_conf() sets for the Connect server (issue 12),
    # here for every system alike: the spark-submit systems load it from the plugin jar.
    "spark.sql.streaming.checkpointFileManagerClass": mws.server_conf("-")[
        "spark.sql.streaming.checkpointFileManagerClass"],
}
DRIVER_MEMORY = "4g"
#: S4's timer settings for the spark-submit systems (bench/jvm's TimerCount reads it).
TIMER_CONF = "spark.mapwithstate.bench.timers"
#: The warm-up input of the spark-submit systems (bench/jvm's BenchMain reads it).
WARM_UP_CONF = "spark.mapwithstate.bench.warmUp"
#: The streaming systems run through the Connect server (applyInPandasWithState aside: it runs
#: on a scaled-down input).
CONNECT_RUNNERS = {OURS.name: connect_systems.ours, FLOOR_CONNECT.name: connect_systems.floor,
                   OURS_PYTHON.name: connect_systems.ours_python,
                   OURS_ORDERED.name: connect_systems.ours_ordered,
                   GROUPS.name: connect_systems.groups,
                   PER_RECORD.name: connect_systems.per_record_count_sum}
#: The Connect systems run on the scaled-down input (bench/systems.py's SCALED_DOWN).
SCALED_DOWN_RUNNERS = {
    PANDAS.name: connect_systems.apply_in_pandas_with_state,
    PANDAS_PYTHON.name: connect_systems.python_in_pandas,
    TWS_PYTHON.name: connect_systems.python_in_transform_with_state(pandas=False),
    TWS_PANDAS_PYTHON.name: connect_systems.python_in_transform_with_state(pandas=True),
    TWS_PANDAS_SUM.name: connect_systems.tws_pandas_count_sum}
#: S4's Connect systems: their runners also take the scenario's timer step and timed keys.
TIMER_RUNNERS = {TIMERS_OURS.name: connect_systems.ours_timers,
                 TWS_PANDAS_TIMERS.name: connect_systems.tws_pandas_timers}
SCALED_DOWN_NAMES = {s.name for s in SCALED_DOWN}
assert set(SCALED_DOWN_RUNNERS) | {TWS_PANDAS_TIMERS.name} == SCALED_DOWN_NAMES
#: S6 grows state for a long time on a small heap; its queries may run this long.
BIG_STATE_MAX_SECONDS = 3600
#: S6's Connect systems, each on a server of its own (its peak memory is the system's).
BIG_STATE_RUNNERS = {OURS_ROCKSDB.name: connect_systems.ours_on("rocksdb", BIG_STATE_MAX_SECONDS),
                     OURS_HEAP.name: connect_systems.ours_on("memory", BIG_STATE_MAX_SECONDS)}


def main(argv: Optional[List[str]] = None) -> int:
    args = _parse(argv)
    # A killed run still stops its Connect server (a separate process group) on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # The Connect server's Python workers (applyInPandasWithState) need this environment's
    # pandas and must import the state function from bench/ by reference.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    plan = suite(args.quick, args.keys or (50_000 if args.quick else 1_000_000), args.rounds)
    only = set(args.only.split(",")) if args.only else None
    work = tempfile.mkdtemp(prefix="mapwithstate-bench-")
    started = time.monotonic()
    sections = [_header(args.quick, plan)]
    raw: Dict[str, Dict[str, list]] = {}
    print(sections[0], flush=True)
    try:
        if only is None or only & ({s.name for s in plan.streaming} | {plan.batch.name}):
            sections += _on_shared_server(plan, only, work, raw)
        big = plan.big_state
        if big is not None and only is not None and big.name in only:
            section = _big_state(big, work, raw.setdefault(big.name, {}))
            sections.append(section)
            print("\n" + section, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    footer = f"\nTotal wall time {time.monotonic() - started:.0f} s."
    print(footer)
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        f.write("\n\n".join(sections) + "\n" + footer + "\n")
    with open(RAW, "w") as f:
        json.dump(raw, f)
    _log(f"written {RESULTS}")
    return 0


def _on_shared_server(plan: Suite, only: Optional[set], work: str,
                      raw: Dict[str, Dict[str, list]]) -> List[str]:
    """The scenarios that share one Connect server (all but S6), each section printed as done."""
    sections = []
    _log("starting the Connect server")
    events = tasktime.EventLog(os.path.join(work, "eventlog-server"))
    server = mws.LocalConnectServer(conf={**SPARK_CONF, "spark.driver.memory": DRIVER_MEMORY,
                                          **tasktime.event_log_conf(events.directory)})
    try:
        spark = server.session()
        pandas_by_name = {s.name: s for s in plan.pandas}
        _warm_up_server(spark, plan, [s for s in plan.streaming if only is None or s.name in only],
                        work)
        for scenario in plan.streaming:
            if only is None or scenario.name in only:
                events.mark()
                section = _streaming(spark, scenario, pandas_by_name.get(scenario.name), plan, work,
                                     raw.setdefault(scenario.name, {}), events, server.pid)
                sections.append(section)
                print("\n" + section, flush=True)
        if only is None or plan.batch.name in only:
            section = _batch(spark, plan)
            sections.append(section)
            print("\n" + section, flush=True)
        spark.stop()
    finally:
        server.stop()
    return sections


def _warm_up_server(spark, plan: Suite, scenarios: List[Scenario], work: str) -> None:
    """Runs each Connect system the measured scenarios have once over the warm-up input,
    unmeasured (see bench/scenarios.py's warm_up; BenchMain does the same in each spark-submit)."""
    if not scenarios or plan.warm_up is None:
        return
    directory = _data(plan.warm_up)
    names = {s.name for scenario in scenarios for s in scenario.systems}
    timers = next((s.timers for s in scenarios if s.timers), None)
    for name in (n for n in {**CONNECT_RUNNERS, **SCALED_DOWN_RUNNERS, **TIMER_RUNNERS}
                 if n in names):
        _log(f"warm-up: {name}")
        outcome = _connect_runner(name, timers)(spark, directory, _dir(work, "warm-up", name))
        if outcome.batches is None:
            _log(f"warm-up of {name} failed: {outcome.note}")


def _streaming(spark, scenario: Scenario, pandas_scenario: Optional[Scenario], plan: Suite,
               work: str, raw: Dict[str, list], events: "tasktime.EventLog",
               server_pid: Optional[int]) -> str:
    directory = _data(scenario)
    pandas_directory = _data(pandas_scenario) if pandas_scenario else None
    runs: Dict[str, List[Outcome]] = defaultdict(list)
    # Ours' and the Connect floor's, apart: both run on the one server, so the shares of its
    # JIT compilers and GC while each ran say whether ours' tasks wait on the process or on us.
    threads = {name: threadtime.ThreadTimes(server_pid, os.cpu_count() or 1)
               for name in (scenario.reference, FLOOR_CONNECT.name)}  # reference: ours
    jvm_event_logs: List[str] = []
    for round_ in range(scenario.rounds):
        tag = f"{scenario.name} round {round_ + 1}/{scenario.rounds}"
        for system in scenario.systems:
            if system.runs_on == "connect" and system not in SCALED_DOWN:
                _log(f"{tag}: {system.name}")
                with threads[system.name].measuring() if system.name in threads else nullcontext():
                    runs[system.name].append(_connect_runner(system.name, scenario.timers)(
                        spark, directory, _dir(work, tag, system.name)))
        for system in (s for s in scenario.systems if s in SCALED_DOWN and pandas_directory):
            _log(f"{tag}: {system.name} (scaled down)")
            pandas_timers = pandas_scenario.timers if pandas_scenario else None
            runs[system.name].append(_connect_runner(system.name, pandas_timers)(
                spark, pandas_directory, _dir(work, tag, system.name)))
        jvm_names = tuple(s.name for s in scenario.systems if s.runs_on == "jvm")
        _log(f"{tag}: {', '.join(jvm_names)} (spark-submit)")
        jvm_event_logs.append(_dir(work, tag, "jvm-eventlog"))
        jvm_conf = {**SPARK_CONF, "spark.jars": mws.jar_path(),
                    **tasktime.event_log_conf(jvm_event_logs[-1])}
        if plan.warm_up is not None:
            jvm_conf[WARM_UP_CONF] = _data(plan.warm_up)
        if scenario.timers:
            jvm_conf[TIMER_CONF] = scenario.timers.conf()
        jvm = jvm_systems.run(directory, jvm_names, _dir(work, tag, "jvm"), jvm_conf,
                              DRIVER_MEMORY)
        for system, outcome in jvm.items():
            runs[system].append(outcome)
    raw.update({system: [o.batches or o.note for o in outcomes] for system, outcomes in runs.items()})

    rows = _rows(scenario, pandas_scenario, plan.pandas_scale, runs)
    lines = _targets(scenario, rows)
    phase = scenario.phases[0]
    lines.append(report.check(f"ours: stateful stage's task wall time ÷ task CPU time ({phase.label})",
                              events.wall_over_cpu(phase.batches), 1.5))
    lines.append(_others_wall_over_cpu(scenario, jvm_event_logs, events))
    # Not a target: what the tasks' waiting above was made of (bench/threadtime.py), and the
    # same server while the floor ran on it.
    lines.append(threads[scenario.reference].summary("ours' Connect server while ours ran (all its batches)"))
    if FLOOR_CONNECT in scenario.systems:
        lines.append(threads[FLOOR_CONNECT.name].summary(
            f"the same server while {FLOOR_CONNECT.label} ran (all its batches)"))
    # With timers a stateful system's output rows are its expired keys: shown, not assumed.
    expired = ({s.name for s in scenario.systems} - {FLOOR.name}) if scenario.timers else None
    return (report.streaming_table(f"{scenario.name}: {scenario.title}", rows, scenario.reference,
                                   expired_column=expired)
            + "\n" + report.targets(lines))


def _rows(scenario: Scenario, pandas_scenario: Optional[Scenario], pandas_scale: float,
          runs: Dict[str, List[Outcome]]) -> List[report.Row]:
    """A scenario's table rows, phase by phase in its systems' order; the scaled-down systems'
    figures come from their own (``pandas_scenario``'s) batches of the same phase."""
    rows: List[report.Row] = []
    for phase_index, phase in enumerate(scenario.phases):
        for system in (s.name for s in scenario.systems):
            if system in SCALED_DOWN_NAMES:
                if pandas_scenario is None:
                    if phase_index == 0:
                        rows.append(report.Row(system, phase.label, None,
                                               "not run (too slow for this state size)"))
                    continue
                source, scale = pandas_scenario, pandas_scale
            else:
                source, scale = scenario, 1.0
            rows.append(_row(system, phase.label, source.phases[phase_index].batches, runs[system],
                             len(source.batches), scale))
    return rows


def _connect_runner(name: str, timers: Optional[TimerLoad]) -> Callable[[Any, str, str], Outcome]:
    """The Connect system ``name``'s runner, ``(spark, input directory, checkpoint)``; S4's
    with the scenario's ``timers``."""
    if name in TIMER_RUNNERS:
        if timers is None:
            raise ValueError(f"{name} runs only in a scenario with timers (S4)")
        return lambda spark, directory, checkpoint: TIMER_RUNNERS[name](
            spark, directory, checkpoint, timers.step_ms, timers.timed_keys)
    return {**CONNECT_RUNNERS, **SCALED_DOWN_RUNNERS}[name]


def _others_wall_over_cpu(scenario: Scenario, event_logs: List[str],
                          events: "tasktime.EventLog") -> str:
    """Not a target: the other systems' post-shuffle stages' task wall ÷ CPU time in the same
    batches as ours' figure (the floor on the Connect server, then the spark-submit systems), to
    tell a store that waits from a process whose threads wait."""
    phase = scenario.phases[0]
    figures = []
    if FLOOR_CONNECT in scenario.systems:
        value = events.post_shuffle_wall_over_cpu(connect_systems.FLOOR_QUERY, phase.batches)
        figures.append(f"{FLOOR_CONNECT.label} " + ("not measured" if value is None
                                                    else f"{value:.2f}×"))
    for system in (s for s in scenario.systems if s.runs_on == "jvm"):
        value = tasktime.ratio(tasktime.post_shuffle_times(log, system.name, phase.batches)
                               for log in event_logs)
        if value is not None:  # DStream's jobs carry no streaming.sql.batchId
            figures.append(f"{system.label} {value:.2f}×")
    return ("for comparison, the post-shuffle stage's task wall time ÷ task CPU time "
            f"({phase.label}): " + (", ".join(figures) or "not measured"))


def _big_state(scenario: Scenario, work: str, raw: Dict[str, list]) -> str:
    """S6: every Connect system on a server of its own with the scenario's heap, the JVM ones
    in one spark-submit with the same heap; a table, its targets, and each process's peak
    resident memory (heap and RocksDB's native memory alike)."""
    directory = _data(scenario)
    conf = {**SPARK_CONF, **dict(scenario.conf),
            "spark.mapwithstate.bench.maxQuerySeconds": str(BIG_STATE_MAX_SECONDS)}
    runs: Dict[str, List[Outcome]] = defaultdict(list)
    peaks: Dict[str, Optional[int]] = {}
    for system in scenario.systems:
        if system.runs_on != "connect":
            continue
        _log(f"{scenario.name}: {system.name} (its own Connect server, {scenario.memory} heap)")
        server = mws.LocalConnectServer(conf={**conf, "spark.driver.memory": scenario.memory})
        try:
            spark = server.session()
            runs[system.name].append(BIG_STATE_RUNNERS[system.name](
                spark, directory, _dir(work, scenario.name, system.name)))
            peaks[system.name] = high_water_bytes(server.pid)
            spark.stop()
        finally:
            server.stop()
    jvm_names = tuple(s.name for s in scenario.systems if s.runs_on == "jvm")
    _log(f"{scenario.name}: {', '.join(jvm_names)} (spark-submit, {scenario.memory} heap)")
    jvm_peak: Dict[str, int] = {}
    jvm = jvm_systems.run(directory, jvm_names, _dir(work, scenario.name, "jvm"),
                          {**conf, "spark.jars": mws.jar_path()}, scenario.memory, jvm_peak)
    for system, outcome in jvm.items():
        runs[system].append(outcome)
        peaks[system] = jvm_peak.get("bytes")
    raw.update({system: [o.batches or o.note for o in outcomes] for system, outcomes in runs.items()})
    rows = [_row(system.name, phase.label, phase.batches, runs[system.name], len(scenario.batches), 1.0)
            for phase in scenario.phases for system in scenario.systems]
    lines = _targets(scenario, rows)
    lines += [f"peak resident memory of {name}'s process (VmHWM): "
              f"{report.bytes_text(peak) if peak else 'not measured'}"
              + (" (spark-submit: all its systems)" if name in jvm_names else "")
              for name, peak in peaks.items()]
    return (report.streaming_table(f"{scenario.name}: {scenario.title}", rows, scenario.reference)
            + "\n" + report.targets(lines))


def _row(system: str, phase: str, measured, outcomes: List[Outcome], n_files: int,
         scale: float) -> report.Row:
    """``phase`` is the full-size scenario's label, so a scaled-down row lines up with the
    others; ``measured`` are its own batch indexes."""
    notes = [o.note for o in outcomes if o.batches is None]
    good = [o.batches for o in outcomes if o.batches is not None]
    try:
        per_run = [per_file(b, n_files) for b in good]
    except ValueError as e:
        return report.Row(system, phase, None, f"failed: {e}", scale)
    if not per_run:
        return report.Row(system, phase, None, notes[0] if notes else "not run", scale)
    return report.Row(system, phase, figures(per_run, measured), "", scale)


def _targets(scenario: Scenario, rows: List[report.Row]) -> List[str]:
    """The scenario's targets, checked against this run's figures."""
    lines = []
    for target in scenario.targets:
        mine = _figures(rows, target.system, scenario.phases[target.phase].label)
        other = _figures(rows, target.over, scenario.phases[target.over_phase].label)
        over_figure = target.over_figure or target.figure
        value = (getattr(mine, target.figure) / getattr(other, over_figure)
                 if mine and other and getattr(other, over_figure) else None)
        lines.append(report.check(target.label, value, target.limit, at_least=target.at_least))
    return lines


def _figures(rows: List[report.Row], system: str, phase: str) -> Optional[Figures]:
    for row in rows:
        if row.system == system and row.phase == phase:
            return row.figures
    return None


def _batch(spark, plan: Suite) -> str:
    job = plan.batch
    directory = data.batch_job_data(job)
    times: Dict[str, List[float]] = {OURS.name: [], GROUP_BY.name: []}
    runners = {OURS.name: connect_systems.batch_ours, GROUP_BY.name: connect_systems.batch_group_by}
    # One unmeasured run each first (JIT, file listing caches), then alternate.
    for round_ in range(plan.batch_rounds + 1):
        for name, runner in runners.items():
            _log(f"{job.name} round {round_}/{plan.batch_rounds}: {name}")
            try:
                seconds = runner(spark, directory)
            except Exception as e:  # noqa: BLE001 - reported in the table
                _log(f"{job.name} {name} failed: {e}")
                continue
            if round_ > 0:
                times[name].append(seconds)
    ours, group_by = times[OURS.name], times[GROUP_BY.name]
    line = report.check("time ÷ groupBy().agg()",
                        report.median(ours) / report.median(group_by) if ours and group_by else None,
                        job.target)
    return (report.batch_table(f"{job.name}: {job.title}", ours, group_by, job.rows) + "\n"
            + report.targets([line]))


def _data(scenario: Scenario) -> str:
    _log(f"data for {scenario.name} ({scenario.records:,} records in {len(scenario.batches)} files)")
    return data.scenario_data(scenario)


def _dir(work: str, tag: str, system: str) -> str:
    return os.path.join(work, tag.replace(" ", "-").replace("/", "of"), system)


def _header(quick: bool, plan: Suite) -> str:
    mode = "--quick" if quick else "default scale"
    return (f"## mapwithstate benchmark ({mode}), {datetime.now():%Y-%m-%d %H:%M}\n\n"
            f"{os.cpu_count()} cores, Spark {pyspark.__version__}, local[2], "
            f"spark.sql.shuffle.partitions={SPARK_CONF['spark.sql.shuffle.partitions']}, "
            f"driver memory {DRIVER_MEMORY}; systems interleaved round by round "
            f"({', '.join(f'{s.name} x{s.rounds}' for s in plan.streaming)}), medians over the "
            f"pooled measured batches (the first batch and {WARMUP} warm-up batches excluded; "
            f"S3, S4: also the 2 after the state grew). Every process (the Connect server, each "
            f"spark-submit) first runs each of its systems once over a small warm-up input, "
            f"unmeasured ({_warm_up_text(plan)}); not in S6, and B1 has an unmeasured first run "
            f"of its own. Ratios are of median batch latency (× ours > 1: slower than ours); † marks "
            f"a ratio of time per record, for an input scaled down. Every system runs with the same "
            f"settings, including spark.sql.streaming.checkpointFileManagerClass="
            f"{SPARK_CONF['spark.sql.streaming.checkpointFileManagerClass']} (fork-free checkpoint "
            f"files on the local disk) and an event log.")


def _warm_up_text(plan: Suite) -> str:
    w = plan.warm_up
    return "none" if w is None else f"{w.title}: {w.records:,} records in {len(w.batches)} batches"


def _log(message: str) -> None:
    print(f"[bench {datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a small version (minutes per scenario)")
    parser.add_argument("--keys", type=int, help="S1's state size (default 1M; 50k with --quick)")
    parser.add_argument("--only", help="comma-separated scenarios, e.g. S2,B1 (default: all but "
                                       "S6, which runs only when named)")
    parser.add_argument("--rounds", type=int, help="rounds of every streaming scenario (default: "
                                                   "2 for S1, S2 and S5, 1 for the others; 1 "
                                                   "with --quick)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
