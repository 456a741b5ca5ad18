"""Several map_with_state / map_groups_with_state operators in one streaming query.

As Spark allows several flatMapGroupsWithState in append mode, each operator keeps its own
state (``state/1000``, ``state/1001``... in the checkpoint, numbered from the sources on), runs
across micro-batches and restarts, and is read back with ``read_state(operator_id=...)``;
update and complete mode refuse them at ``start()``, with Spark's words.
"""
import os

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate import map_groups_with_state, map_with_state
from specs import running_count, running_sum
from streams import Stream, run_memory

pytestmark = pytest.mark.sessions("connect", "classic")


def chained(source):
    """A running count per word, then a running count of those counts (as strings): the
    second operator reads the first one's rows."""
    counts = map_with_state(source, "word", running_count())
    return map_with_state(counts.select(F.col("n").cast("string").alias("word")), "word",
                          running_count())


def unioned(source):
    """Beside each other over one source: a running count per word (the left side), and per
    upper-cased word ten times its records so far, as a group function."""
    upper = source.select(F.upper("word").alias("word"))
    return map_with_state(source, "word", running_count()).unionByName(
        map_groups_with_state(upper, "word", running_sum(F.count("*") * 10)))


def operator_dirs(stream):
    return sorted(os.listdir(os.path.join(stream.checkpoint, "state")))


def state_of(df):
    return {r.word: r.n for r in df.select("word", "n").collect()}


@pytest.mark.backends("rocksdb")
def test_chained_operators_keep_their_own_state_across_batches_and_a_restart(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.add("a", "c")
    query = stream.run_available_now(chained(stream.read(spark)))
    # The first counts a 1, 2, 3, b 1, c 1; the second counts those counts.
    assert stream.results(spark) == [("1", 1), ("1", 2), ("1", 3), ("2", 1), ("3", 1)]
    assert sorted(p["numRowsTotal"] for p in query.lastProgress["stateOperators"]) == [3, 3]
    assert operator_dirs(stream) == ["1000", "1001"]
    stream.add("b", "a")
    stream.add("d")
    stream.run_available_now(chained(stream.read(spark)))
    # After the restart both go on: b 2, a 4, d 1, so counts 2, 4 and 1 are seen once more.
    assert stream.results(spark) == [("1", 1), ("1", 2), ("1", 3), ("1", 4), ("2", 1),
                                     ("2", 2), ("3", 1), ("4", 1)]


@pytest.mark.connect_only  # read_state is Connect's
def test_unioned_operators_keep_their_own_state_across_batches_and_a_restart(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.add("a")
    query = stream.run_available_now(unioned(stream.read(spark)))
    assert sorted(p["operatorName"] for p in query.lastProgress["stateOperators"]) == \
        ["flatMapGroupsWithState", "mapWithState"]
    stream.add("b")
    stream.run_available_now(unioned(stream.read(spark)))
    assert stream.results(spark) == [("A", 20), ("A", 30), ("B", 10), ("B", 20),
                                     ("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)]
    # The left side's operator is the first.
    assert state_of(mws.read_state(spark, stream.checkpoint, operator_id=1000)) == \
        {"a": 3, "b": 2}
    assert state_of(mws.read_state(spark, stream.checkpoint, operator_id=1001)) == \
        {"A": 30, "B": 20}


@pytest.mark.connect_only
def test_read_state_of_each_operator_and_the_error_without_operator_id(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    stream.add("a", "c")
    stream.run_available_now(chained(stream.read(spark)))
    checkpoint = stream.checkpoint
    assert state_of(mws.read_state(spark, checkpoint, operator_id=1000)) == \
        {"a": 3, "b": 1, "c": 1}
    assert state_of(mws.read_state(spark, checkpoint, operator_id=1001)) == \
        {"1": 3, "2": 1, "3": 1}
    assert state_of(mws.read_state(spark, checkpoint, batch_id=0, operator_id=1001)) == \
        {"1": 2, "2": 1}
    changes = mws.read_state_changes(spark, checkpoint, start_batch=1, operator_id=1001)
    assert sorted((r.batch_id, r.change, r.word, r.n) for r in changes.collect()) == \
        [(1, "update", "1", 3), (1, "update", "3", 1)]

    several = r"holds the state of 2 map_with_state operators \(1000, 1001\): pass operator_id"
    with pytest.raises(PySparkException, match=several):
        mws.read_state(spark, checkpoint).schema
    with pytest.raises(PySparkException, match=several):
        mws.read_state_changes(spark, checkpoint, start_batch=0).schema
    with pytest.raises(PySparkException, match=r"operator_id 1002 is not a map_with_state "
                                               r"operator of checkpoint .*; its map_with_state "
                                               r"operators are 1000, 1001"):
        mws.read_state(spark, checkpoint, operator_id=1002).schema
    with pytest.raises(TypeError, match=r"operator_id must be an int, got str"):
        mws.read_state(spark, checkpoint, operator_id="1000")
    with pytest.raises(ValueError, match=r"operator_id must be >= 0, got -1"):
        mws.read_state_changes(spark, checkpoint, start_batch=0, operator_id=-1)


@pytest.mark.connect_only
def test_read_state_names_a_spark_operator_given_as_operator_id(spark, tmp_path):
    # A streaming aggregation over map_with_state's rows: Spark's operator 0 beside ours.
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    counted = map_with_state(stream.read(spark), "word", running_count()).groupBy("word").count()
    run_memory(counted, "mws_multi_with_aggregation", stream.checkpoint, mode="complete")
    assert state_of(mws.read_state(spark, stream.checkpoint)) == {"a": 2, "b": 1}
    with pytest.raises(PySparkException, match=r"operator_id 0 is not a map_with_state "
                                               r"operator of checkpoint .* \(it is one of "
                                               r"Spark's stateful operators\); its "
                                               r"map_with_state operators are 1000"):
        mws.read_state(spark, stream.checkpoint, operator_id=0).schema


@pytest.mark.parametrize("mode", ["update", "complete"])
def test_several_operators_outside_append_mode_are_refused_at_start(spark, tmp_path, mode):
    stream = Stream(str(tmp_path))
    stream.add("a")
    result = unioned(stream.read(spark))
    if mode == "complete":
        result = result.groupBy("word").count()  # complete mode needs an aggregation after
    with pytest.raises(PySparkException,
                       match=rf"this one has 2 \(map_with_state, map_groups_with_state\) in "
                             rf"outputMode\('{mode}'\).*Multiple flatMapGroupsWithStates are "
                             r"not supported when they are not all in append mode or the "
                             r"output mode is not append on a streaming DataFrames/Datasets"):
        run_memory(result, f"mws_multi_{mode}", stream.checkpoint, mode=mode)
    assert not os.path.exists(os.path.join(stream.checkpoint, "state"))
