"""Spark's functions inside a state function's Columns, beyond plain arithmetic: those Spark's
optimizer rewrites before a projection runs (``ifnull``, ``nvl``, ``nvl2``, ``nullif``,
``to_date``, ``left``, ``try_add``, ``timestamp - interval``, ``withField``,
``current_user()``, and the aggregates ``count_if``, ``bool_and``, ``median``), which the
plugin compiles without going through that optimizer. Each once failed the task."""
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S

pytestmark = pytest.mark.sessions("connect", "classic")


def clicks(spark):
    return spark.createDataFrame(
        [("a", "2026-01-02", 1), ("a", "2026-01-03", 2), ("b", "2026-01-04", 3)],
        "word STRING, d STRING, v INT")


def test_replaced_functions_in_a_per_record_function(spark):
    count = F.nvl(S.state("n"), F.lit(0).cast("bigint"))
    spec = StateSpec.function(
        "n BIGINT, last_day INT",
        update=F.struct(F.try_add(F.ifnull(S.state("n"), F.lit(0).cast("bigint")),
                                  F.lit(1).cast("bigint")).alias("n"),
                        F.dayofmonth(F.to_date("d")).alias("last_day")),
        remove=F.nvl2(S.state("n"), count > 5, F.lit(False)),
        emit=F.struct(
            F.col("word"),
            S.new_state("n").alias("n"),
            F.nullif(S.new_state("n"), F.lit(1).cast("bigint")).alias("not_first"),
            F.expr("left(word, 1)").alias("initial"),
            S.new_state("last_day").alias("day"),
            F.struct(S.new_state("n").alias("n")).withField("n", S.new_state("n") * 10)
                .getField("n").alias("tens"),
            (F.length(F.current_user()) > 0).alias("has_user"),
            F.second(F.expr("timestamp'2026-01-01 00:00:10' - INTERVAL 4 SECONDS"))
                .alias("six")))
    rows = map_with_state(clicks(spark), key="word", value=["d", "v"], order_by="v",
                          spec=spec).collect()
    assert sorted(tuple(r) for r in rows) == [
        ("a", 1, None, "a", 2, 10, True, 6),
        ("a", 2, 2, "a", 3, 20, True, 6),
        ("b", 1, None, "b", 4, 10, True, 6),
    ]


def test_replaced_functions_in_a_timer(spark):
    # Two batches of one key: the second call sees the timer the first one set.
    df = spark.createDataFrame([("a", "2026-01-01 00:00:00"), ("a", "2026-01-01 00:00:01")],
                               "word STRING, t STRING").withColumn("t", F.col("t").cast("timestamp"))
    spec = StateSpec.function(
        "n BIGINT", update=F.struct(F.lit(1).cast("bigint").alias("n")),
        emit=F.struct(F.col("word"), S.batch_time().alias("batch"), S.timeout_at().alias("timer")),
        timeout_at=S.batch_time() - F.expr("INTERVAL -10 SECONDS"))
    rows = map_groups_with_state(df, "word", spec, batch_time="t").collect()
    assert sorted((r.batch.isoformat(), r.timer and r.timer.isoformat()) for r in rows) == [
        ("2026-01-01T00:00:00", None), ("2026-01-01T00:00:01", "2026-01-01T00:00:10")]


def test_replaced_aggregates_in_a_group_function(spark):
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct(F.ifnull(F.sum("v"), F.lit(0)).cast("bigint").alias("n")),
        emit=F.struct(F.col("word"), F.count_if(F.col("v") > 1).alias("over_one"),
                      F.bool_and(F.col("v") > 1).alias("all_over_one"),
                      F.median("v").alias("median"), S.new_state("n").alias("n")))
    rows = map_groups_with_state(clicks(spark), "word", spec).collect()
    assert sorted(tuple(r) for r in rows) == [("a", 1, False, 1.5, 3), ("b", 1, True, 3.0, 3)]


def test_a_nondeterministic_common_expression_is_refused(spark):
    spec = StateSpec.function(
        "n BIGINT", update=F.struct(F.lit(1).cast("bigint").alias("n")),
        emit=F.struct(F.col("word"), F.nullif(F.rand(1), F.lit(0.5)).alias("r")))
    with pytest.raises(PySparkException, match=r"emit: rand\(1L?\) is nondeterministic and used "
                                               r"more than once .*compute it in a column"):
        map_with_state(clicks(spark), key="word", spec=spec).collect()
