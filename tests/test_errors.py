"""Bad input gets a clear error naming the problem, and the server keeps serving."""
import pytest
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from errors import assert_still_serving, error_of, words
from raw_relation import dataframe as raw_dataframe
from raw_relation import message_of
from specs import running_count


def test_bad_state_schema(spark):
    # The client refuses it itself, without a round trip (tests/test_ddl.py has the parser's
    # cases)...
    with pytest.raises(ValueError, match=r"state_schema: 'n BIGINTT' is not a valid schema: at "
                                         r"position 2, 'BIGINTT' is not a data type"):
        running_count("n BIGINTT")
    # ... and the server too, when another client sends it.
    message = message_of(map_with_state(words(spark), key="word", spec=running_count()))
    message.spec.state_schema_ddl = "n BIGINTT"
    message = error_of(raw_dataframe(spark, message.SerializeToString()))
    assert "state_schema" in message and "n BIGINTT" in message
    assert_still_serving(spark)


def test_missing_key_column(spark):
    message = error_of(map_with_state(words(spark), key="nope", spec=running_count()))
    assert "key" in message and "nope" in message
    assert_still_serving(spark)


def test_update_that_is_not_a_struct(spark):
    spec = StateSpec.function("n BIGINT", update=F.lit(1), emit=F.struct(F.col("word")))
    message = error_of(map_with_state(words(spark), key="word", spec=spec))
    assert "update must be a struct" in message and "n BIGINT" in message
    assert_still_serving(spark)


def test_update_with_a_field_the_state_does_not_have(spark):
    spec = StateSpec.function("n BIGINT", update=F.struct(F.lit(1).alias("m")),
                              emit=F.struct(F.col("word")))
    message = error_of(map_with_state(words(spark), key="word", spec=spec))
    assert "'n' is missing" in message and "m" in message


def test_update_narrowing_a_field_is_refused(spark):
    spec = StateSpec.function("n INT", update=F.struct(F.lit(1).cast("bigint").alias("n")),
                              emit=F.struct(F.col("word")))
    message = error_of(map_with_state(words(spark), key="word", spec=spec))
    assert "field 'n' is BIGINT" in message and "INT" in message


def test_remove_must_be_boolean(spark):
    spec = StateSpec.function("n BIGINT", remove=F.lit(1), emit=F.struct(F.col("word")))
    message = error_of(map_with_state(words(spark), key="word", spec=spec))
    assert "remove must be a BOOLEAN" in message


def test_emit_must_be_a_struct(spark):
    spec = StateSpec.function("n BIGINT", emit=F.col("word"))
    message = error_of(map_with_state(words(spark), key="word", spec=spec))
    assert "emit must be a struct" in message


def test_new_state_outside_emit(spark):
    spec = StateSpec.function("n BIGINT", update=F.struct(S.new_state("n").alias("n")),
                              emit=F.struct(F.col("word")))
    message = error_of(map_with_state(words(spark), key="word", spec=spec))
    assert "new_state" in message and "update" in message


def test_unknown_column_in_update_names_the_expression(spark):
    spec = StateSpec.function("n BIGINT", update=F.struct(F.col("missing_col").alias("n")),
                              emit=F.struct(F.col("word")))
    message = error_of(map_with_state(words(spark), key="word", spec=spec))
    assert message.count("update") >= 1 and "missing_col" in message


def test_emitted_output_needs_emit(spark):
    spec = StateSpec.function("n BIGINT", update=F.struct(F.lit(1).cast("bigint").alias("n")))
    message = error_of(map_with_state(words(spark), key="word", spec=spec))
    assert "emit" in message and "snapshots" in message


def test_non_positive_num_partitions(spark):
    message = error_of(map_with_state(words(spark), key="word", spec=running_count().num_partitions(0)))
    assert "num_partitions must be a positive number, got 0" in message


def test_bad_timeout_duration(spark):
    message = error_of(map_with_state(words(spark), key="word", spec=running_count().timeout("soon")))
    assert "timeout" in message and "'soon' is not a duration" in message


def test_python_side_type_errors(spark):
    with pytest.raises(TypeError, match="update must be a Column"):
        StateSpec.function("n BIGINT", update="n + 1")
    with pytest.raises(ValueError, match="output must be one of"):
        map_with_state(words(spark), key="word", spec=running_count(), output="everything")
    with pytest.raises(TypeError, match="needs a PySpark DataFrame"):
        map_with_state([("a",)], key="word", spec=running_count())


def test_unknown_value_column(spark):
    message = error_of(map_with_state(words(spark), key="word", value="nope", spec=running_count()))
    assert "value" in message and "nope" in message


def test_unknown_order_by_column(spark):
    message = error_of(map_with_state(words(spark), key="word", order_by="nope", spec=running_count()))
    assert "order_by" in message and "nope" in message


def test_batch_interval_needs_batch_time(spark):
    message = error_of(map_with_state(words(spark), key="word", batch_interval="1 second",
                                      spec=running_count()))
    assert "batch_interval needs batch_time" in message


def test_batch_time_must_be_a_timestamp(spark):
    message = error_of(map_with_state(words(spark), key="word", batch_time="x", spec=running_count()))
    assert "batch_time must be a TIMESTAMP column" in message and "INT" in message


def test_zero_and_negative_timeouts(spark):
    for duration in ("0 seconds", "-5 seconds"):
        message = error_of(map_with_state(words(spark), key="word",
                                          spec=running_count().timeout(duration)))
        assert "timeout must be positive" in message


def test_non_positive_checkpoint_interval(spark):
    message = error_of(map_with_state(words(spark), key="word",
                                      spec=running_count().checkpoint_interval(0)))
    assert "checkpoint_interval must be a positive number, got 0" in message


def test_initial_state_missing_a_state_field(spark):
    initial = spark.createDataFrame([("a", 1)], "word STRING, m BIGINT")
    message = error_of(map_with_state(words(spark), key="word",
                                      spec=running_count().initial_state(initial)))
    assert "initial_state has no column 'n'" in message


def test_initial_state_with_a_narrowing_type(spark):
    initial = spark.createDataFrame([("a", "1")], "word STRING, n STRING")
    message = error_of(map_with_state(words(spark), key="word",
                                      spec=running_count().initial_state(initial)))
    assert "initial_state column 'n' is STRING" in message and "BIGINT" in message


def test_initial_state_with_duplicate_keys(spark):
    initial = spark.createDataFrame([("a", 1), ("a", 2)], "word STRING, n BIGINT")
    message = error_of(map_with_state(words(spark), key="word",
                                      spec=running_count().initial_state(initial)))
    assert "initial_state has more than one row for the key (a)" in message
    # Spark's own words for it (FlatMapGroupsWithStateWithInitialStateSuite), for its users.
    assert "contained multiple rows(state) with the same key" in message
    assert_still_serving(spark)


def test_reserved_input_column_names(spark):
    df = spark.createDataFrame([("a", 1)], "word STRING, __mws_state INT")
    message = error_of(map_with_state(df, key="word", spec=running_count()))
    assert "'__mws_state'" in message and "reserved" in message


@pytest.mark.parametrize("setting, value, expected", [
    ("spark.mapwithstate.stateStore.snapshotInterval", "0", "a positive integer"),
    ("spark.mapwithstate.stateStore.snapshotDeltaRatio", "-0.5", "a number of at least 0"),
    ("spark.mapwithstate.stateStore.snapshotDeltaRatio", "half", "a number of at least 0"),
])
def test_bad_state_store_setting_names_the_setting(spark, setting, value, expected):
    spark.conf.set(setting, value)
    try:
        message = error_of(map_with_state(words(spark), key="word", spec=running_count()))
    finally:
        spark.conf.unset(setting)
    assert setting in message and expected in message and value in message
    assert_still_serving(spark)
