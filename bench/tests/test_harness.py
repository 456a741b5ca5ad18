"""The benchmark harness's bookkeeping (bench/), without Spark: that a run's batches become the
table rows the suite promises. Timings are never asserted; these numbers are made up."""
import json
import os
import re
import time

import pytest

from bench import report, tasktime, threadtime
from bench.measure import figures, per_file
from bench.outcome import Outcome
from bench.scenarios import WARMUP, suite
from bench.systems import (JVM_STREAMING, OURS, OURS_PYTHON, PYTHON_PEERS, SCALED_DOWN, TWS,
                           TWS_PANDAS_PYTHON, TWS_PANDAS_SUM, TWS_PANDAS_TIMERS, TWS_SUM,
                           TWS_TIMERS, WITH_PYTHON)


def test_every_scenario_measures_batches_it_has():
    for quick in (True, False):
        plan = suite(quick, 1000)
        for scenario in plan.streaming + plan.pandas:
            for phase in scenario.phases:
                assert phase.batches, (scenario.name, phase.label)
                assert min(phase.batches) >= 1 + WARMUP
                assert max(phase.batches) < len(scenario.batches)


def test_batches_without_data_are_charged_to_the_batch_before():
    assert per_file([(10, 100, 5), (0, 20, 7), (10, 50, 5)], 2) == [(10, 120, 7), (10, 50, 5)]


def test_table_has_a_row_per_system_with_ratios_and_notes():
    runs = {"ours": [(100, 1000, 1)] + [(10, 100, 1)] * 5,
            "floor": [(100, 500, -1)] + [(10, 50, -1)] * 5}
    rows = [report.Row(s, "5 keys", figures([b], range(3, 6))) for s, b in runs.items()]
    rows.append(report.Row("dstream", "5 keys", None, "failed: boom"))
    table = report.streaming_table("S9: made up", rows).splitlines()
    assert table[0] == "### S9: made up"
    body = table[4:]
    assert [line.split(" | ")[0] for line in body] == [
        "| **ours**: map_with_state (Connect)", "| stateless floor", "| DStream mapWithState"]
    assert body[0].endswith("| 1.00 | 2.00 |")
    assert "failed: boom" in body[2]


def test_output_rows_of_batches_without_data_are_charged_too():
    assert per_file([(10, 100, 5, 3), (0, 20, 7, 4), (10, 50, 5, 0)], 2) == [
        (10, 120, 7, 7), (10, 50, 5, 0)]


def test_s4_measures_three_state_sizes_with_the_same_timers_everywhere():
    for quick in (True, False):
        s4 = next(s for s in suite(quick, 1000).streaming if s.name == "S4")
        assert len(s4.phases) == 3 and s4.timers is not None
        sizes = [max(b.key_space for b in (s4.batches[i] for i in p.batches)) for p in s4.phases]
        assert sizes[0] < sizes[1] == s4.timers.timed_keys < sizes[2]
        assert all(0 <= t.phase < 3 or t.phase == -1 for t in s4.targets)
        assert s4.timers.conf() == f"{s4.timers.step_ms},{s4.timers.timed_keys}"


def test_s4_table_shows_the_keys_each_stateful_system_expired():
    ours = [(100, 1000, 1, 0)] + [(10, 100, 1, 7)] * 5
    floor = [(100, 500, -1, 100)] + [(10, 50, -1, 10)] * 5
    rows = [report.Row("ours-timers", "5 keys", figures([ours], range(3, 6))),
            report.Row("floor", "5 keys", figures([floor], range(3, 6))),
            report.Row("fmgws-timers-hdfs", "5 keys", None, "failed: boom")]
    table = report.streaming_table("S4: made up", rows, "ours-timers",
                                   expired_column={"ours-timers", "fmgws-timers-hdfs"})
    lines = table.splitlines()
    assert lines[2].endswith("keys expired per batch (median) |")
    assert lines[4].endswith("| 7 |") and lines[5].endswith("| – |")
    assert all(line.count("|") == lines[2].count("|") for line in lines[4:])


def test_every_process_has_a_small_warm_up_input_without_targets():
    for quick in (True, False):
        plan = suite(quick, 1_000_000 if not quick else 50_000)
        warm_up = plan.warm_up
        assert warm_up is not None and not warm_up.targets
        assert warm_up.records < min(s.records for s in plan.streaming)
        assert warm_up.data_name() not in {s.data_name() for s in plan.streaming}


def test_thread_times_count_this_process_cpu_by_kind():
    assert threadtime.kind_of("C2 CompilerThre") == "JIT compilers"
    assert threadtime.kind_of("Executor task l") == "task threads"
    assert threadtime.kind_of("mapwithstate-st") == "state background"
    assert threadtime.kind_of("stream executio") == "query driver"
    assert threadtime.kind_of("G1 Conc#0") == "GC" and threadtime.kind_of("python") == "other"
    threads = threadtime.ThreadTimes(os.getpid(), 2)
    if not threads.available():
        pytest.skip("no /proc here (the benchmark then says 'not measured')")
    with threads.measuring():
        deadline = time.process_time() + 0.3
        while time.process_time() < deadline:
            pass
    # This thread's CPU is counted, as "other" (a Python thread has the process's name).
    assert threads.cpu[threadtime.OTHER] >= 0.2, threads.cpu
    assert threads.elapsed >= 0.2
    line = threads.summary("this test")
    assert line.startswith("this test: ") and "other " in line and "run queue" in line, line


def test_task_times_sum_the_chosen_stages_of_measured_batches(tmp_path):
    def stage(stage_id, batch, parents, scope="", system=None, description=None):
        props = {"streaming.sql.batchId": str(batch)}
        if description:
            props[tasktime.JOB_DESCRIPTION] = description
        if system:
            props[tasktime.SYSTEM_PROPERTY] = system
        return {"Event": "SparkListenerStageSubmitted", "Properties": props,
                "Stage Info": {"Stage ID": stage_id, "Parent IDs": parents,
                               "RDD Info": [{"Scope": scope}]}}

    def task(stage_id, run_ms, cpu_ms):
        return {"Event": "SparkListenerTaskEnd", "Stage ID": stage_id,
                "Task Metrics": {"Executor Run Time": run_ms, "Executor CPU Time": cpu_ms * 10**6}}

    events = [stage(1, 3, [], system="floor"), task(1, 500, 100),          # map stage: not counted
              stage(2, 3, [1], system="floor"), task(2, 30, 20), task(2, 30, 10),
              stage(3, 0, [1], system="floor"), task(3, 900, 1),           # unmeasured batch
              stage(4, 3, [1], system="fmgws-hdfs"), task(4, 40, 40),
              stage(5, 3, [1], scope='{"name":"MapWithStateStream"}'), task(5, 80, 40),
              stage(6, 3, [], description="q\nid = 1\nbatch = 3"), task(6, 700, 1),  # map stage
              stage(7, 3, [6], description="q\nid = 1\nbatch = 3"), task(7, 90, 30),
              stage(8, 3, [6], description="other\nid = 2\nbatch = 3"), task(8, 900, 1)]
    log = tmp_path / "app-1"
    log.write_text("\n".join(json.dumps(e) for e in events) + "\n{\"Event\": \"half a li")
    assert tasktime.post_shuffle_times(str(tmp_path), "floor", [3, 4]) == (60, 30 * 10**6)
    assert tasktime.ratio([tasktime.post_shuffle_times(str(tmp_path), "floor", [3])] * 2) == 2.0
    assert tasktime.ratio([tasktime.post_shuffle_times(str(tmp_path), "dstream", [3])]) is None
    ours = tasktime.EventLog(str(tmp_path))
    assert ours.wall_over_cpu([3]) == 2.0
    assert ours.post_shuffle_wall_over_cpu("q", [3]) == 3.0
    assert ours.post_shuffle_wall_over_cpu("q", [4]) is None


def test_rounds_override_every_streaming_scenario_and_refuse_none():
    plan = suite(True, 1000, rounds=3)
    assert {s.rounds for s in plan.streaming} == {3}
    assert {s.rounds for s in suite(False, 1000).streaming} == {1, 2}
    with pytest.raises(ValueError, match="--rounds"):
        suite(True, 1000, rounds=0)


def test_s1_and_s2_measure_the_python_function_beside_the_column_spec_and_its_peers():
    for quick in (True, False):
        plan = suite(quick, 1000)
        scaled = {s.name for s in plan.pandas}
        for scenario in (s for s in plan.streaming if s.name in ("S1", "S2")):
            names = [s.name for s in scenario.systems]
            assert names[:2] == [OURS.name, OURS_PYTHON.name] and scenario.name in scaled
            assert set(PYTHON_PEERS) <= set(scenario.systems) <= set(WITH_PYTHON)
            python = [t for t in scenario.targets if t.system == OURS_PYTHON.name]
            assert [(t.over, t.limit, t.at_least) for t in python] == (
                [(OURS.name, 1.05, False)] + [(p.name, 100, True) for p in PYTHON_PEERS])
            assert all(t.figure == "records_per_s" for t in python[1:])
        assert all(OURS_PYTHON not in s.systems for s in plan.streaming
                   if s.name not in ("S1", "S2"))


def test_every_jvm_system_is_one_benchmain_runs():
    source = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jvm",
                          "src", "main", "scala", "io", "mapwithstate", "bench", "BenchMain.scala")
    with open(source) as f:
        cases = {name for line in f if line.strip().startswith("case ")
                 for name in re.findall(r'"([a-z0-9-]+)"', line)}
    assert TWS.name in JVM_STREAMING and TWS_TIMERS.name in JVM_STREAMING
    assert set(JVM_STREAMING) <= cases, set(JVM_STREAMING) - cases


def test_transform_with_state_is_a_peer_in_s1_s2_s4_and_s5():
    for quick in (True, False):
        plan = suite(quick, 1000)
        by_name = {s.name: s for s in plan.streaming}
        scaled = {s.name: s for s in plan.pandas}
        for name, scala, pandas in (("S1", TWS, TWS_PANDAS_PYTHON), ("S2", TWS, TWS_PANDAS_PYTHON),
                                    ("S4", TWS_TIMERS, TWS_PANDAS_TIMERS),
                                    ("S5", TWS_SUM, TWS_PANDAS_SUM)):
            systems = by_name[name].systems
            assert scala in systems and scala.runs_on == "jvm", name
            assert pandas in systems and pandas in SCALED_DOWN and name in scaled, name
        assert all(TWS not in s.systems for s in plan.streaming if s.name not in ("S1", "S2"))
        for name in ("S1", "S2", "S4"):
            tws = [t for t in by_name[name].targets if t.system in (TWS.name, TWS_TIMERS.name)]
            assert [(t.over, t.limit, t.at_least, t.figure) for t in tws] == [
                (by_name[name].reference, 5.0, True, "median_s")], name
        # S4's scaled-down input: the same batches, phases and step; keys and sizes at scale.
        s4, small = by_name["S4"], scaled["S4"]
        assert small.timers is not None and s4.timers is not None
        assert len(small.batches) == len(s4.batches)
        assert [p.batches for p in small.phases] == [p.batches for p in s4.phases]
        assert small.timers.step_ms == s4.timers.step_ms
        assert small.timers.timed_keys == int(s4.timers.timed_keys * plan.pandas_scale)
        assert small.records == pytest.approx(s4.records * plan.pandas_scale, rel=0.01)


def test_transform_with_state_target_is_checked_on_the_run_and_shown_in_the_table():
    from bench.__main__ import _targets

    s4 = next(s for s in suite(True, 1000).streaming if s.name == "S4")
    timed = s4.phases[1].label
    n = len(s4.batches)
    runs = {"ours-timers": [(10, 100, 1, 3)] * n, "tws-timers": [(10, 700, 1, 3)] * n,
            "tws-pandas-timers": [(1, 900, 1, 0)] * n}
    rows = [report.Row(s, timed, figures([b], s4.phases[1].batches),
                       scaled=0.01 if "pandas" in s else 1.0) for s, b in runs.items()]
    lines = _targets(s4, rows)
    line = next(line for line in lines if line.startswith("transformWithState"))
    assert line == (f"transformWithState (RocksDB) median ÷ ours at {timed}: 7.00× "
                    "(target ≥ 5×) — met")
    table = report.streaming_table("S4", rows, "ours-timers",
                                   expired_column={"ours-timers", "tws-timers"}).splitlines()
    assert table[5].startswith("| transformWithState, TimerValues timers, RocksDB store |")
    assert table[5].endswith("| 7.00 | n/a | 3 |")
    assert "0.01× (scaled down)" in table[6] and table[6].endswith("| 90.00† | n/a | – |")


def test_scaled_down_systems_rows_are_of_their_own_input_and_marked():
    from bench.__main__ import _rows

    plan = suite(True, 1000)
    s4 = next(s for s in plan.streaming if s.name == "S4")
    small = next(s for s in plan.pandas if s.name == "S4")
    runs = {s.name: [Outcome([(10, 100, 1, 1)] * len(s4.batches))] for s in s4.systems}
    runs[TWS_PANDAS_TIMERS.name] = [Outcome([(1, 900, 1, 0)] * len(small.batches))]
    rows = _rows(s4, small, plan.pandas_scale, runs)
    assert len(rows) == len(s4.systems) * len(s4.phases)
    pandas = [r for r in rows if r.system == TWS_PANDAS_TIMERS.name]
    assert [r.scaled for r in pandas] == [plan.pandas_scale] * 3
    assert all(r.figures is not None and r.figures.records_per_s == pytest.approx(1 / 0.9)
               for r in pandas)
    assert all(r.scaled == 1.0 for r in rows if r.system != TWS_PANDAS_TIMERS.name)
