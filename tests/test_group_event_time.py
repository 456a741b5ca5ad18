"""Event-time timers for group functions: FlatMapGroupsWithStateSuite's "streaming with event
time timeout + watermark" case with ``map_groups_with_state``, as a batch replay and as a
stream. Late rows (at or before the watermark) are dropped before the aggregation, so no
aggregate sees them, and count in ``numRowsDroppedByWatermark``.

The suite's function (``specs.max_event_time``): the state is the key's largest event time,
the timer 5 s after it; a timed-out key emits -1 and is removed.
"""
import json
import os
from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F

from mapwithstate import map_groups_with_state
from specs import max_event_time
from streams import Stream, run_memory

pytestmark = [pytest.mark.sessions("connect", "classic"), pytest.mark.backends("rocksdb")]

T0 = datetime(2026, 1, 1)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def max_event_time_spec():
    """The suite's function over the key's rows of the batch; also emits how many of them
    the aggregates saw (``rows``)."""
    return max_event_time(F.max("event"), F.count("*").alias("rows"), T0)


# The suite's batches: ("a", 4) is late (watermark 15 - 10 = 5 s); ("b", 31) moves the
# watermark to 21 s, past a's timer (20 s).
SUITE_BATCHES = [[("a", 11), ("a", 13), ("a", 15)], [("a", 4)], [("a", 10)], [("b", 31)]]


def replay(spark, batches):
    df = spark.createDataFrame(
        [(w, at(e), at(i)) for i, b in enumerate(batches) for w, e in b],
        "word STRING, event TIMESTAMP, bt TIMESTAMP").withWatermark("event", "10 seconds")
    out = map_groups_with_state(df, key="word", spec=max_event_time_spec(), batch_time="bt")
    return sorted(tuple(r) for r in out.collect())


def test_event_time_timeout_with_watermark_in_a_batch_replay(spark):
    # A replay has no batch without data: a last batch (c@32) runs at the 21 s watermark.
    assert replay(spark, SUITE_BATCHES + [[("c", 32)]]) == sorted([
        ("a", 15, 3),     # a's timer: 20 s; watermark after: 5 s
        # ("a", 4) is late: no call for a
        ("a", 15, 1),     # 10 s is not late; a's largest event time stays 15 s
        ("b", 31, 1),     # the watermark is still 5 s in this batch
        ("c", 32, 1), ("a", -1, 0),   # watermark 21 s > 20 s: a times out
    ])


def test_late_rows_are_dropped_before_the_aggregation(spark):
    # In the second batch a@4 is late and a@12 is not: the aggregates see one row.
    assert replay(spark, [[("a", 15)], [("a", 4), ("a", 12), ("b", 2)]]) == sorted([
        ("a", 15, 1), ("a", 15, 1)])


def write_batch(directory, index, rows):
    path = os.path.join(directory, f"{index:05d}.json")
    with open(path + ".tmp", "w") as f:
        for word, event in rows:
            f.write(json.dumps({"word": word, "e": event}) + "\n")
    os.rename(path + ".tmp", path)
    # The file source takes files in modification-time order: make it the order written.
    os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def test_event_time_timeout_with_watermark_in_a_stream(spark, tmp_path):
    src, out, ck = (str(tmp_path / d) for d in ("in", "out", "ck"))
    os.makedirs(src)
    for i, rows in enumerate(SUITE_BATCHES):
        write_batch(src, i, rows)
    source = spark.readStream.schema("word STRING, e BIGINT").option("maxFilesPerTrigger", 1) \
        .json(src)
    df = source.select("word", (F.lit(T0).cast("long") + F.col("e")).cast("timestamp")
                       .alias("event")).withWatermark("event", "10 seconds")
    query = map_groups_with_state(df, key="word", spec=max_event_time_spec()) \
        .writeStream.format("json").option("path", out) \
        .option("checkpointLocation", ck).trigger(availableNow=True).start()
    query.awaitTermination()
    rows = sorted(tuple(r) for r in
                  spark.read.schema("word STRING, n BIGINT, rows BIGINT").json(out).collect())
    # After b@31 the watermark is 21 s: a no-data batch times a out (its timer is 20 s).
    assert rows == sorted([("a", 15, 3), ("a", 15, 1), ("b", 31, 1), ("a", -1, 0)])
    late = sum(o.numRowsDroppedByWatermark
               for p in query.recentProgress for o in p.stateOperators)
    assert late == 1


def test_event_time_timers_followed_by_a_dedup_without_event_time(spark, tmp_path):
    """UnsupportedOperationsSuite's "FlatMapGroupsWithState followed by dedup (without
    event-time)": a dropDuplicates over no event-time column is not held to the
    global-watermark limit, so it may follow event-time timers (a stream-stream join or an
    aggregation may not: test_group_errors)."""
    stream = Stream(str(tmp_path))
    stream.add_events(("a", 11), ("a", 13))
    stream.add_events(("b", 15), ("a", 16))
    deduplicated = map_groups_with_state(stream.read_events(spark, "10 seconds"), key="word",
                                         spec=max_event_time_spec()).dropDuplicates(["word"])
    run_memory(deduplicated, "event_time_then_dedup", stream.checkpoint)
    assert sorted(r.word for r in spark.table("event_time_then_dedup").collect()) == ["a", "b"]
