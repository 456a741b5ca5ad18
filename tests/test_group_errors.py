"""Bad group functions get a clear error naming the expression, and the server keeps serving."""
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import Window
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state
from mapwithstate import functions as S
from specs import running_sum
from streams import Stream, run_memory


def words(spark):
    return spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "word STRING, x INT")


def error_of(spark, **function) -> str:
    spec = StateSpec.function("n BIGINT", **function)
    with pytest.raises(PySparkException) as info:
        map_groups_with_state(words(spark), "word", spec).collect()
    assert_still_serving(spark)
    return str(info.value)


def assert_still_serving(spark):
    spec = StateSpec.function("n BIGINT", update=F.struct(F.count("*").alias("n")),
                              emit=F.struct(F.col("word"), F.sum("x").alias("s")))
    result = map_groups_with_state(words(spark), "word", spec)
    assert sorted(tuple(r) for r in result.collect()) == [("a", 4), ("b", 2)]


def test_a_value_column_outside_an_aggregate(spark):
    message = error_of(spark, update=F.struct(F.col("x").cast("bigint").alias("n")))
    assert "MISSING_AGGREGATION" in message and '"x"' in message and "update" in message


def test_a_value_column_beside_an_aggregate_in_emit(spark):
    message = error_of(spark, emit=F.struct(F.col("word"), F.col("x"), F.count("*").alias("c")))
    assert "MISSING_AGGREGATION" in message and '"x"' in message and "emit" in message


def test_an_aggregate_over_the_state(spark):
    message = error_of(spark, update=F.struct(F.sum(S.state("n")).alias("n")))
    assert "aggregate" in message and "__mws_state" in message and "sum" in message


def test_an_emit_that_is_neither_a_struct_nor_an_array_of_structs(spark):
    message = error_of(spark, emit=F.count("*"))
    assert "emit must be a struct" in message and "array of such structs" in message
    message = error_of(spark, emit=F.collect_list("x"))
    assert "emit must be a struct" in message and "ARRAY<INT>" in message


def test_nested_aggregates(spark):
    message = error_of(spark, update=F.struct(F.sum(F.count("*")).alias("n")))
    assert "NESTED_AGGREGATE_FUNCTION" in message and "count" in message


def test_a_window_function(spark):
    message = error_of(
        spark, update=F.struct(F.sum("x").over(Window.partitionBy("word")).alias("n")))
    assert "window" in message and "update" in message


def test_value_and_order_by_are_not_arguments(spark):
    with pytest.raises(TypeError):
        map_groups_with_state(words(spark), "word", StateSpec.function("n BIGINT"), value="x")


def test_complete_mode_is_refused_with_an_aggregation_only_before_it(spark, tmp_path):
    # An aggregation before the group function is not one after it, whose result table could
    # be written whole (test_group_functions' "streaming + aggregation").
    source = spark.readStream.schema("word STRING").json(str(tmp_path)).groupBy("word").count()
    spec = StateSpec.function("n BIGINT", update=F.struct(F.count("*").alias("n")),
                              emit=F.struct(F.col("word"), F.count("*").alias("n")))
    result = map_groups_with_state(source, "word", spec)
    with pytest.raises(PySparkException, match=r"map_groups_with_state over a stream supports "
                                               r"outputMode\('append'\) and outputMode\('update'\)"
                                               r".*not 'complete'"):
        result.writeStream.format("memory").queryName("mgws_complete").outputMode("complete") \
            .option("checkpointLocation", str(tmp_path / "ck")).start()


def test_update_mode_is_refused_with_an_aggregation_before_it(spark, tmp_path):
    # UnsupportedOperationsSuite's "flatMapGroupsWithState(Update) on streaming relation with
    # aggregation in Update mode": the aggregation emits a's count again in each micro-batch
    # that changes it, so summing the counts would give a=2 then 5 for three a's.
    stream = Stream(str(tmp_path))
    result = map_groups_with_state(stream.read(spark).groupBy("word").count(), "word",
                                   running_sum(F.sum("count")))
    with pytest.raises(PySparkException) as info:
        run_memory(result, "mgws_agg_update", stream.checkpoint, "update")
    message = str(info.value)
    assert "map_groups_with_state reads the rows of a streaming aggregation in " \
           "outputMode('update')" in message
    assert "outputMode('append') with a watermark on the aggregation's grouping" in message
    assert "flatMapGroupsWithState in update mode is not supported with aggregation" in message


def event_time_timers():
    """A count per key with an event-time timer 1 s after its latest record."""
    return StateSpec.function(
        "n BIGINT", update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.count("*"))
                                    .alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")),
        timeout_at=F.max("event") + F.expr("INTERVAL 1 SECOND")).timeout_domain("event_time")


@pytest.mark.parametrize("mode", ["update", "complete"])
def test_event_time_timers_followed_by_an_aggregation_are_refused(spark, tmp_path, mode):
    # The suite's "multiple stateful ops - FlatMapGroupsWithState followed by agg": Spark's
    # global-watermark limit, on by default.
    stream = Stream(str(tmp_path))
    result = map_groups_with_state(stream.read_events(spark), "word", event_time_timers()) \
        .groupBy("word").count()
    with pytest.raises(PySparkException) as info:
        run_memory(result, f"mgws_event_time_{mode}", stream.checkpoint, mode)
    message = str(info.value)
    assert "map_groups_with_state with event-time timers (timeout_domain('event_time')) is " \
           "followed by a streaming aggregation" in message
    assert "Detected pattern of possible 'correctness' issue due to global watermark" in message


def test_event_time_timers_followed_by_a_stream_stream_join_are_refused(spark, tmp_path):
    # The suite's "stream-stream Inner after FlatMapGroupsWithState in Append mode".
    stream = Stream(str(tmp_path))
    groups = map_groups_with_state(stream.read_events(spark), "word", event_time_timers())
    other = stream.read(spark).withColumnRenamed("word", "w2")
    with pytest.raises(PySparkException) as info:
        run_memory(groups.join(other, F.col("word") == F.col("w2")), "mgws_then_join",
                   stream.checkpoint)
    message = str(info.value)
    assert "map_groups_with_state with event-time timers (timeout_domain('event_time')) is " \
           "followed by a stream-stream join" in message
    assert "Detected pattern of possible 'correctness' issue due to global watermark" in message


def test_a_distinct_aggregate(spark):
    message = error_of(spark, update=F.struct(F.count_distinct("x").alias("n")))
    assert "distinct aggregates" in message and "count(DISTINCT x)" in message
    message = error_of(spark, emit=F.struct(F.col("word"), F.expr("sum(DISTINCT x)").alias("s")))
    assert "distinct aggregates" in message and "sum(DISTINCT x)" in message and "emit" in message


def test_an_aggregate_with_a_filter_clause(spark):
    message = error_of(
        spark, update=F.struct(F.expr("count(*) FILTER (WHERE x > 1)").alias("n")))
    assert "FILTER clause" in message and "FILTER (WHERE (x > 1))" in message
