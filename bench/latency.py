"""L1, latency: end-to-end latency of map_with_state from Kafka to Kafka, per record, in Spark's
Real-Time Mode and in micro-batches (issue 43).

A producer (a streaming query of Spark's rate source writing to the input topic) writes
``--rate`` records a second over ``--keys`` keys; the pipeline (a running count per key,
``.backend("rocksdb")``) reads them and writes one output per record, carrying the input
record's Kafka timestamp. A record's latency is its output's Kafka timestamp (set by Spark's
Kafka producer as it sends the output) minus its input's (set as the producer sent it): produce
to output sent, which is when a consumer can read it, give or take the broker's append. Records
of the first ``--warmup`` seconds are left out; p50, p99 and max are over the rest.

    dev/fetch-kafka
    .venv/bin/python -m bench.latency --rate 1000 --seconds 60 --modes realtime,microbatch

It starts its own broker (tests/kafka.py) and a local Connect server with 6 task slots (Real-Time
Mode runs every stage at once: the input topic's 2 partitions and 2 state partitions). Nothing
here is asserted; on a shared machine, quote it with the machine's load.
"""
import argparse
import os
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)

from pyspark.sql import functions as F  # noqa: E402

import mapwithstate as mws  # noqa: E402
from mapwithstate import StateSpec, map_with_state  # noqa: E402
from mapwithstate import functions as S  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
from kafka import KafkaBroker, topic_name  # noqa: E402

#: How each mode triggers the pipeline.
TRIGGERS = {"realtime": {"realTime": "30 seconds"},
            "microbatch": {"processingTime": "0 seconds"}}


def running_count() -> StateSpec:
    n = F.coalesce(S.state("n"), F.lit(0)) + 1
    return StateSpec.function(
        "n BIGINT", update=F.struct(n.alias("n")),
        emit=F.struct(F.col("key"), S.new_state("n").alias("n"), F.col("produced"))
    ).backend("rocksdb")


def run_mode(spark, broker, mode, args, work):
    """Runs `mode` for `args.seconds`: (outputs measured, distinct ones, [p50, p99], max in
    ms); an output written twice (a re-run batch's) counts once in `distinct`."""
    bootstrap = broker.bootstrap_servers
    source, sink = topic_name("latency-in"), topic_name("latency-out")
    broker.create_topics(source, sink)
    producer = spark.readStream.format("rate").option("rowsPerSecond", args.rate) \
        .option("numPartitions", 1).load() \
        .select((F.col("value") % args.keys).cast("string").alias("key"),
                F.col("value").cast("string").alias("value")) \
        .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", source).option("checkpointLocation", os.path.join(work, mode, "p")) \
        .trigger(processingTime="50 milliseconds").start()
    records = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", source).option("startingOffsets", "earliest").load() \
        .select(F.col("key").cast("string").alias("key"),
                F.col("timestamp").alias("produced"))
    pipeline = map_with_state(records, key="key", spec=running_count()) \
        .select(F.col("key"), F.to_json(F.struct(
            F.col("n"), F.unix_millis("produced").alias("produced"))).alias("value")) \
        .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", sink).option("checkpointLocation", os.path.join(work, mode, "q")) \
        .outputMode("update").trigger(**TRIGGERS[mode]).start()
    started = time.time()
    time.sleep(args.seconds)
    producer.stop()
    time.sleep(5)  # the last records through
    pipeline.stop()
    out = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", sink).option("startingOffsets", "earliest").load() \
        .select(F.get_json_object(F.col("value").cast("string"), "$.produced")
                .cast("long").alias("produced"),
                F.unix_millis("timestamp").alias("sent"), F.col("key"), F.col("value")) \
        .where(F.col("produced") >= int((started + args.warmup) * 1000)) \
        .select((F.col("sent") - F.col("produced")).alias("ms"), F.col("key"), F.col("value"))
    row = out.agg(F.count("*").alias("n"), F.count_distinct("key", "value").alias("distinct"),
                  F.percentile_approx("ms", [0.5, 0.99], 10000).alias("p"),
                  F.max("ms").alias("max")).first()
    return row.n, row.distinct, row.p, row.max


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000, help="records a second")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--seconds", type=int, default=60, help="how long each mode runs")
    parser.add_argument("--warmup", type=int, default=15, help="seconds left out at the start")
    parser.add_argument("--modes", default="realtime,microbatch")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="mws-latency-")
    os.makedirs(os.path.join(work, "broker"))
    broker = KafkaBroker(os.path.join(work, "broker"))
    try:
        with mws.LocalConnectServer(master="local[6]", packages=["kafka"],
                                    conf={"spark.sql.shuffle.partitions": "2"}) as server:
            spark = server.session()
            print("| mode | rate (records/s) | outputs | distinct | p50 ms | p99 ms | max ms |")
            print("|---|---|---|---|---|---|---|")
            for mode in args.modes.split(","):
                n, distinct, (p50, p99), worst = run_mode(spark, broker, mode, args, work)
                print(f"| {mode} | {args.rate} | {n} | {distinct} | {p50} | {p99} | {worst} |",
                      flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
