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


def group_count():
    """The key's count after this batch: state.getOption.getOrElse(0) + values.size."""
    return F.coalesce(S.state("count"), F.lit(0)) + F.count("*")


def flat_running_count():
    """count = state.getOption.map(_.count).getOrElse(0L) + values.size; at 3 the state is
    removed and nothing returned, else updated and (key, count.toString) returned."""
    return StateSpec.function(
        "count BIGINT",
        update=F.struct(group_count().alias("count")),
        remove=group_count() == 3,
        emit=F.when(S.new_state().isNotNull(),
                    F.struct(F.col("word"), S.new_state("count").cast("string").alias("n"))))


def map_running_count():
    """mapGroupsWithState: one row per key, (key, "-1") when the state is removed at 3."""
    return StateSpec.function(
        "count BIGINT",
        update=F.struct(group_count().alias("count")),
        remove=group_count() == 3,
        emit=F.struct(F.col("word"),
                      F.coalesce(S.new_state("count").cast("string"), F.lit("-1")).alias("n")))


def latest_event_spec() -> StateSpec:
    """Event-time timers: the state is the key's latest event time, the timer 5 s after it;
    emits (word, 1, watermark, batch time) per record, and (word, -1, ...) as its key times
    out (its state then removed)."""
    timing_out = S.is_timing_out()
    latest = F.greatest(F.coalesce(S.state("latest"), F.col("event")), F.col("event"))
    return StateSpec.function(
        "latest TIMESTAMP",
        update=F.when(~timing_out, F.struct(latest.alias("latest"))),
        remove=timing_out,
        emit=F.struct(F.col("word"), F.when(timing_out, F.lit(-1)).otherwise(F.lit(1)).alias("n"),
                      S.watermark().alias("wm"), S.batch_time().alias("bt")),
        timeout_at=F.when(~timing_out, S.new_state("latest") + F.expr("INTERVAL 5 SECONDS")),
    ).timeout_domain("event_time")
