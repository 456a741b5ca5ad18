"""Errors carry a condition a caller can match (docs/errors.md), on Connect and classic sessions.

Each test makes the error through the public API and checks what PySpark exposes:
``getCondition()``, ``getSqlState()``, ``getMessageParameters()`` and the message, which starts
with the condition in brackets and keeps its words."""
from datetime import datetime

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from errors import assert_still_serving, words
from raw_relation import dataframe as raw_dataframe
from raw_relation import message_of
from specs import running_count

pytestmark = pytest.mark.sessions("connect", "classic")


def error_of(build) -> PySparkException:
    """The error of building and running a query: a classic session raises it while the plan
    is made, a Connect session at the first action."""
    with pytest.raises(PySparkException) as info:
        build().collect()
    return info.value


def assert_condition(error: PySparkException, condition: str, sql_state: str) -> str:
    message = str(error)
    assert error.getCondition() == condition, message
    assert error.getSqlState() == sql_state, message
    parameters = error.getMessageParameters()
    assert message.startswith(f"[{condition}] {parameters['message']}"), message
    return message


def count_spec(**kwargs) -> StateSpec:
    return StateSpec.function(
        "n BIGINT", update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")), **kwargs)


@pytest.mark.connect_only
def test_a_state_schema_the_server_refuses_carries_its_condition(spark):
    # This client refuses a bad schema itself, with no round trip (tests/test_errors.py); the
    # request of another client reaches the server, whose refusal carries the condition.
    message = message_of(map_with_state(words(spark), key="word", spec=running_count()))
    message.spec.state_schema_ddl = "n BIGINTT"
    error = error_of(lambda: raw_dataframe(spark, message.SerializeToString()))
    message_text = assert_condition(error, "MAPWITHSTATE_INVALID_STATE_SCHEMA", "42601")
    assert "state_schema: 'n BIGINTT' is not a valid schema" in message_text
    assert_still_serving(spark)


@pytest.mark.parametrize("spec, condition, sql_state, words_", [
    (lambda: StateSpec.function("n BIGINT", remove=F.lit(1), emit=F.struct(F.col("word"))),
     "MAPWITHSTATE_TYPE_MISMATCH", "42K09", "remove must be a BOOLEAN"),
    (lambda: count_spec(timeout_at=S.batch_time()).timeout("10 seconds"),
     "MAPWITHSTATE_CONFLICTING_ARGUMENTS", "42613", "cannot be used together"),
    (lambda: StateSpec.function("n BIGINT", update=F.struct(S.new_state("n").alias("n")),
                                emit=F.struct(F.col("word"))),
     "MAPWITHSTATE_NEW_STATE_BEFORE_UPDATE", "42K0E", "update uses new_state()"),
    (lambda: running_count().num_partitions(0), "MAPWITHSTATE_INVALID_ARGUMENT", "22023",
     "num_partitions must be a positive number, got 0"),
])
def test_request_errors_carry_their_condition(spark, spec, condition, sql_state, words_):
    error = error_of(lambda: map_with_state(words(spark), key="word", spec=spec()))
    assert words_ in assert_condition(error, condition, sql_state)
    assert_still_serving(spark)


def test_an_unknown_column_names_the_argument_and_sparks_condition(spark):
    spec = StateSpec.function("n BIGINT", update=F.struct(F.col("missing_col").alias("n")),
                              emit=F.struct(F.col("word")))
    error = error_of(lambda: map_with_state(words(spark), key="word", spec=spec))
    message = assert_condition(error, "MAPWITHSTATE_ANALYSIS_FAILED", "42000")
    assert message.startswith("[MAPWITHSTATE_ANALYSIS_FAILED] update: ")
    assert "missing_col" in message
    parameters = error.getMessageParameters()
    assert parameters["argument"] == "update"
    assert parameters["sparkCondition"] == "UNRESOLVED_COLUMN.WITH_SUGGESTION"


def test_a_key_both_key_and_value_is_a_duplicate_column(spark):
    error = error_of(lambda: map_with_state(words(spark), key="word", value=["word", "x"],
                                            spec=running_count()))
    assert "'word' is both a key and a value column" in assert_condition(
        error, "MAPWITHSTATE_DUPLICATE_COLUMN", "42711")


def test_an_input_column_with_the_reserved_prefix(spark):
    df = words(spark).withColumnRenamed("x", "__mws_x")
    error = error_of(lambda: map_with_state(df, key="word", spec=running_count()))
    assert "'__mws_x'" in assert_condition(error, "MAPWITHSTATE_RESERVED_COLUMN_NAME", "42939")


def test_an_initial_state_without_the_state_fields(spark):
    init = spark.createDataFrame([("a",)], "word STRING")
    error = error_of(lambda: map_with_state(words(spark), key="word",
                                            spec=running_count().initial_state(init)))
    assert "initial_state has no column 'n'" in assert_condition(
        error, "MAPWITHSTATE_INITIAL_STATE_MISMATCH", "42K09")


@pytest.mark.parametrize("update, condition, sql_state", [
    (lambda: F.col("x"), "MAPWITHSTATE_MISSING_AGGREGATION", "42803"),
    (lambda: F.sum(F.count("x")), "MAPWITHSTATE_NESTED_AGGREGATE", "42607"),
    (lambda: F.count_distinct("x"), "MAPWITHSTATE_UNSUPPORTED_AGGREGATE", "0A000"),
])
def test_group_function_errors_carry_their_condition(spark, update, condition, sql_state):
    spec = StateSpec.function("n BIGINT", update=F.struct(update().cast("bigint").alias("n")),
                              emit=F.struct(F.col("word")))
    error = error_of(lambda: map_groups_with_state(words(spark), key="word", spec=spec))
    assert_condition(error, condition, sql_state)


def test_a_request_limit_names_its_setting(spark):
    error = error_of(lambda: map_with_state(words(spark), key="word",
                                            spec=running_count().num_partitions(20000)))
    assert "spark.mapwithstate.maxNumPartitions" in assert_condition(
        error, "MAPWITHSTATE_LIMIT_EXCEEDED", "54000")


def test_a_timer_already_due_fails_a_replay_with_its_condition(spark):
    # Raised in a task: Spark raises it to the caller as it is.
    spec = StateSpec.function("n INT", update=F.struct(F.lit(5).alias("n")),
                              emit=F.struct(F.col("word")), timeout_at=S.batch_time())
    df = spark.createDataFrame([("a", datetime(2026, 1, 1))], "word STRING, ts TIMESTAMP")
    error = error_of(lambda: map_with_state(df, "word", spec, batch_time="ts"))
    assert "timeout_at of the key (a)" in assert_condition(
        error, "MAPWITHSTATE_TIMER_ALREADY_DUE", "22023")
    assert_still_serving(spark)
