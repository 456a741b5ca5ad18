"""A running count per key over a batch DataFrame: emitted records, snapshots, and a result
that is an ordinary DataFrame."""
import pytest
from pyspark.sql import functions as F

from mapwithstate import map_with_state
from specs import running_count

pytestmark = pytest.mark.sessions("connect", "classic")


def words(spark):
    return spark.createDataFrame([("a",), ("b",), ("a",)], "word STRING")


def test_emitted_running_count(spark):
    result = map_with_state(words(spark), key="word", spec=running_count())
    assert result.columns == ["word", "n"]
    assert sorted(tuple(r) for r in result.collect()) == [("a", 1), ("a", 2), ("b", 1)]


def test_snapshots_hold_the_final_state_of_each_key(spark):
    result = map_with_state(words(spark), key="word", spec=running_count(), output="snapshots")
    assert result.columns == ["batch_time", "word", "n"]
    rows = result.collect()
    assert sorted((r.word, r.n) for r in rows) == [("a", 2), ("b", 1)]
    assert len({r.batch_time for r in rows}) == 1


def test_result_is_an_ordinary_dataframe(spark):
    result = map_with_state(words(spark), key="word", spec=running_count())
    totals = result.groupBy("word").agg(F.max("n").alias("n")).orderBy("word")
    assert [tuple(r) for r in totals.collect()] == [("a", 2), ("b", 1)]
