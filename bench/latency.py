"""L1, latency: end-to-end latency of a running count per key from Kafka to Kafka, per record,
in Spark's Real-Time Mode and in micro-batches (issue 43): map_with_state, transformWithState
(Scala) and transformWithStateInPandas.

A producer (bench/jvm's ``FixedRateProducer``, a Kafka producer in a JVM of its own) writes
``--rate`` records a second over ``--keys`` keys, spread evenly (each millisecond's due records);
each pipeline (``--modes``, see ``MODES``) reads them and writes one output per record,
carrying the input record's Kafka timestamp, on Spark's RocksDB store. A record's latency is
its output's Kafka timestamp (set by Spark's Kafka producer as it sends the output) minus its
input's (set as the producer sent it): produce to output sent, which is when a consumer can
read it, give or take the broker's append. The measured window starts ``--warmup`` seconds
after the pipeline's first output (a new pipeline's first batch is cold, and its first records
wait for it) and lasts ``--seconds``.

    dev/fetch-kafka && dev/sbt bench/package
    .venv/bin/python -m bench.latency --rate 10000 --seconds 45 --warmup 60 \
        --batch "5 minutes" --shuffle-wait-ms 5 --modes realtime,tws-realtime

It starts its own broker (tests/kafka.py) and a local Connect server with 8 task slots
(Real-Time Mode starts every stage at once, the input topic's 2 partitions and 2 state
partitions, and fails if any of them finds no free slot: the read-backs hold some).
transformWithState (``tws-*``) runs in a spark-submit of its own, a classic session with 6
slots and no UI; so does ours in ``classic-*`` (bench/latency_classic.py), set up the same way:
ours in the server against ours classic is the Connect server's difference, ours classic
against transformWithState the operator's.

Besides the latencies it prints, per pipeline, the medians of its batches' durations over the
window (from their progress: the Connect server's queries', and the lines the spark-submit
pipelines print) and the CPU its JVM used then, by kind of thread (bench/threadtime.py), per
10k records. Nothing here is asserted; on a shared machine, quote it with the machine's load.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)

import pandas as pd  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.streaming.stateful_processor import (  # noqa: E402
    StatefulProcessor, StatefulProcessorHandle)
from pyspark.sql.types import LongType, StructField, StructType  # noqa: E402

import mapwithstate as mws  # noqa: E402
from mapwithstate import StateSpec, map_with_state  # noqa: E402
from mapwithstate import functions as S  # noqa: E402
from bench import jvm_systems  # noqa: E402
from bench.connect_systems import ROCKSDB_PROVIDER  # noqa: E402
from bench.threadtime import ThreadTimes  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
from kafka import KafkaBroker, topic_name  # noqa: E402

#: Settings for latency rather than throughput, as Spark's own Real-Time Mode benchmark
#: (RTMKafkaKafkaBenchmark) takes them: the source's fetch returns after 10 ms without data
#: (Kafka's default waits 500 ms), and a query polls its source every 10 ms.
SOURCE_OPTIONS = {"kafka.fetch.max.wait.ms": "10",
                  "kafka.max.partition.fetch.bytes": str(10 << 20)}
SERVER_CONF = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.pollingDelay": "10ms",
               # every batch of a window at 10k records/s (3-5 a second), not Spark's last 100
               "spark.sql.streaming.numRecentProgressUpdates": "1000",
               # as the spark-submit pipelines log (their applications set WARN): at Spark's
               # INFO every task and commit logs, RocksDB's commit its metrics as JSON
               "spark.log.level": "WARN"}
#: The spark-submit pipelines' settings: the server's, without a UI, on loopback.
SUBMIT_CONF = {**SERVER_CONF, "spark.ui.enabled": "false",
               "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
#: How long Real-Time Mode's pipelined shuffle holds a partly filled buffer before sending it
#: (Spark's default: 50 ms); a server setting, see docs/kafka.md.
SHUFFLE_WAIT = "spark.shuffle.streaming.networkBufferMaxWaitTimeMs"
#: What starts a line of a spark-submit pipeline's log holding a batch's progress (JSON):
#: bench/jvm's TransformWithStateLatency and bench/latency_classic.py print them.
PROGRESS_PREFIX = "mapwithstate-progress "
#: The repository, which a classic pipeline's driver (bench/latency_classic.py) imports from.
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: How long the producer runs beyond the measurement: at most this for the pipeline's first
#: output (a cold start on a busy machine), the rest of it idle.
PRODUCER_START_SECONDS = 300


def trigger(mode: str, args) -> dict:
    """How `mode` triggers the pipeline."""
    return {"realtime": {"realTime": args.batch},
            "microbatch": {"processingTime": "0 seconds"}}[mode]


def running_count() -> StateSpec:
    n = F.coalesce(S.state("n"), F.lit(0)) + 1
    return StateSpec.function(
        "n BIGINT", update=F.struct(n.alias("n")),
        emit=F.struct(F.col("key"), S.new_state("n").alias("n"), F.col("produced"))
    ).backend("rocksdb")


def outputs(spark, bootstrap: str, topic: str):
    """The output topic's records: when each input was produced and its output sent (ms)."""
    return spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", topic).option("startingOffsets", "earliest").load() \
        .select(F.get_json_object(F.col("value").cast("string"), "$.produced")
                .cast("long").alias("produced"),
                F.unix_millis("timestamp").alias("sent"), F.col("key"), F.col("value"))


def wait_for_first_output(spark, bootstrap: str, topic: str, pipeline, timeout: float):
    """Waits until the pipeline has written an output: from then on it runs, warm or not."""
    deadline = time.time() + timeout
    while outputs(spark, bootstrap, topic).limit(1).count() == 0:
        if pipeline.failure() is not None or time.time() > deadline:
            raise RuntimeError(f"no output from the pipeline: {pipeline.failure()}")
        time.sleep(1)


def kafka_source(spark, bootstrap: str, topic: str):
    """The input topic's records as (key, produced): the key and its Kafka timestamp."""
    return spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .options(**SOURCE_OPTIONS).option("subscribe", topic) \
        .option("startingOffsets", "earliest").load() \
        .select(F.col("key").cast("string").alias("key"),
                F.col("timestamp").alias("produced"))


def kafka_sink(outputs_df, bootstrap: str, topic: str, checkpoint: str, trigger_: dict):
    return outputs_df.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic).option("checkpointLocation", checkpoint) \
        .outputMode("update").trigger(**trigger_).start()


class ConnectPipeline:
    """A pipeline run as a query of the Connect server (whose JVM's CPU `run_mode` measures)."""

    pid = None

    def __init__(self, query):
        self.query = query

    def failure(self):
        return self.query.exception()

    def batches(self):
        """Each batch's progress (``StreamingQueryProgress`` as a dict)."""
        return self.query.recentProgress

    def stop(self):
        self.query.stop()


def ours(spark, bootstrap, source, sink, checkpoint, trigger_, args):
    """map_with_state's running count (the Column spec, on RocksDB)."""
    counted = map_with_state(kafka_source(spark, bootstrap, source), key="key",
                             spec=running_count()) \
        .select(F.col("key"), F.to_json(F.struct(
            F.col("n"), F.unix_millis("produced").alias("produced"))).alias("value"))
    return ConnectPipeline(kafka_sink(counted, bootstrap, sink, checkpoint, trigger_))


class PandasRunningCount(StatefulProcessor):
    """transformWithStateInPandas's running count: a ``ValueState`` per key, one output per
    record with the same JSON value as ours."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._count = handle.getValueState("count", StructType([StructField("n", LongType())]))

    def handleInputRows(self, key, rows, timerValues):  # type: ignore[override]
        n = self._count.get()[0] if self._count.exists() else 0
        for pdf in rows:
            counts = n + pd.RangeIndex(1, len(pdf) + 1)
            n += len(pdf)
            yield pd.DataFrame({
                "key": key[0],
                "value": [f'{{"n":{c},"produced":{p}}}'
                          for c, p in zip(counts, pdf["produced_ms"], strict=True)]})
        self._count.update((n,))

    def close(self) -> None:
        pass


def tws_pandas(spark, bootstrap, source, sink, checkpoint, trigger_, args):
    """transformWithStateInPandas's running count, on Spark's RocksDB store (it takes no
    other), run by the server's Python workers."""
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
    records = kafka_source(spark, bootstrap, source) \
        .select("key", F.unix_millis("produced").alias("produced_ms"))
    counted = records.groupBy("key").transformWithStateInPandas(
        PandasRunningCount(), "key STRING, value STRING", "Update", "None")
    try:
        return ConnectPipeline(kafka_sink(counted, bootstrap, sink, checkpoint, trigger_))
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")


class SubmittedPipeline:
    """A pipeline run by pyspark's spark-submit on a classic session of its own, with 6 task
    slots and no UI: `app` is what follows spark-submit's options (a class and its jar, or a
    Python file), with the pipeline's arguments. Its log holds each batch's progress
    (`PROGRESS_PREFIX`); spark-submit execs the JVM, so `pid` is the JVM's."""

    def __init__(self, app, jars, checkpoint, conf, java_options, env=None):
        import pyspark

        home = os.path.dirname(os.path.abspath(pyspark.__file__))
        command = [os.path.join(home, "bin", "spark-submit"), "--master", "local[6]",
                   "--driver-memory", "1g", "--jars", ",".join(jars)]
        for key, value in {**SUBMIT_CONF, **conf}.items():
            command += ["--conf", f"{key}={value}"]
        if java_options:
            command += ["--driver-java-options", java_options]
        env = {**os.environ, "SPARK_HOME": home, **(env or {})}
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        self._log = os.path.join(os.path.dirname(checkpoint), "spark-submit.log")
        with open(self._log, "wb") as out:
            self._process = subprocess.Popen(command + app, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=env,
                                             cwd=os.path.dirname(checkpoint))
        self.pid = self._process.pid

    def failure(self):
        code = self._process.poll()
        return None if code is None else f"spark-submit exited {code}, see {self._log}"

    def batches(self):
        return progress_in_log(self._log)

    def stop(self):
        self._process.terminate()
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def progress_in_log(path: str) -> list:
    """The batches' progress a spark-submit pipeline printed in its log (`PROGRESS_PREFIX`)."""
    with open(path, errors="replace") as log:
        return [json.loads(line[len(PROGRESS_PREFIX):]) for line in log
                if line.startswith(PROGRESS_PREFIX)]


def submitted_trigger(trigger_: dict) -> str:
    """`trigger_` as the spark-submit pipelines take it: realtime:<duration> or microbatch."""
    return f"realtime:{trigger_['realTime']}" if "realTime" in trigger_ else "microbatch"


def tws_scala(spark, bootstrap, source, sink, checkpoint, trigger_, args):
    """transformWithState's running count in Scala (bench/jvm's TransformWithStateLatency)."""
    return SubmittedPipeline(
        ["--class", "io.mapwithstate.bench.TransformWithStateLatency", jvm_systems.jar(),
         bootstrap, source, sink, checkpoint, submitted_trigger(trigger_), "3600"],
        mws.package_jars("kafka"), checkpoint, submit_conf(args),
        submit_java_options(args, "tws"))


def ours_classic(spark, bootstrap, source, sink, checkpoint, trigger_, args):
    """Ours' running count on a classic session of its own (bench/latency_classic.py), set up
    as transformWithState's: the plugin's jar and its extensions, as docs/classic.md says."""
    return SubmittedPipeline(
        [os.path.join(_REPO, "bench", "latency_classic.py"),
         bootstrap, source, sink, checkpoint, submitted_trigger(trigger_), "3600"],
        [mws.jar_path(), *mws.package_jars("kafka")], checkpoint,
        {"spark.sql.extensions": mws.SQL_EXTENSIONS_CLASS, **submit_conf(args)},
        submit_java_options(args, "classic"),
        env={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
             "PYTHONPATH": os.pathsep.join(
                 p for p in [_REPO, os.environ.get("PYTHONPATH")] if p)})


def submit_conf(args) -> dict:
    """The spark-submit pipelines' own settings: the shuffle wait, and `--submit-conf`'s."""
    conf = {SHUFFLE_WAIT: str(args.shuffle_wait_ms)}
    for setting in args.submit_conf:
        key, _, value = setting.partition("=")
        conf[key] = value
    return conf


def submit_java_options(args, who: str) -> str:
    """`--submit-java-options` for one spark-submit pipeline, `{who}` replaced (a profile's
    file name)."""
    return args.submit_java_options.replace("{who}", who)


#: The pipelines L1 compares: (who runs the running count, how it is triggered).
MODES = {
    "realtime": (ours, "realtime"),
    "microbatch": (ours, "microbatch"),
    "classic-realtime": (ours_classic, "realtime"),
    "classic-microbatch": (ours_classic, "microbatch"),
    "tws-realtime": (tws_scala, "realtime"),
    "tws-microbatch": (tws_scala, "microbatch"),
    "tws-pandas-microbatch": (tws_pandas, "microbatch"),
}


#: The per-batch figures L1 prints for each pipeline: its progress's durations (ms).
BATCH_PHASES = ("triggerExecution", "addBatch", "queryPlanning", "latestOffset", "walCommit",
                "commitOffsets")


def started_at(progress: dict) -> float:
    """When a batch started (its progress's ``timestamp``), in seconds since the epoch."""
    return datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ") \
        .replace(tzinfo=timezone.utc).timestamp()


def state_commit_ms(progress: dict):
    """The batch's slowest state commit (ms), or None without a stateful operator."""
    commits = [op.get("commitTimeMs") for op in progress.get("stateOperators", [])]
    return max((c for c in commits if c is not None), default=None)


def input_rows(progress: dict) -> int:
    """The batch's input records, over its sources (a progress's own total may be absent)."""
    return sum(source["numInputRows"] for source in progress.get("sources", []))


def batch_figures(mode: str, batches, start: float, end: float) -> str:
    """A table row of the medians over the batches that started in [start, end): records a
    batch, each of `BATCH_PHASES`, the state's commit (median, max)."""
    window = [b for b in batches if start <= started_at(b) < end]
    if not window:
        return f"| {mode} | 0 |" + " |" * (len(BATCH_PHASES) + 2)

    def median(values) -> str:
        values = [v for v in values if v is not None]
        return f"{statistics.median(values):.0f}" if values else "–"

    commits = [state_commit_ms(b) for b in window]
    phases = " | ".join(median(b["durationMs"].get(p) for b in window) for p in BATCH_PHASES)
    worst = max((c for c in commits if c is not None), default=None)
    return (f"| {mode} | {len(window)} | {median(input_rows(b) for b in window)} | {phases} "
            f"| {median(commits)} / {worst if worst is not None else '–'} |")


def run_mode(spark, broker, mode, args, work, server_pid):
    """Runs `mode` for `args.seconds` after its first output: (outputs measured, distinct ones,
    [p50, p99], max in ms), its `batch_figures` row over the same window, and the CPU its JVM
    used then by kind of thread (`ThreadTimes`: the Connect server's, or the spark-submit
    pipeline's); an output written twice (a re-run batch's) counts once in `distinct`. Only the
    outputs written by 5 s after the producer stops count: fewer than `rate` x `seconds` means
    the pipeline fell behind (none: by more than the window). With `args.trace`, prints each
    batch and each second's latencies."""
    bootstrap = broker.bootstrap_servers
    source, sink = topic_name("latency-in"), topic_name("latency-out")
    broker.create_topics(source, sink)
    os.makedirs(os.path.join(work, mode))
    start, how = MODES[mode]
    pipeline = start(spark, bootstrap, source, sink, os.path.join(work, mode, "q"),
                     trigger(how, args), args)
    cpu = ThreadTimes(pipeline.pid or server_pid, os.cpu_count() or 1)
    # Records spread evenly at the rate, by a JVM of their own (bench/jvm's FixedRateProducer),
    # for as long as the pipeline may take to start and then the warm-up and the window.
    producer = broker.start_client(
        "io.mapwithstate.bench.FixedRateProducer", bootstrap, source, str(args.rate),
        str(args.keys), str(PRODUCER_START_SECONDS + args.warmup + args.seconds),
        jars=[jvm_systems.jar()], out=os.path.join(work, mode, "producer.log"))
    try:
        wait_for_first_output(spark, bootstrap, sink, pipeline,
                              timeout=PRODUCER_START_SECONDS)
        started = time.time()
        time.sleep(args.warmup)
        with cpu.measuring():
            time.sleep(args.seconds)
    finally:
        producer.kill()
        producer.wait()
    # While the JVM runs: the summary says "not measured" of a process that has ended.
    used, records = sum(cpu.cpu.values()), args.rate * args.seconds
    cpu_line = (f"{cpu.summary(mode)}; {10_000 * used / records:.2f} s of CPU per 10k records"
                if records and used else cpu.summary(mode))
    time.sleep(5)  # the last records through
    batches = pipeline.batches()
    pipeline.stop()
    window = started + args.warmup
    figures = batch_figures(mode, batches, window, window + args.seconds)
    out = outputs(spark, bootstrap, sink) \
        .where(F.col("produced") >= int(window * 1000)) \
        .select((F.col("sent") - F.col("produced")).alias("ms"), "produced", "key", "value")
    if args.trace:
        for batch in batches:
            print(f"  {mode} batch {batch['batchId']} started {batch['timestamp']}: "
                  f"{input_rows(batch)} records, {batch['durationMs']}, state commit "
                  f"{state_commit_ms(batch)} ms")
        by_second = out.groupBy(F.floor(F.col("produced") / 1000).alias("second")).agg(
            F.count("*").alias("n"), F.percentile_approx("ms", 0.5).alias("p50"),
            F.max("ms").alias("max")).orderBy("second")
        for r in by_second.collect():
            print(f"  {time.strftime('%H:%M:%S', time.gmtime(r.second))}: {r.n} records, "
                  f"p50 {r.p50} ms, max {r.max} ms")
    # Exact percentiles over the measured records, here: percentile_approx beside a distinct
    # count merges a quantile summary per row on the server, minutes for a minute's records.
    measured = out.select("ms", "key", "value").toPandas()
    if measured.empty:  # it fell behind by more than the window: nothing of it came out
        return (0, 0, [None, None], None), figures, cpu_line
    p50, p99 = measured["ms"].quantile([0.5, 0.99], interpolation="higher")
    distinct = len(measured.drop_duplicates(["key", "value"]))
    return ((len(measured), distinct, [int(p50), int(p99)], int(measured["ms"].max())), figures,
            cpu_line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000, help="records a second")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--seconds", type=int, default=60, help="how long each mode is measured")
    parser.add_argument("--warmup", type=int, default=15,
                        help="seconds left out after the pipeline's first output")
    parser.add_argument("--modes", default="realtime,microbatch",
                        help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--batch", default="30 seconds",
                        help="Real-Time Mode's batch duration (its checkpoint interval)")
    parser.add_argument("--shuffle-wait-ms", type=int, default=50,
                        help=f"{SHUFFLE_WAIT} of the servers (Spark's default: 50)")
    parser.add_argument("--server-java-options", default="",
                        help="the Connect server JVM's options, e.g. -agentpath: for a profiler")
    parser.add_argument("--submit-java-options", default="",
                        help="the spark-submit pipelines' JVM options, {who} replaced by tws or "
                             "classic (e.g. -XX:StartFlightRecording=filename=/tmp/{who}.jfr)")
    parser.add_argument("--submit-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the spark-submit pipelines (repeatable)")
    parser.add_argument("--trace", action="store_true",
                        help="print each batch's progress and each second's latencies")
    args = parser.parse_args()
    unknown = [m for m in args.modes.split(",") if m not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; known: {', '.join(MODES)}")
    work = tempfile.mkdtemp(prefix="mws-latency-")
    os.makedirs(os.path.join(work, "broker"))
    broker = KafkaBroker(os.path.join(work, "broker"))
    figures, cpu = [], []
    try:
        conf = {**SERVER_CONF, SHUFFLE_WAIT: str(args.shuffle_wait_ms)}
        if args.server_java_options:
            conf["spark.driver.extraJavaOptions"] = args.server_java_options
        with mws.LocalConnectServer(master="local[8]", packages=["kafka"], conf=conf) as server:
            spark = server.session()
            print("| mode | rate (records/s) | outputs | distinct | p50 ms | p99 ms | max ms |")
            print("|---|---|---|---|---|---|---|")
            for mode in args.modes.split(","):
                (n, distinct, (p50, p99), worst), row, used = run_mode(
                    spark, broker, mode, args, work, server.pid)
                figures.append(row)
                cpu.append(used)
                print(f"| {mode} | {args.rate} | {n} | {distinct} | {p50} | {p99} | {worst} |",
                      flush=True)
    finally:
        broker.stop()
    print("\nMedians over the batches started in each window (ms; the state commit's max too):\n")
    print(f"| mode | batches | records/batch | {' | '.join(BATCH_PHASES)} | state commit |")
    print("|---|" + "---|" * (len(BATCH_PHASES) + 3))
    print("\n".join(figures))
    print()
    print("\n".join(f"- {line}" for line in cpu))


if __name__ == "__main__":
    main()
