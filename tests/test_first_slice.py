"""The first vertical slice: a running count per key over a static DataFrame."""
import pytest
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S

pytestmark = pytest.mark.sessions("connect", "classic")


def running_count() -> StateSpec:
    return StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")),
    )


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
