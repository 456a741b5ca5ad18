"""What the error tests share: a small input, the error a query raises, and the check that
the session still answers a normal query afterwards."""
import pytest
from pyspark.errors import PySparkException

from mapwithstate import map_with_state
from specs import running_count


def words(spark):
    return spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "word STRING, x INT")


def error_of(df) -> str:
    with pytest.raises(PySparkException) as info:
        df.collect()
    return str(info.value)


def assert_still_serving(spark):
    result = map_with_state(words(spark), key="word", value="x", spec=running_count())
    assert sorted(tuple(r) for r in result.collect()) == [("a", 1), ("a", 2), ("b", 1)]
