"""Bad timer arguments get a clear error naming the argument, and the server keeps serving."""
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from errors import assert_still_serving, error_of, words


def spec(**kwargs):
    return StateSpec.function(
        "n BIGINT", update=F.struct(F.lit(1).cast("bigint").alias("n")),
        emit=F.struct(F.col("word")), **kwargs)


def test_timeout_at_must_be_a_timestamp(spark):
    message = error_of(map_with_state(words(spark), key="word", spec=spec(timeout_at=F.lit(5))))
    assert "timeout_at must be a TIMESTAMP" in message and "INT" in message
    assert_still_serving(spark)


def test_timeout_at_with_timeout_is_refused(spark):
    both = spec(timeout_at=S.batch_time()).timeout("10 seconds")
    message = error_of(map_with_state(words(spark), key="word", spec=both))
    assert "timeout and timeout_at cannot be used together" in message
    assert_still_serving(spark)


def test_event_time_without_a_watermark_is_refused_over_a_stream(spark, tmp_path):
    event = spec(timeout_at=S.batch_time()).timeout_domain("event_time")
    stream = spark.readStream.schema("word STRING").json(str(tmp_path))
    with pytest.raises(PySparkException) as info:
        map_with_state(stream, key="word", spec=event).writeStream.format("noop") \
            .option("checkpointLocation", str(tmp_path / "ck")).start().stop()
    message = str(info.value)
    assert "timeout_domain('event_time')" in message and "withWatermark" in message
    assert_still_serving(spark)


def test_unknown_timeout_domain_is_refused(spark):
    bad = spec(timeout_at=S.batch_time()).timeout_domain("wall_clock")
    message = error_of(map_with_state(words(spark), key="word", spec=bad))
    assert "timeout_domain" in message and "wall_clock" in message and "event_time" in message
    assert_still_serving(spark)


def test_initial_state_timer_column_needs_timeout_at(spark):
    init = spark.createDataFrame([("a", 1, None)], "word STRING, n BIGINT, due TIMESTAMP")
    bad = spec().initial_state(init, timeout_at="due")
    message = error_of(map_with_state(words(spark), key="word", spec=bad))
    assert "timeout_at" in message
    assert_still_serving(spark)
