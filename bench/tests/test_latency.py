"""L1's bookkeeping (bench/latency.py), without Spark: which batches its per-batch figures
take and what it reads from a spark-submit pipeline's log. These numbers are made up."""
import json

from bench.latency import (BATCH_PHASES, PROGRESS_PREFIX, batch_figures, input_rows,
                           progress_in_log, started_at, state_commit_ms)


def progress(batch, second, rows, trigger, commits):
    return {"batchId": batch, "timestamp": f"2026-11-27T13:12:{second:02d}.500Z",
            "sources": [{"numInputRows": rows - rows // 3}, {"numInputRows": rows // 3}],
            "durationMs": {"triggerExecution": trigger, "addBatch": trigger - 10,
                           "queryPlanning": 4, "latestOffset": 1, "walCommit": 2,
                           "commitOffsets": 3},
            "stateOperators": [{"commitTimeMs": c} for c in commits]}


def test_batch_figures_are_medians_over_the_batches_started_in_the_window():
    batches = [progress(1, 10, 9, 900, [90]), progress(2, 11, 3000, 300, [5, 7]),
               progress(3, 12, 1000, 100, [20, 1]), progress(4, 13, 2000, 200, [6]),
               progress(5, 14, 8, 800, [80])]
    start, end = started_at(batches[1]), started_at(batches[4])
    assert end - start == 3.0 and state_commit_ms(batches[1]) == 7
    assert input_rows(batches[1]) == 3000  # over the sources: a progress may lack its total
    row = batch_figures("ours", batches, start, end)
    # batches 2-4: 3 batches, 2000 records, triggerExecution 200, addBatch 190, ...,
    # state commits (each batch's slowest) 7, 20, 6: median 7, max 20.
    assert row == "| ours | 3 | 2000 | 200 | 190 | 4 | 1 | 2 | 3 | 7 / 20 |", row
    assert row.count("|") == len(BATCH_PHASES) + 5
    empty = batch_figures("theirs", batches, end + 10, end + 20)
    assert empty.startswith("| theirs | 0 |") and empty.count("|") == row.count("|"), empty


def test_a_batch_without_a_state_commit_has_none():
    stateless = {**progress(1, 10, 5, 50, []), "stateOperators": []}
    assert state_commit_ms(stateless) is None
    row = batch_figures("floor", [stateless], 0, started_at(stateless) + 1)
    assert row.endswith("| – / – |"), row


def test_the_progress_a_submitted_pipeline_logs_is_read_back(tmp_path):
    log = tmp_path / "spark-submit.log"
    first, second = progress(7, 10, 5, 50, [3]), progress(8, 11, 6, 60, [4])
    log.write_text("26/11/27 13:14:37 WARN ResolveWriteToStream: something\n"
                   f"{PROGRESS_PREFIX}{json.dumps(first)}\n"
                   "an unrelated line with mapwithstate-progress inside it\n"
                   f"{PROGRESS_PREFIX}{json.dumps(second)}\n")
    assert progress_in_log(str(log)) == [first, second]
