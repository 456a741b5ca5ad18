"""The benchmark harness's bookkeeping (bench/), without Spark: that a run's batches become the
table rows the suite promises. Timings are never asserted; these numbers are made up."""
from bench import report
from bench.measure import figures, per_file
from bench.scenarios import WARMUP, suite


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
