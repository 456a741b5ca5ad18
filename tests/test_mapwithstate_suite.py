"""Spark's MapWithStateSuite scenarios, as batch replays through the Python client.

Each DStream batch of the original is a batch of records at its own batch time, one second
apart (batch_interval="1 second", so empty batches in between run too). Outputs carry the
batch time so that they can be compared batch by batch, as the original compares its
collected outputs and state snapshots.
"""
import pytest
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from replay import batch_time, by_batch, expected_by_batch, replay_input, strip_empty_ends

pytestmark = [pytest.mark.sessions("connect", "classic"), pytest.mark.backends("rocksdb")]

COUNTS_INPUT = [[], ["a"], ["a", "b"], ["a", "b", "c"], ["a", "b"], ["a"], []]
COUNTS_STATES = [
    [],
    [("a", 1)],
    [("a", 2), ("b", 1)],
    [("a", 3), ("b", 2), ("c", 1)],
    [("a", 4), ("b", 3), ("c", 1)],
    [("a", 5), ("b", 3), ("c", 1)],
    [("a", 5), ("b", 3), ("c", 1)],
]



def running_sum():
    """sum = value.getOrElse(0) + state.getOption.getOrElse(0); state.update(sum)"""
    return F.struct(
        (F.coalesce(F.col("value"), F.lit(0)) + F.coalesce(S.state("n"), F.lit(0))).alias("n"))


def run(spark, batches, spec, **kwargs):
    df = replay_input(spark, batches)
    common = dict(key="word", value="value", spec=spec, batch_time="ts",
                  batch_interval="1 second", order_by="seq", **kwargs)
    emitted = map_with_state(df, **common).collect() if spec.emit is not None else []
    snapshots = map_with_state(df, output="snapshots", **common).collect()
    return emitted, snapshots


def snapshot_items(rows):
    return by_batch(rows, "batch_time", lambda r: (r.word, r.n))


def test_basic_operations_with_simple_api(spark):
    outputs = [[], [1], [2, 1], [3, 2, 1], [4, 3], [5], []]
    batches, outputs, states = strip_empty_ends(COUNTS_INPUT, outputs, COUNTS_STATES)
    spec = StateSpec.function(
        "n INT", update=running_sum(),
        emit=F.struct(S.batch_time().alias("t"), S.new_state("n").alias("out")))
    emitted, snapshots = run(spark, batches, spec)
    assert by_batch(emitted, "t", lambda r: r.out) == expected_by_batch(outputs)
    assert snapshot_items(snapshots) == expected_by_batch(states)


def test_basic_operations_with_advanced_api(spark):
    outputs = [[], ["aa"], ["aa", "bb"], ["aa", "bb", "cc"], ["aa", "bb"], ["aa"], []]
    batches, outputs, states = strip_empty_ends(COUNTS_INPUT, outputs, COUNTS_STATES)
    spec = StateSpec.function(
        "n INT", update=running_sum(),
        emit=F.struct(S.batch_time().alias("t"), F.repeat(F.col("word"), 2).alias("out")))
    emitted, snapshots = run(spark, batches, spec)
    assert by_batch(emitted, "t", lambda r: r.out) == expected_by_batch(outputs)
    assert snapshot_items(snapshots) == expected_by_batch(states)


def test_states_as_mapped_data(spark):
    outputs = [[], [("a", 1)], [("a", 2), ("b", 1)], [("a", 3), ("b", 2), ("c", 1)],
               [("a", 4), ("b", 3)], [("a", 5)], []]
    batches, outputs, states = strip_empty_ends(COUNTS_INPUT, outputs, COUNTS_STATES)
    spec = StateSpec.function(
        "n INT", update=running_sum(),
        emit=F.struct(S.batch_time().alias("t"), F.col("word"), S.new_state("n").alias("n")))
    emitted, snapshots = run(spark, batches, spec)
    assert by_batch(emitted, "t", lambda r: (r.word, r.n)) == expected_by_batch(outputs)
    assert snapshot_items(snapshots) == expected_by_batch(states)


def test_initial_states_with_nothing_returned_from_the_mapping_function(spark):
    initial = spark.createDataFrame([("a", 5), ("b", 10), ("c", -20), ("d", 0)],
                                    "word STRING, n INT")
    states = [
        [("a", 5), ("b", 10), ("c", -20), ("d", 0)],
        [("a", 6), ("b", 10), ("c", -20), ("d", 0)],
        [("a", 7), ("b", 11), ("c", -20), ("d", 0)],
        [("a", 8), ("b", 12), ("c", -19), ("d", 0)],
        [("a", 9), ("b", 13), ("c", -19), ("d", 0)],
        [("a", 10), ("b", 13), ("c", -19), ("d", 0)],
        [("a", 10), ("b", 13), ("c", -19), ("d", 0)],
    ]
    batches, states = strip_empty_ends(COUNTS_INPUT, states)
    spec = StateSpec.function(
        "n INT", update=running_sum(),
        # Some(output) is computed but None returned: nothing is emitted
        emit=F.when(F.lit(False), F.struct(F.col("word")))).initial_state(initial)
    emitted, snapshots = run(spark, batches, spec)
    assert emitted == []
    assert snapshot_items(snapshots) == expected_by_batch(states)


def test_state_removing(spark):
    batches = [[], ["a"], ["a", "b"], ["a", "b", "c"], ["a", "b", "c"], ["a", "b"], ["a"], []]
    removed = [[], [], ["a"], ["b"], ["a", "c"], ["b"], ["a"], []]
    states = [[], [("a", 1)], [("b", 1)], [("a", 1), ("c", 1)], [("b", 1)], [("a", 1)], [], []]
    batches, removed, states = strip_empty_ends(batches, removed, states)
    # if (state.exists) { state.remove(); Some(key) } else { state.update(value.get); None }
    spec = StateSpec.function(
        "n INT",
        update=F.struct(F.col("value").alias("n")),
        remove=S.state_exists(),
        emit=F.when(S.state_exists(), F.struct(S.batch_time().alias("t"), F.col("word"))),
    ).num_partitions(1)
    emitted, snapshots = run(spark, batches, spec)
    assert by_batch(emitted, "t", lambda r: r.word) == expected_by_batch(removed)
    assert snapshot_items(snapshots) == expected_by_batch(states)


def test_state_timing_out(spark):
    batches = [["a", "b", "c"], ["a", "b"], ["a"], [], [], ["a"]] + [["a"]] * 20
    # if (value.isDefined) state.update(1); if (state.isTimingOut) Some(key) else None
    spec = StateSpec.function(
        "n INT",
        update=F.when(F.col("value").isNotNull(), F.struct(F.lit(1).alias("n"))),
        emit=F.when(S.is_timing_out(), F.struct(F.col("word"), S.batch_time().alias("t"))),
    ).timeout("3 seconds")
    emitted, snapshots = run(spark, batches, spec)

    # b and c are returned once each, when they time out: on the 10th batch, the first full
    # scan of the state (Spark checkpoints, and scans, every 10 batch intervals)
    assert sorted(r.word for r in emitted) == ["b", "c"]
    assert {r.t for r in emitted} == {batch_time(9)}
    per_batch = snapshot_items(snapshots)
    assert any(set(items) == {("a", 1), ("b", 1), ("c", 1)} for items in per_batch.values())
    assert set(per_batch[max(per_batch)]) == {("a", 1)}
    # until the scan, the idle keys stay
    assert set(per_batch[batch_time(8)]) == {("a", 1), ("b", 1), ("c", 1)}
    assert set(per_batch[batch_time(9)]) == {("a", 1)}
