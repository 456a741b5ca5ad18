"""A spec's Columns and initial state must be of the DataFrame's session kind: mixing a classic
Column into a Spark Connect request, or a Connect one into a classic request, is a TypeError
raised by the public function itself, naming the argument, for both map_with_state and
map_groups_with_state. Each test holds both sessions (the Connect server and a classic JVM in
this process), as a program that mixes them would."""
import pytest
from pyspark.sql.connect import functions as CF

from mapwithstate import StateSpec, map_groups_with_state, map_with_state

# pyspark makes Connect Columns while it is set (conftest.py's fixtures set it per session kind).
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"

FUNCTIONS = {"map_with_state": map_with_state, "map_groups_with_state": map_groups_with_state}


def classic_column(classic_spark, monkeypatch):
    """A classic Column, made while pyspark is in classic mode (as a classic program makes it)."""
    from pyspark.sql import functions as F
    from pyspark.sql.classic.column import Column as ClassicColumn

    with monkeypatch.context() as classic_mode:
        classic_mode.delenv(CONNECT_MODE, raising=False)
        column = F.struct(F.lit(1).cast("bigint").alias("n"))
    assert isinstance(column, ClassicColumn)
    return column


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
@pytest.mark.parametrize("field", ["update", "emit", "timeout_at"])
def test_a_classic_column_in_a_connect_spec_is_a_type_error(
        connect_spark, classic_spark, monkeypatch, function, field):
    monkeypatch.setenv(CONNECT_MODE, "1")
    column = classic_column(classic_spark, monkeypatch)
    spec = StateSpec.function("n BIGINT", **{field: column})
    df = connect_spark.createDataFrame([("a",)], "word STRING")
    with pytest.raises(TypeError, match=rf"spec.{field} is a classic Column, but the DataFrame "
                                        r"is a Spark Connect one"):
        FUNCTIONS[function](df, key="word", spec=spec, output="snapshots")


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_a_classic_key_or_initial_state_in_a_connect_request_is_a_type_error(
        connect_spark, classic_spark, monkeypatch, function):
    monkeypatch.setenv(CONNECT_MODE, "1")
    spec = StateSpec.function("n BIGINT", update=CF.struct(CF.lit(1).cast("bigint").alias("n")))
    df = connect_spark.createDataFrame([("a",)], "word STRING")
    with pytest.raises(TypeError, match=r"key is a classic Column"):
        FUNCTIONS[function](df, key=classic_spark.range(1).id, spec=spec, output="snapshots")
    initial = spec.initial_state(classic_spark.createDataFrame([("a", 1)], "word STRING, n BIGINT"))
    with pytest.raises(TypeError, match=r"spec.initial_state is a classic DataFrame, but the "
                                        r"DataFrame is a Spark Connect one"):
        FUNCTIONS[function](df, key="word", spec=initial, output="snapshots")


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
@pytest.mark.parametrize("field", ["update", "emit", "timeout_at"])
def test_a_connect_column_in_a_classic_spec_is_a_type_error(
        connect_spark, classic_spark, monkeypatch, function, field):
    monkeypatch.delenv(CONNECT_MODE, raising=False)
    spec = StateSpec.function("n BIGINT", **{field: CF.struct(CF.lit(1).alias("n"))})
    df = classic_spark.createDataFrame([("a",)], "word STRING")
    with pytest.raises(TypeError, match=rf"spec.{field} is a Spark Connect Column, but the "
                                        r"DataFrame is a classic one"):
        FUNCTIONS[function](df, key="word", spec=spec, output="snapshots")


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_a_connect_initial_state_in_a_classic_request_is_a_type_error(
        connect_spark, classic_spark, monkeypatch, function):
    from pyspark.sql import functions as F

    monkeypatch.delenv(CONNECT_MODE, raising=False)
    spec = (StateSpec.function("n BIGINT", update=F.struct(F.lit(1).cast("bigint").alias("n")))
            .initial_state(connect_spark.createDataFrame([("a", 1)], "word STRING, n BIGINT")))
    df = classic_spark.createDataFrame([("a",)], "word STRING")
    with pytest.raises(TypeError, match=r"spec.initial_state is a Spark Connect DataFrame, but "
                                        r"the DataFrame is a classic one"):
        FUNCTIONS[function](df, key="word", spec=spec, output="snapshots")
