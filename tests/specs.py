"""State functions the tests share."""
from pyspark.sql import functions as F

from mapwithstate import StateSpec
from mapwithstate import functions as S


def running_count(state_schema: str = "n BIGINT", key: str = "word") -> StateSpec:
    """Counts each key's records; emits (key, count so far) for every record."""
    return StateSpec.function(
        state_schema,
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col(key), S.new_state("n").alias("n")),
    )


def running_sum(amount, key: str = "word") -> StateSpec:
    """Sums `amount` (a record's column, or a group function's aggregate) per key; emits (key,
    sum so far)."""
    return StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + amount).alias("n")),
        emit=F.struct(F.col(key), S.new_state("n").alias("n")),
    )


def max_event_time(event, extra, t0) -> StateSpec:
    """Spark's "event time timeout + watermark" function: the state is the key's largest event
    time (`event`: a record's, or a group function's ``F.max``), the timer 5 s after it; emits
    (word, seconds since `t0` of the largest event time, `extra`), and on timeout (word, -1,
    `extra`) with the state removed."""
    largest = F.greatest(F.coalesce(S.state("max_t"), event), event)
    return StateSpec.function(
        "max_t TIMESTAMP",
        update=F.when(~S.is_timing_out(), F.struct(largest.alias("max_t"))),
        remove=S.is_timing_out(),
        emit=F.struct(
            F.col("word"),
            F.when(S.is_timing_out(), F.lit(-1))
            .otherwise(F.unix_seconds(S.new_state("max_t")) - F.unix_seconds(F.lit(t0)))
            .alias("n"),
            extra),
        timeout_at=S.new_state("max_t") + F.expr("INTERVAL 5 SECONDS"),
    ).timeout_domain("event_time")
