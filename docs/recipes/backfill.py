"""Backfill a year of files, then start the live stream: replay the recorded history as a batch
with ``output="final_state"`` — every user's state after its last batch, as ``read_state``
would show it — and start the stream with that as its ``initial_state``, resumed with each
key's ``last_updated``. The stream then goes on as one run over the history and the live data
would have: a session idle since the history keeps its clock and closes on time, a session
still open carries its count on. With timers, keys may hold only a timer and an event-time
watermark may be running: the next recipe carries both over.
"""
import os
import tempfile
from datetime import datetime, timedelta

from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate import StateSpec
from mapwithstate import functions as S

IDLE = "1 hour"

# A user's session: its click count; a session idle for an hour closes, emitting its count.
sessions = StateSpec.function(
    "clicks BIGINT",
    update=F.struct((F.coalesce(S.state("clicks"), F.lit(0)) + 1).alias("clicks")),
    emit=F.when(S.is_timing_out(),
                F.struct(F.col("user"), S.state("clicks").alias("clicks"),
                         S.batch_time().alias("closed_at"))),
).timeout(IDLE).checkpoint_interval(1)


def run(spark, work=None):
    work = work or tempfile.mkdtemp()
    history_dir, live_dir = os.path.join(work, "history"), os.path.join(work, "live")
    now = datetime.now().replace(microsecond=0)
    # A year of recorded clicks, as files (here a few; the same code reads a year of them).
    # u1 last clicked 65 minutes ago, u2 ten minutes ago, u3 200 days ago.
    year_ago = now - timedelta(days=365)
    spark.createDataFrame(
        [("u1", year_ago), ("u3", now - timedelta(days=200)),
         ("u1", now - timedelta(minutes=65)), ("u2", now - timedelta(minutes=30)),
         ("u2", now - timedelta(minutes=10))],
        "user STRING, ts TIMESTAMP").write.parquet(history_dir)

    # 1. The backfill: a replay whose batch times are the records' own, ending with every
    #    user's state (user, clicks, last_updated, timeout_at). Idle sessions close as they
    #    would have live: u1's first one at u3's click, u3's at u1's next; u1's second one was
    #    not idle an hour yet when the history ends.
    history = spark.read.parquet(history_dir)
    final = mws.map_with_state(history, key="user", spec=sessions, batch_time="ts",
                               output="final_state")
    final_path = os.path.join(work, "final_state")
    final.write.parquet(final_path)            # kept: the live query's first batch reads it
    backfilled = spark.read.parquet(final_path)
    assert sorted((r.user, r.clicks) for r in backfilled.collect()) == [("u1", 1), ("u2", 2)]

    # 2. Go live: the stream resumes that state; each user's idle clock runs from its
    #    last_updated, not from the stream's start.
    spark.createDataFrame([("u2",), ("u3",)], "user STRING").write.parquet(live_dir)
    live = spark.readStream.schema("user STRING").parquet(live_dir)
    closed = mws.map_with_state(
        live, key="user", spec=sessions.initial_state(backfilled, last_updated="last_updated"))
    query = (closed.writeStream.format("memory").queryName("closed_sessions")
             .option("checkpointLocation", os.path.join(work, "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination()

    # u1, idle for 65 minutes now, closes in the stream's first batch with the history's
    # count; u2 clicked ten minutes ago and again now: its session goes on with 3 clicks.
    rows = spark.sql("SELECT user, clicks FROM closed_sessions").collect()
    assert [tuple(r) for r in rows] == [("u1", 1)]
    state = mws.read_state(spark, os.path.join(work, "ck")).select("user", "clicks")
    state.orderBy("user").show()
    assert sorted(tuple(r) for r in state.collect()) == [("u2", 3), ("u3", 1)]


if __name__ == "__main__":
    run(mws.local_session())
