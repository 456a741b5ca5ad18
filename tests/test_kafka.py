"""map_with_state from Kafka to Kafka, against a real broker (tests/kafka.py) and a real
Connect server with Spark's Kafka connector: the fraud pipeline of examples/kafka_fraud.py,
what Spark's Kafka sink guarantees, and a server killed mid-stream.

Output guarantee, as docs/kafka.md states it: Spark's Kafka sink writes at least
once (it has no transactions; a test below shows a transactional producer is refused), so every
record the pipeline writes has an idempotent key and a reader keeps one record per key. The
state is exactly once: every input record's effect is in it once, also across a ``kill -9``.
"""
import json
import random
import time

import pytest

import mapwithstate as mws
from examples import kafka_fraud
from clusters import kill_local_server
from kafka import consume, deduplicated, produce, topic_name
from streams import committed_batches

pytestmark = pytest.mark.slow

_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
CARDS = [f"c-{i}" for i in range(6)]
# Records that must go to the dead letters, never into the state: (key, value, problem).
MALFORMED = [
    (None, "{not json", "not a JSON object with txn, card and amount"),
    ("c-0", json.dumps({"txn": "m-1", "card": "c-0"}), "missing or not of its type: amount"),
    ("c-1", json.dumps({"txn": "m-2", "card": "c-1", "amount": "twelve"}),
     "missing or not of its type: amount"),
    ("c-9", json.dumps({"card": "c-9", "amount": 5.0}), "missing or not of its type: txn"),
    (None, json.dumps([1, 2, 3]), "not a JSON object with txn, card and amount"),
]


def transactions(count, seed):
    """`count` transactions over CARDS, whole amounts (sums stay exact), now and then one
    far over the card's usual amount."""
    rng = random.Random(seed)
    usual = {card: rng.randint(10, 60) for card in CARDS}
    out = []
    for i in range(count):
        card = rng.choice(CARDS)
        amount = usual[card] * (rng.randint(5, 9) if rng.random() < 0.08 else 1) \
            + rng.randint(-5, 5)
        out.append({"txn": f"t-{seed}-{i}", "card": card, "amount": float(amount)})
    return out


def as_records(txns, malformed=(), every=40):
    """Kafka (key, value) records: each transaction keyed by its card, with the malformed
    records spread among them."""
    records = [(t["card"], json.dumps(t)) for t in txns]
    for i, (key, value, _) in enumerate(malformed):
        records.insert(min(len(records), (i + 1) * every), (key, value))
    return records


def expected_outcome(txns):
    """The rule of examples/kafka_fraud.py applied in order: (alerts by txn, state by card)."""
    state, alerts = {}, {}
    for t in txns:
        n, total = state.get(t["card"], (0, 0.0))
        if n >= kafka_fraud.MIN_HISTORY and t["amount"] > kafka_fraud.SPIKE_FACTOR * (total / n):
            alerts[t["txn"]] = {**t, "average": total / n, "history": n}
        state[t["card"]] = (n + 1, total + t["amount"])
    return alerts, state


def state_by_card(spark, checkpoint):
    return {r.card: (r.n, r.total)
            for r in mws.read_state(spark, checkpoint).select("card", "n", "total").collect()}


class Topics:
    """One test's topics on the shared broker."""

    def __init__(self, broker):
        self.transactions = topic_name("transactions")
        self.alerts = topic_name("alerts")
        self.dead_letters = topic_name("dead-letters")
        broker.create_topics(self.transactions, self.alerts, self.dead_letters)

    def start(self, spark, bootstrap, checkpoint, **options):
        return kafka_fraud.start(spark, bootstrap, checkpoint,
                                 transactions_topic=self.transactions, alerts_topic=self.alerts,
                                 dead_letters_topic=self.dead_letters, **options)


def test_fraud_pipeline_alerts_dead_letters_and_state(kafka_broker, kafka_spark, tmp_path):
    bootstrap, topics = kafka_broker.bootstrap_servers, Topics(kafka_broker)
    txns = transactions(160, seed=1)
    alerts, state = expected_outcome(txns)
    assert len(alerts) >= 3, "the data should hold some spikes"
    produce(kafka_spark, bootstrap, topics.transactions, as_records(txns, MALFORMED))
    checkpoint = str(tmp_path / "checkpoint")

    query = topics.start(kafka_spark, bootstrap, checkpoint, available_now=True)
    query.awaitTermination()
    assert query.exception() is None

    written = consume(kafka_spark, bootstrap, topics.alerts)
    # A run without failures writes each alert once; after one, a reader de-duplicates by key.
    assert len(written) == len(alerts)
    assert {k: json.loads(v) for k, v in deduplicated(written).items()} == alerts
    dead = [json.loads(v) for _, v in consume(kafka_spark, bootstrap, topics.dead_letters)]
    assert sorted((d["raw"], d["problem"]) for d in dead) == \
        sorted((value, problem) for _, value, problem in MALFORMED)
    # The malformed records are nowhere in the state: c-9 appears in one only.
    assert state_by_card(kafka_spark, checkpoint) == state


def test_kafka_sink_has_no_transactions(kafka_broker, kafka_spark):
    """Spark's Kafka sink never begins a transaction: a producer given a transactional.id
    fails its first send, so exactly-once output through transactions is not to be had."""
    topic = topic_name("transactional")
    kafka_broker.create_topics(topic)
    rows = kafka_spark.createDataFrame([("k", "v")], "key STRING, value STRING")
    # The failed send's record stays in the producer until its delivery timeout (2 minutes by
    # default), which the task's closing flush waits for, its sender thread spinning a core.
    with pytest.raises(Exception, match="initTransactions"):
        rows.write.format("kafka").option("kafka.bootstrap.servers",
                                          kafka_broker.bootstrap_servers) \
            .option("kafka.transactional.id", "mapwithstate-test").option("topic", topic) \
            .option("kafka.request.timeout.ms", "1000") \
            .option("kafka.delivery.timeout.ms", "2000").save()


def test_server_killed_mid_stream_restarts_exactly_once_in_state(
        kafka_broker, kafka_server, monkeypatch, tmp_path):
    monkeypatch.setenv(_CONNECT_MODE, "1")
    bootstrap, topics = kafka_broker.bootstrap_servers, Topics(kafka_broker)
    txns = transactions(240, seed=2)
    alerts, state = expected_outcome(txns)
    checkpoint = str(tmp_path / "checkpoint")
    with mws.LocalConnectServer(conf={"spark.sql.shuffle.partitions": "4"},
                                packages=["kafka"]) as doomed:
        spark = doomed.session()
        produce(spark, bootstrap, topics.transactions, as_records(txns))
        # 20 records a micro-batch over the 2 partitions: 12 batches or more to read them all.
        query = topics.start(spark, bootstrap, checkpoint, max_offsets_per_trigger=20)
        deadline = time.monotonic() + 300
        while len(committed_batches(checkpoint)) < 2:
            assert query.exception() is None and time.monotonic() < deadline, \
                f"the query did not commit 2 batches: {query.exception()}"
            time.sleep(0.2)
        kill_local_server(doomed)
        killed_after = len(committed_batches(checkpoint))
    assert killed_after < 12, f"the query had read everything ({killed_after} batches)"

    # A new server continues from the checkpoint: each record's effect once in the state.
    spark = kafka_server.session()
    try:
        query = topics.start(spark, bootstrap, checkpoint, available_now=True)
        query.awaitTermination()
        assert query.exception() is None
        assert state_by_card(spark, checkpoint) == state
        written = deduplicated(consume(spark, bootstrap, topics.alerts))
        assert {k: json.loads(v) for k, v in written.items()} == alerts
    finally:
        spark.stop()
