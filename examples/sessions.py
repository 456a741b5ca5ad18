"""The main job: sessionizing a clickstream with mapWithState through Spark Connect.

A recorded clickstream is replayed as a DStream would have seen it live: 10-second batches,
an idle timeout of 30 seconds closing each user's session, and the state scanned for timeouts
every 3 batches. The state function is plain Python, compiled by ``mws.state_function`` into
Spark Columns: everything stateful runs on the JVM executors; this process only compiles the
function, builds protos and prints results.

    dev/demo            # builds what is missing, starts a local Connect server, runs this
"""
import random
import warnings
from datetime import datetime, timedelta

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)

from pyspark.sql import functions as F  # noqa: E402

import mapwithstate as mws  # noqa: E402
from mapwithstate import map_with_state  # noqa: E402


def clickstream(n_users: int = 50, seed: int = 7):
    """(user, page, ts) clicks: each user has a few bursts of activity separated by pauses."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 22, 9, 0, 0)
    pages = ["home", "search", "item", "cart", "checkout"]
    rows = []
    for u in range(n_users):
        t = start + timedelta(seconds=rng.randint(0, 60))
        for _ in range(rng.randint(1, 4)):  # sessions
            for _ in range(rng.randint(1, 8)):  # clicks in a session
                rows.append((f"user{u:02d}", rng.choice(pages), t))
                t += timedelta(seconds=rng.randint(1, 15))
            t += timedelta(seconds=rng.randint(45, 180))  # a pause that ends the session
    return rows


# State per user: the open session, written in plain Python and compiled to Spark Columns that
# run on the executors. A click extends the session; 30 s without a click closes it, and the
# closing call (state.timing_out) emits the session's summary.
@mws.state_function("started TIMESTAMP, last TIMESTAMP, clicks BIGINT, checkout BOOLEAN")
def session(user, page, ts, state):
    if state.timing_out:
        return {"user": user, "started": state.started, "ended": state.last,
                "clicks": state.clicks, "converted": state.checkout,
                "closed_at": state.batch_time}
    state.update(started=state.started if state.exists else ts, last=ts,
                 clicks=(state.clicks or 0) + 1,
                 checkout=bool(state.checkout) or page == "checkout")


def main() -> None:
    spark = mws.local_session(**{"spark.sql.shuffle.partitions": "4"})
    clicks = spark.createDataFrame(clickstream(), "user STRING, page STRING, ts TIMESTAMP")

    sessions_spec = session.timeout("30 seconds").checkpoint_interval(3)
    sessions = map_with_state(clicks, key="user", spec=sessions_spec, batch_time="ts",
                              batch_interval="10 seconds", order_by="ts").cache()

    print(f"{clicks.count()} clicks from {clicks.select('user').distinct().count()} users "
          f"became {sessions.count()} closed sessions.\n")
    print("The first sessions to close:")
    sessions.orderBy("closed_at", "user").show(10, truncate=False)
    print("Sessions by outcome:")
    (sessions.groupBy("converted")
     .agg(F.count("*").alias("sessions"), F.avg("clicks").alias("avg_clicks"),
          F.avg(F.col("ended").cast("long") - F.col("started").cast("long")).alias("avg_seconds"))
     .orderBy("converted").show())

    print("Open sessions after each of the last batches (output='snapshots'):")
    snapshots = map_with_state(clicks, key="user", spec=sessions_spec, batch_time="ts",
                               batch_interval="10 seconds", order_by="ts", output="snapshots")
    (snapshots.groupBy("batch_time").agg(F.count("*").alias("open_sessions"))
     .orderBy(F.desc("batch_time")).show(5, truncate=False))
    spark.stop()


if __name__ == "__main__":
    main()
