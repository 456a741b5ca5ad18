"""A Kafka pipeline: card transactions in, fraud alerts out, with map_with_state in between.

Each record of the transactions topic is a JSON object ``{"txn": "t-17", "card": "c-3",
"amount": 42.0}`` (the record's key is the card). Per card the state keeps the number and the
sum of its amounts; a transaction over 3x the card's running average, once the card has a
history of 3 transactions, is an alert, written to the alerts topic as JSON with the
transaction's id as its key. A record that is not JSON, or lacks one of the fields (or has one
of the wrong type), never reaches the state: it goes to the dead-letter topic with the reason,
its key being where it came from (``topic/partition/offset``).

Spark's Kafka sink writes at least once (it has no transactions): a micro-batch that is re-run
after a failure writes its records again. Every record written carries an idempotent key (the
transaction id, or the source position), so a consumer keeps one record per key. The state is
exactly once: it is committed with the source offsets in the checkpoint.

    dev/fetch-kafka
    .venv/bin/python examples/kafka_fraud.py --bootstrap-servers 127.0.0.1:9092 \\
        --checkpoint /tmp/fraud-ck     # runs until stopped (Ctrl-C)
"""
import argparse
import warnings

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)

from pyspark.sql import Column, DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.streaming import StreamingQuery  # noqa: E402

import mapwithstate as mws  # noqa: E402
from mapwithstate import StateSpec, map_with_state  # noqa: E402
from mapwithstate import functions as S  # noqa: E402

#: A transaction, as the topic's JSON holds it.
TRANSACTION_SCHEMA = "txn STRING, card STRING, amount DOUBLE"
_REQUIRED_FIELDS = ("txn", "card", "amount")
#: A transaction over this many times the card's running average is an alert...
SPIKE_FACTOR = 3.0
#: ...once the card has at least this many earlier transactions.
MIN_HISTORY = 3


def fraud_spec() -> StateSpec:
    """Per card: ``n`` transactions summing to ``total``; emits an alert for a spike."""
    n = F.coalesce(S.state("n"), F.lit(0))
    total = F.coalesce(S.state("total"), F.lit(0.0))
    average = F.when(n > 0, total / n)
    spike = (n >= MIN_HISTORY) & (F.col("amount") > F.lit(SPIKE_FACTOR) * average)
    return StateSpec.function(
        "n BIGINT, total DOUBLE",
        update=F.struct((n + 1).alias("n"), (total + F.col("amount")).alias("total")),
        emit=F.when(spike, F.struct(F.col("txn"), F.col("card"), F.col("amount"),
                                    average.alias("average"), n.alias("history"))))


def _problem(parsed: Column) -> Column:
    """Why a parsed record is unusable, or null: not JSON (every field null), else the
    missing or mistyped fields."""
    missing = [F.when(parsed[f].isNull(), F.lit(f)) for f in _REQUIRED_FIELDS]
    none_there = parsed[_REQUIRED_FIELDS[0]].isNull()
    for f in _REQUIRED_FIELDS[1:]:
        none_there = none_there & parsed[f].isNull()
    all_null = parsed.isNull() | none_there
    return (F.when(all_null, F.lit("not a JSON object with txn, card and amount"))
            .when(F.concat_ws(", ", *missing) != "",
                  F.concat(F.lit("missing or not of its type: "), F.concat_ws(", ", *missing))))


def fraud_alerts(records: DataFrame, alerts_topic: str, dead_letters_topic: str) -> DataFrame:
    """The Kafka records to write (``key``, ``value``, ``topic``) for the Kafka records read
    (``readStream.format("kafka")``, or ``read`` for a batch): alerts and dead letters."""
    raw = records.select(
        F.col("value").cast("string").alias("raw"),
        F.concat_ws("/", "topic", "partition", "offset").alias("position"))
    parsed = raw.withColumn("t", F.from_json("raw", TRANSACTION_SCHEMA)) \
        .withColumn("problem", _problem(F.col("t")))
    transactions = parsed.where(F.col("problem").isNull()).select("t.*")
    alerts = map_with_state(transactions, key="card", spec=fraud_spec()).select(
        F.col("txn").alias("key"), F.to_json(F.struct("*")).alias("value"),
        F.lit(alerts_topic).alias("topic"))
    dead_letters = parsed.where(F.col("problem").isNotNull()).select(
        F.col("position").alias("key"),
        F.to_json(F.struct("raw", "problem")).alias("value"),
        F.lit(dead_letters_topic).alias("topic"))
    return alerts.unionByName(dead_letters)


def start(spark: SparkSession, bootstrap_servers: str, checkpoint: str, *,
          transactions_topic: str = "transactions", alerts_topic: str = "alerts",
          dead_letters_topic: str = "transactions-dead-letters",
          max_offsets_per_trigger: int = 10_000,
          available_now: bool = False) -> StreamingQuery:
    """Starts the pipeline: `transactions_topic` -> alerts and dead letters, with its state and
    offsets in `checkpoint` (a restart continues from there)."""
    records = spark.readStream.format("kafka") \
        .option("kafka.bootstrap.servers", bootstrap_servers) \
        .option("subscribe", transactions_topic).option("startingOffsets", "earliest") \
        .option("maxOffsetsPerTrigger", max_offsets_per_trigger).load()
    writer = fraud_alerts(records, alerts_topic, dead_letters_topic).writeStream \
        .format("kafka").option("kafka.bootstrap.servers", bootstrap_servers) \
        .option("checkpointLocation", checkpoint).outputMode("append")
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--transactions-topic", default="transactions")
    parser.add_argument("--alerts-topic", default="alerts")
    parser.add_argument("--dead-letters-topic", default="transactions-dead-letters")
    args = parser.parse_args()
    spark = mws.local_session(packages=["kafka"], **{"spark.sql.shuffle.partitions": "4"})
    query = start(spark, args.bootstrap_servers, args.checkpoint,
                  transactions_topic=args.transactions_topic, alerts_topic=args.alerts_topic,
                  dead_letters_topic=args.dead_letters_topic)
    query.awaitTermination()


if __name__ == "__main__":
    main()
