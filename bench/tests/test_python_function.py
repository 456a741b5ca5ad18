"""The bench's Python state function (bench/python_function.py) against the Column spec it is
measured beside: the same settings, the same output, the same rows and state through the
real plugin, and the same values from its compiled Columns for every kind of stored count;
and the adapters that run its source in PySpark's Python operators emit what it emits. Runs on
the test session's local Connect server with the plugin jar (``mapwithstate.jar_path()``),
tests/shared_server.py's, started here when no test of tests/ started it."""
from typing import Iterator

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql import types as T

import mapwithstate as mws
from bench import connect_systems, python_function
from mapwithstate import StateSpec
from mapwithstate import functions as S
from shared_server import shared_server

STATE = S.RESERVED_COLUMNS["state"]
NEW_STATE = S.RESERVED_COLUMNS["new_state"]


def _call_columns():
    """The other columns a state function may read, as a record's call without a timer has
    them (built once a session exists: Connect Columns need one)."""
    return {"state_exists": F.col(STATE).isNotNull(), "is_timing_out": F.lit(False),
            "batch_time": F.lit("2026-01-01 00:00:00").cast("timestamp"),
            "timeout_at": F.lit(None).cast("timestamp"),
            "watermark": F.lit(None).cast("timestamp")}


@pytest.fixture(scope="module")
def spark() -> Iterator:
    with shared_server() as server:
        session = server.session()
        yield session
        session.stop()


def _specs(spark):
    df = spark.createDataFrame([], connect_systems.SCHEMA)
    python = python_function.running_count.timeout(connect_systems.IDLE_TIMEOUT)
    return df, python.compiled(df, "key"), connect_systems.running_count()


def test_compiled_spec_keeps_the_column_specs_settings(spark):
    _, compiled, column = _specs(spark)
    functions = {"update", "remove", "emit", "timeout_at"}
    for name in StateSpec.__dataclass_fields__:
        if name not in functions | {"state_schema"}:
            assert getattr(compiled, name) == getattr(column, name), name
    schemas = [s if isinstance(s, T.StructType) else spark.createDataFrame([], s).schema
               for s in (compiled.state_schema, column.state_schema)]
    assert schemas[0] == schemas[1]
    assert compiled.timeout_at is None and column.timeout_at is None


def test_compiled_columns_compute_what_the_column_specs_do(spark):
    """update, then emit over the new state, for a key without state and stored counts of
    every sign; neither has a remove (the function never removes). Where the count overflows
    both fail."""
    df, compiled, column = _specs(spark)
    state = T.StructType([T.StructField("n", T.LongType())])
    counts = [None, 0, 1, -1, -7, 41, 2**62]
    rows = [(i, 10 * i, None if n is None else (n,)) for i, n in enumerate(counts)]
    states = spark.createDataFrame(rows, T.StructType(
        [T.StructField("key", T.LongType()), T.StructField("value", T.LongType()),
         T.StructField(STATE, state)]))
    states = states.select("*", *[c.alias(S.RESERVED_COLUMNS[n]) for n, c in _call_columns().items()])

    def run(spec: StateSpec):
        updated = states.withColumn(NEW_STATE, spec.update)
        columns = [F.col(NEW_STATE).alias("new"), spec.emit.alias("emit")]
        if spec.remove is not None:
            columns.append(spec.remove.alias("remove"))
        return updated.select(*columns).orderBy(F.col("emit.key")).collect()

    mine, theirs = run(compiled), run(column)
    assert [(r["new"], r["emit"]) for r in mine] == [(r["new"], r["emit"]) for r in theirs]
    assert [r["emit"]["count"] for r in theirs] == [1, 1, 2, 0, -6, 42, 2**62 + 1]
    assert compiled.remove is None and column.remove is None

    overflow = states.where(F.col("key") == 0).withColumn(
        STATE, F.struct(F.lit(2**63 - 1).cast("bigint").alias("n")))
    for spec in (compiled, column):
        with pytest.raises(PySparkException):
            overflow.select(spec.update.alias("u")).collect()


def test_both_specs_give_the_same_rows_and_state_through_the_plugin(spark):
    records = [(k % 3, k) for k in range(10)] + [(7, 0)]
    df = spark.createDataFrame(records, connect_systems.SCHEMA)
    python = python_function.running_count.timeout(connect_systems.IDLE_TIMEOUT)
    results = []
    for spec in (python, connect_systems.running_count()):
        emitted = mws.map_with_state(df, key="key", spec=spec)
        snapshots = mws.map_with_state(df, key="key", spec=spec, output="snapshots")
        assert emitted.columns == ["key", "count"]
        results.append((sorted(tuple(r) for r in emitted.collect()),
                        sorted(tuple(r) for r in snapshots.select("key", "n").collect())))
    assert results[0] == results[1]
    assert results[0][0][:4] == [(0, 1), (0, 2), (0, 3), (0, 4)]


def test_the_peers_adapter_calls_the_function_with_the_keys_state():
    calls = python_function.KeyCalls(python_function.running_count.python,
                                     python_function.STATE_SCHEMA, (4,))
    assert calls.record({"key": 9, "value": 1}) == [{"key": 9, "count": 5}]
    assert calls.record({"key": 9, "value": 2}) == [{"key": 9, "count": 6}]
    assert calls.stored() == (6,)
    fresh = python_function.KeyCalls(python_function.running_count.python,
                                     python_function.STATE_SCHEMA, None)
    assert fresh.stored() is None
    assert fresh.record({"key": 1, "value": 0}) == [{"key": 1, "count": 1}]
