"""Expressions a state function cannot run are refused when the query is planned, naming the
argument and the expression, saying why and what to write instead (docs/errors.md,
MAPWITHSTATE_UNSUPPORTED_EXPRESSION.*), for both operators and on both session kinds. Without
the check each failed every task with Spark's "Cannot evaluate expression"."""
import pandas as pd
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import Window
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from errors import assert_still_serving, words

pytestmark = pytest.mark.sessions("connect", "classic")

operators = pytest.mark.parametrize("operator", [map_with_state, map_groups_with_state],
                                    ids=["map_with_state", "map_groups_with_state"])


def refused(spark, operator, kind, **functions):
    """The error of planning `functions` (update, emit, ...) as a state function; it must be the
    condition of `kind`, and name the argument given first."""
    functions.setdefault("emit", F.struct(F.col("word")))
    spec = StateSpec.function("n BIGINT", **functions)
    with pytest.raises(PySparkException) as info:
        operator(words(spark), key="word", spec=spec).collect()
    error = info.value
    message = str(error)
    assert error.getCondition() == f"MAPWITHSTATE_UNSUPPORTED_EXPRESSION.{kind}", message
    argument = next(iter(functions))
    assert error.getMessageParameters()["argument"] == argument, message
    assert message.startswith(
        f"[MAPWITHSTATE_UNSUPPORTED_EXPRESSION.{kind}] {argument}: "), message
    assert "Cannot evaluate expression" not in message
    assert_still_serving(spark)
    return message


def plus_one(v):
    return v + 1


@operators
def test_a_python_udf_in_update(spark, operator):
    udf = F.udf(plus_one, "bigint")
    count = F.lit(1) if operator is map_with_state else F.count("*")
    message = refused(spark, operator, "PYTHON_UDF",
                      update=F.struct(udf(F.coalesce(S.state("n"), count)).alias("n")))
    assert "plus_one(" in message and "no Python runs in a state function" in message
    assert "pyspark.sql.functions" in message and "column of the input DataFrame" in message


@operators
def test_a_pandas_udf_in_emit(spark, operator):
    @F.pandas_udf("string")
    def shout(s: pd.Series) -> pd.Series:
        return s.str.upper()

    message = refused(spark, operator, "PYTHON_UDF", emit=F.struct(shout(F.col("word"))))
    assert "shout(" in message


def test_a_python_udf_in_remove_and_timeout_at(spark):
    is_b = F.udf(lambda w: w == "b", "boolean")
    refused(spark, map_with_state, "PYTHON_UDF", remove=is_b(F.col("word")))
    later = F.udf(lambda t: t, "timestamp")
    refused(spark, map_with_state, "PYTHON_UDF", timeout_at=later(S.batch_time()))


def test_a_python_udf_inside_a_group_functions_aggregate(spark):
    udf = F.udf(plus_one, "int")
    message = refused(spark, map_groups_with_state, "PYTHON_UDF",
                      update=F.struct(F.sum(udf(F.col("x"))).cast("bigint").alias("n")))
    assert "plus_one(x)" in message


def test_a_pandas_aggregate_udf_in_a_group_function(spark):
    @F.pandas_udf("bigint")
    def total(v: pd.Series) -> int:
        return int(v.sum())

    refused(spark, map_groups_with_state, "PYTHON_UDF", update=F.struct(total("x").alias("n")))


@operators
def test_a_generator_in_emit(spark, operator):
    message = refused(spark, operator, "GENERATOR",
                      emit=F.struct(F.explode(F.array(F.lit(1), F.lit(2))).alias("v")))
    assert "explode(" in message and "array of structs" in message


@operators
def test_a_window_function_in_update(spark, operator):
    lag = F.lag("x").over(Window.partitionBy("word").orderBy("x"))
    message = refused(spark, operator, "WINDOW_FUNCTION",
                      update=F.struct(lag.cast("bigint").alias("n")))
    assert "lag(" in message and "keep what it needs in the state" in message


def test_an_aggregate_in_a_per_record_function(spark):
    message = refused(spark, map_with_state, "AGGREGATE",
                      update=F.struct(F.count("*").alias("n")))
    assert "count(" in message and "map_groups_with_state" in message


def test_a_nondeterministic_common_expression(spark):
    refused(spark, map_with_state, "NONDETERMINISTIC",
            update=F.struct(F.nullif(F.rand(), F.lit(0.5)).cast("bigint").alias("n")))


@operators
def test_a_scalar_subquery(spark, operator):
    most = spark.range(3).select(F.max("id")).scalar()
    message = refused(spark, operator, "UNEVALUABLE", update=F.struct(most.alias("n")))
    assert "column of the input DataFrame" in message


def test_python_udfs_before_and_after_the_state_function_run(spark):
    # What the messages advise: the UDF computes an input column, and one in the output's
    # columns runs too (both are Spark's own projections).
    udf = F.udf(lambda v: v + 1, "int", useArrow=False)
    df = words(spark).withColumn("x1", udf(F.col("x")))
    spec = StateSpec.function(
        "n BIGINT", update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.col("x1"))
                                    .alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    out = map_with_state(df, key="word", value="x1", spec=spec).withColumn("m", udf("n"))
    assert sorted(tuple(r) for r in out.collect()) == [("a", 2, 3), ("a", 6, 7), ("b", 3, 4)]


@operators
def test_a_python_udf_in_the_initial_state_runs(spark, operator):
    # The initial state is a DataFrame Spark plans as any other: its UDFs run, nothing to refuse.
    udf = F.udf(lambda v: v * 10, "bigint", useArrow=False)
    init = spark.createDataFrame([("a", 1)], "word STRING, m BIGINT") \
        .select("word", udf("m").alias("n"))
    spec = StateSpec.function(
        "n BIGINT", update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    out = operator(words(spark), key="word", spec=spec.initial_state(init),
                   output="snapshots").drop("batch_time")
    # a has two records: one call each, or one call for the batch in a group function
    a = 12 if operator is map_with_state else 11
    assert sorted(tuple(r) for r in out.collect()) == [("a", a), ("b", 1)]
