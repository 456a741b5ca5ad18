"""map_with_state in Spark's Real-Time Mode (``trigger(realTime=...)``), Kafka to Kafka, against
the session's real broker (tests/kafka.py) and a real server with Spark's Kafka connector.

A real-time batch is long (the trigger's duration) and passes each record through as the source
reads it; the state commits at the batch's end. What these tests show, as docs/kafka.md says:
each record's output is readable from the output topic while its batch still runs (its commit
not yet written); the state carries over from one long batch to the next and across a restart;
a server killed during a real-time batch, restarted from its checkpoint, has every record's
effect in the state once (read back through ``read_state``); idle timeouts and timers fire
within a long batch as the clock passes their deadline, with no record arriving after, once,
committed with it; and what cannot run record by record is refused with a clear error. Both
backends run in Real-Time Mode: the heap backend names each commit's files by a checkpoint id,
as Spark's RocksDB store does (checkpoint format v2); the first test, the restart and the timer
run on it, the others on RocksDB. Each backend's real-time checkpoint is read back by
``read_state`` (the heap's in the first test and the restart, RocksDB's after the classic
session's run).

Real-Time Mode runs every stage of a batch at once, each partition a task (here 2 topic
partitions and 2 state partitions: 4 task slots), so the servers a test starts of its own have
6 (the reads of the output topic need the rest), and the session's Kafka server
(tests/conftest.py), its sessions here with 2 shuffle partitions, has 24: the long tests, each
a minute of waiting for the ends of long batches, run at once on it (``LONG`` below).
"""
import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

import mapwithstate as mws
from clusters import kill_local_server
from kafka import KafkaBroker, consume, deduplicated, produce, topic_name
from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from overlapped import OverlappedRuns
from specs import map_running_count
from streams import committed_batches

pytestmark = pytest.mark.slow

_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MASTER = "local[6]"
CONF = {"spark.sql.shuffle.partitions": "2"}
# Long enough that a record's output read back well within it proves it left before the end.
BATCH = "30 seconds"


@pytest.fixture
def rtm_spark(kafka_spark):
    """A session on the session's Kafka server, with this file's shuffle partitions."""
    for key, value in CONF.items():
        kafka_spark.conf.set(key, value)
    return kafka_spark


# The long tests' bodies: each spends most of its minute waiting for the ends of real-time
# batches, so the bodies of the tests selected run at once (tests/overlapped.py), each on
# queries and topics of its own; each test then raises what its body raised. The session's
# Kafka server has the task slots for all of them (tests/conftest.py).
LONG = OverlappedRuns("real-time")


@dataclass
class Run:
    """What a long test's body gets: the session's broker and Kafka server, a session of its
    own on that server (with this file's shuffle partitions) and a temp directory."""
    broker: KafkaBroker
    server: mws.LocalConnectServer
    spark: object
    tmp_path: Path


@pytest.fixture(scope="module")
def long_runs(request, kafka_broker, kafka_server, tmp_path_factory):
    """The bodies of this module's long tests, started at once by the first one's setup."""
    sessions = []

    def run_of(item):
        sessions.append(kafka_server.session())
        for key, value in CONF.items():
            sessions[-1].conf.set(key, value)
        return {"run": Run(kafka_broker, kafka_server, sessions[-1],
                           tmp_path_factory.mktemp(item.originalname[:40]))}

    with pytest.MonkeyPatch.context() as env:
        env.setenv(_CONNECT_MODE, "1")  # the bodies make Connect Columns
        try:
            LONG.start_selected(request, run_of)
            yield LONG
        finally:
            LONG.close()
            for session in sessions:
                session.stop()


def make_topics(broker, *prefixes):
    """New topics on the shared broker, named after `prefixes`."""
    names = tuple(topic_name(p) for p in prefixes)
    broker.create_topics(*names)
    return names


def running_total_spec(backend="rocksdb"):
    """Per key: ``n`` records summing to ``total``; emits (key, n, total) for each record."""
    n = F.coalesce(S.state("n"), F.lit(0))
    total = F.coalesce(S.state("total"), F.lit(0))
    return StateSpec.function(
        "n BIGINT, total BIGINT",
        update=F.struct((n + 1).alias("n"), (total + F.col("amount")).alias("total")),
        emit=F.struct(F.col("key"), S.new_state("n").alias("n"),
                      S.new_state("total").alias("total"))).backend(backend)


def source(spark, bootstrap, topic):
    return spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", topic).option("startingOffsets", "earliest").load() \
        .selectExpr("CAST(key AS STRING) AS key",
                    "CAST(CAST(value AS STRING) AS BIGINT) AS amount")


def start(spark, bootstrap, topics, checkpoint, spec=None, trigger=None):
    """The pipeline: input topic -> map_with_state -> output topic, each output keyed
    ``key/n`` (the same record if a re-executed batch writes it again)."""
    out = map_with_state(source(spark, bootstrap, topics[0]), key="key",
                         spec=spec or running_total_spec())
    return out.select(F.concat_ws("/", "key", F.col("n").cast("string")).alias("key"),
                      F.to_json(F.struct("n", "total")).alias("value")) \
        .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topics[1]).option("checkpointLocation", checkpoint) \
        .outputMode("update").trigger(**(trigger or {"realTime": BATCH})).start()


def expected(records):
    """key -> (n, total), and the outputs (``key/n`` -> {n, total}), the records run in order."""
    state, outputs = {}, {}
    for key, amount in records:
        n, total = state.get(key, (0, 0))
        state[key] = (n + 1, total + int(amount))
        outputs[f"{key}/{n + 1}"] = {"n": n + 1, "total": total + int(amount)}
    return state, outputs


def read_outputs(spark, bootstrap, topic, count, timeout, query):
    """The output topic's records, one per key, once there are `count` of them."""
    def ready():
        written = deduplicated(consume(spark, bootstrap, topic))
        return written if len(written) >= count else None
    written = wait_for(ready, timeout, f"{count} outputs", query)
    return {k: json.loads(v) for k, v in written.items()}


def wait_for(condition, timeout, what, query=None):
    deadline = time.monotonic() + timeout
    while True:
        if query is not None and query.exception() is not None:
            raise AssertionError(f"the query failed while waiting for {what}: "
                                 f"{query.exception()}")
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.5)


def records(keys, count, offset=0):
    return [(keys[i % len(keys)], str(offset + i + 1)) for i in range(count)]


def test_each_record_is_emitted_before_its_long_batch_ends_and_state_carries_over(
        long_runs, request):
    """On the heap backend (the classic-PySpark test and the idle timeout's run the same on
    RocksDB): its state is in files named by checkpoint ids, read back by ``read_state``."""
    long_runs.outcome(request)


@LONG.body("test_each_record_is_emitted_before_its_long_batch_ends_and_state_carries_over")
def each_record_is_emitted_before_its_long_batch_ends_and_state_carries_over(run):
    spark, bootstrap = run.spark, run.broker.bootstrap_servers
    topics = make_topics(run.broker, "rtm-in", "rtm-out")
    checkpoint = str(run.tmp_path / "checkpoint")
    first = records(["a", "b", "c"], 6)
    query = start(spark, bootstrap, topics, checkpoint, spec=running_total_spec("memory"))
    try:
        # Batch 0 is running (its commit is written at its end, 30 s after it started).
        wait_for(lambda: query.status["isTriggerActive"], 60, "batch 0 to start", query)
        produced = time.monotonic()
        produce(spark, bootstrap, topics[0], first)
        _, outputs = expected(first)
        got = read_outputs(spark, bootstrap, topics[1], len(outputs), 25, query)
        assert committed_batches(checkpoint) == [], \
            "the outputs were read only after the real-time batch had ended " \
            f"({time.monotonic() - produced:.1f} s after they were produced)"
        assert got == outputs

        # The batch's end commits the state: the next batch goes on from it (each output
        # carries the key's state after its record).
        wait_for(lambda: committed_batches(checkpoint), 60, "batch 0's commit", query)
        second = records(["a", "d"], 4, offset=100)
        produce(spark, bootstrap, topics[0], second)
        _, outputs = expected(first + second)
        assert read_outputs(spark, bootstrap, topics[1], len(outputs), 60, query) == outputs
        wait_for(lambda: len(committed_batches(checkpoint)) >= 2, 60, "batch 1's commit", query)
    finally:
        query.stop()
    assert query.exception() is None
    assert_heap_checkpoint_has_ids(checkpoint)
    assert read_totals(spark, checkpoint, batch=0) == expected(first)[0]
    assert read_totals(spark, checkpoint) == expected(first + second)[0]


def assert_heap_checkpoint_has_ids(checkpoint):
    """The heap state of a real-time query is in files named by version and checkpoint id, and
    its operator metadata says so (format 3), so that a plugin that knows no ids refuses it."""
    state = os.path.join(checkpoint, "state", "1000")
    names = os.listdir(os.path.join(state, "0"))
    committed = [n for n in names if n.endswith(".delta")]
    assert committed and all("_" in n for n in committed), names
    with open(os.path.join(state, "_mapwithstate")) as f:
        recorded = dict(line.strip().split("=", 1) for line in f if "=" in line
                        and not line.startswith("#"))
    assert (recorded["checkpointIds"], recorded["formatVersion"],
            recorded["stateFileVersion"]) == ("true", "3", "3"), recorded


def read_totals(spark, checkpoint, batch=None):
    """key -> (n, total) of the state after `batch` (default: the last committed one)."""
    rows = mws.read_state(spark, checkpoint, batch_id=batch).collect()
    return {r["key"]: (r["n"], r["total"]) for r in rows}


def test_classic_pyspark_runs_it_too(long_runs, request):
    """The same pipeline from a classic session, in a process of its own (a classic session
    needs the Kafka jars on its JVM's classpath when it starts); its RocksDB state, in Spark's
    provider's files named by checkpoint ids, then read back through the session's server."""
    long_runs.outcome(request)


@LONG.body("test_classic_pyspark_runs_it_too")
def classic_pyspark_runs_it_too(run):
    kafka_broker, rtm_spark = run.broker, run.spark
    topics = make_topics(kafka_broker, "rtm-classic-in", "rtm-classic-out")
    checkpoint = str(run.tmp_path / "checkpoint")
    script = textwrap.dedent(f"""
        import json, sys, time
        sys.path[:0] = [{os.path.join(ROOT, "tests")!r}, {os.path.join(ROOT, "python")!r}]
        from pyspark.sql import SparkSession
        import mapwithstate as mws
        from kafka import consume, produce
        import test_real_time as t
        jars = [mws.jar_path()] + mws.package_jars("kafka")
        builder = SparkSession.builder.master({MASTER!r}) \\
            .config("spark.jars", ",".join(jars)) \\
            .config("spark.sql.extensions", mws.SQL_EXTENSIONS_CLASS) \\
            .config("spark.ui.enabled", "false") \\
            .config("spark.driver.bindAddress", "127.0.0.1") \\
            .config("spark.driver.host", "127.0.0.1")
        for k, v in t.CONF.items():
            builder = builder.config(k, v)
        spark = builder.getOrCreate()
        bootstrap, topics = {kafka_broker.bootstrap_servers!r}, {topics!r}
        query = t.start(spark, bootstrap, topics, {checkpoint!r})
        t.wait_for(lambda: query.status["isTriggerActive"], 60, "batch 0", query)
        recs = t.records(["a", "b"], 5)
        produce(spark, bootstrap, topics[0], recs)
        _, outputs = t.expected(recs)
        got = t.read_outputs(spark, bootstrap, topics[1], len(outputs), 25, query)
        before_end = t.committed_batches({checkpoint!r}) == []
        t.wait_for(lambda: t.committed_batches({checkpoint!r}), 60, "the commit", query)
        more = t.records(["a", "c"], 2, offset=50)
        produce(spark, bootstrap, topics[0], more)
        _, all_outputs = t.expected(recs + more)
        later = t.read_outputs(spark, bootstrap, topics[1], len(all_outputs), 60, query)
        query.stop()
        print(json.dumps({{"before_end": before_end, "error": str(query.exception() or ""),
                          "outputs": got == outputs, "later": later == all_outputs}}))
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in (_CONNECT_MODE, "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == \
        {"before_end": True, "error": "", "outputs": True, "later": True}
    # Batch 0 ran the first records (the second ones, batch 1, may have ended uncommitted).
    first = records(["a", "b"], 5)
    assert read_totals(rtm_spark, checkpoint, batch=0) == expected(first)[0]
    changes = mws.read_state_changes(rtm_spark, checkpoint, start_batch=0, end_batch=0)
    assert sorted(tuple(r) for r in changes.collect()) == \
        sorted((0, "update", key, n, total) for key, (n, total) in expected(first)[0].items())
    if 1 in committed_batches(checkpoint):
        more = records(["a", "c"], 2, offset=50)
        assert read_totals(rtm_spark, checkpoint, batch=1) == expected(first + more)[0]


@pytest.mark.parametrize("case", ["group function", "order_by", "initial_state"])
def test_what_cannot_run_record_by_record_is_refused(kafka_broker, rtm_spark, tmp_path, case):
    spark, bootstrap = rtm_spark, kafka_broker.bootstrap_servers
    topics = make_topics(kafka_broker, "rtm-refused-in", "rtm-refused-out")
    records_in = source(spark, bootstrap, topics[0])
    if case == "group function":
        out = mws.map_groups_with_state(records_in.withColumnRenamed("key", "word"), "word",
                                        map_running_count())
        expected_text = "a group function is not supported"
    elif case == "order_by":
        out = map_with_state(records_in, key="key", spec=running_total_spec(), order_by="amount")
        expected_text = "order_by is not supported"
    else:
        seed = spark.createDataFrame([("a", 1, 1)], "key STRING, n BIGINT, total BIGINT")
        out = map_with_state(records_in, key="key",
                             spec=running_total_spec().initial_state(seed))
        expected_text = "initial_state is not supported"
    query = out.select(F.to_json(F.struct("*")).alias("value")).writeStream.format("kafka") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", topics[1]) \
        .option("checkpointLocation", str(tmp_path / "checkpoint")) \
        .outputMode("update").trigger(realTime=BATCH).start()
    try:
        query.awaitTermination(120)
        error = query.exception()
    except StreamingQueryException as e:
        error = e
    finally:
        query.stop()
    assert error is not None, f"{case}: the query ran"
    assert "MAPWITHSTATE_UNSUPPORTED_IN_REAL_TIME_MODE" in str(error), str(error)
    assert expected_text in str(error), str(error)


def test_server_killed_during_a_real_time_batch_restarts_exactly_once_in_state(
        long_runs, request):
    """On the heap backend, whose state is then read back: every record's effect once."""
    long_runs.outcome(request)


@LONG.body("test_server_killed_during_a_real_time_batch_restarts_exactly_once_in_state")
def server_killed_during_a_real_time_batch_restarts_exactly_once_in_state(run):
    kafka_broker, bootstrap = run.broker, run.broker.bootstrap_servers
    topics = make_topics(kafka_broker, "rtm-kill-in", "rtm-kill-out")
    checkpoint = str(run.tmp_path / "checkpoint")
    first, second = records(["a", "b", "c"], 9), records(["a", "d"], 6, offset=100)
    with mws.LocalConnectServer(master=MASTER, conf=CONF, packages=["kafka"]) as doomed:
        spark = doomed.session()
        query = start(spark, bootstrap, topics, checkpoint, spec=running_total_spec("memory"),
                      trigger={"realTime": "20 seconds"})
        produce(spark, bootstrap, topics[0], first)
        # Batch 0 commits the first records' state; the next batch runs the second ones, and
        # dies with the server before its end: their outputs are out, their state not committed.
        wait_for(lambda: committed_batches(checkpoint), 90, "batch 0's commit", query)
        before = committed_batches(checkpoint)
        produce(spark, bootstrap, topics[0], second)
        _, outputs = expected(first + second)
        read_outputs(spark, bootstrap, topics[1], len(outputs), 25, query)
        killed_after = committed_batches(checkpoint)
        kill_local_server(doomed)
    # The second records were run, but the batch that ran them never committed: the restarted
    # query runs them again, on the state batch 0 committed.
    assert killed_after == before, (before, killed_after)

    # Restarted: the second records run again (writing the same outputs again, which the
    # de-duplication by key checks are the same), then one more record per key, whose output
    # shows the key's state: every record's effect once.
    probes = [(key, "0") for key in "abcd"]
    _, outputs = expected(first + second + probes)
    # (On the session's Kafka server: the checkpoint keeps the query's 2 shuffle partitions.)
    spark = run.spark
    query = start(spark, bootstrap, topics, checkpoint, spec=running_total_spec("memory"),
                  trigger={"realTime": "5 seconds"})
    try:
        wait_for(lambda: len(committed_batches(checkpoint)) > len(killed_after), 90,
                 "a batch after the restart to commit", query)
        produce(spark, bootstrap, topics[0], probes)
        assert read_outputs(spark, bootstrap, topics[1], len(outputs), 60, query) == outputs
        # The batch that ran the probes commits next: then the state holds every record once.
        ran_probes = max(committed_batches(checkpoint))
        wait_for(lambda: max(committed_batches(checkpoint)) > ran_probes, 60,
                 "the commit of the batch that ran the probes", query)
        assert query.exception() is None
    finally:
        query.stop()
    assert read_totals(spark, checkpoint) == expected(first + second + probes)[0]


@mws.state_function("n BIGINT")
def counted_until_idle(key, amount, state):
    """Counts a key's records, emitting (n, the record's amount); when the key has been idle
    for its timeout, emits -n (its state is then removed)."""
    if state.timing_out:
        return {"key": key, "n": -state.n, "total": 0}
    state.update(n=(state.n or 0) + 1)
    return {"key": key, "n": state.n, "total": amount}


@mws.state_function("n BIGINT")
def counted_until_timer(key, amount, state):
    """Counts a key's records, emitting (n, the record's amount), each record setting the
    key's processing-time timer 2 s after its call; when it fires, emits -n and removes the
    state."""
    if state.timing_out:
        n = state.n
        state.remove()
        return {"key": key, "n": -n, "total": 0}
    state.update(n=(state.n or 0) + 1)
    state.set_timer(state.batch_time + timedelta(seconds=2))
    return {"key": key, "n": state.n, "total": amount}


def outputs_of(spark, bootstrap, topic, key):
    """The outputs (``key/n``, {n, total}) written for `key`, every copy, in no set order."""
    return [(k, json.loads(v)) for k, v in consume(spark, bootstrap, topic)
            if k.startswith(f"{key}/")]


# Each kind of expiry on one backend (each backend finds due keys through its own expiry
# index), not all four pairs: each case is a minute of real-time batches.
@pytest.mark.parametrize("expiry,backend", [("idle timeout", "rocksdb"), ("timer", "memory")])
def test_a_timeout_fires_within_a_long_batch_once_and_commits_with_it(
        long_runs, request, expiry, backend):
    """A key whose idle timeout or processing-time timer (2 s) falls within a long batch (20 s)
    times out against the wall clock within about the look interval (100 ms) of its deadline,
    though no record arrives after its own, in its state partition or any other: its output is
    readable while that batch still runs (its commit not yet written), and the idle timeout
    needs no scanning batch (checkpoint_interval stays 10). It fires once: not again at the
    batch's end. The state change commits with the batch: after the commit, a record for the
    key starts a new count (which times out in its turn).
    """
    long_runs.outcome(request)


@LONG.body("test_a_timeout_fires_within_a_long_batch_once_and_commits_with_it")
def a_timeout_fires_within_a_long_batch_once_and_commits_with_it(run, expiry, backend):
    spark, bootstrap = run.spark, run.broker.bootstrap_servers
    topics = make_topics(run.broker, "rtm-timeout-in", "rtm-timeout-out")
    checkpoint = str(run.tmp_path / "checkpoint")
    spec = counted_until_idle.timeout("2 seconds") if expiry == "idle timeout" \
        else counted_until_timer.timeout_domain("processing_time")

    def k_outputs():
        return outputs_of(spark, bootstrap, topics[1], "k")

    query = start(spark, bootstrap, topics, checkpoint, spec=spec.backend(backend),
                  trigger={"realTime": "20 seconds"})
    try:
        # Batch 0 is cold (the state store, the Kafka clients, the JIT): a record of another
        # key warms it up, and the test runs in batch 1, which starts as batch 0 commits.
        wait_for(lambda: query.status["isTriggerActive"], 60, "batch 0 to start", query)
        produce(spark, bootstrap, topics[0], [("warm-up", "0")])
        read_outputs(spark, bootstrap, topics[1], 1, 60, query)
        wait_for(lambda: committed_batches(checkpoint), 60, "batch 0's commit", query)

        # Nothing more is produced until k has timed out (its record's output and the timeout's
        # are checked at the end: reading the topic back may take longer than the timeout).
        produce(spark, bootstrap, topics[0], [("k", "1")])
        wait_for(lambda: any(key == "k/-1" for key, _ in k_outputs()), 20, "k to time out",
                 query)
        assert committed_batches(checkpoint) == [0], \
            "k timed out only after its long batch (batch 1) had ended"

        wait_for(lambda: len(committed_batches(checkpoint)) >= 2, 60, "batch 1's commit", query)
        assert sorted(key for key, _ in k_outputs()) == ["k/-1", "k/1"], \
            "k timed out more than once"
        # A new count, which times out in its turn, with no record after it either.
        produce(spark, bootstrap, topics[0], [("k", "5")])
        wait_for(lambda: len(k_outputs()) >= 4, 30, "k's record after the commit, timed out",
                 query)
        after = k_outputs()
    finally:
        query.stop()
    assert query.exception() is None
    assert sorted(after, key=lambda o: (o[0], o[1]["total"])) == [
        ("k/-1", {"n": -1, "total": 0}), ("k/-1", {"n": -1, "total": 0}),
        ("k/1", {"n": 1, "total": 1}), ("k/1", {"n": 1, "total": 5})]
