"""A real Kafka broker for the tests, and the Kafka reads and writes they make through Spark.

:class:`KafkaBroker` runs Apache Kafka (the classpath ``dev/fetch-kafka`` resolved from the
``kafka_2.13`` Maven artifact, kept apart from Spark's jars) in KRaft mode as one process that is
both broker and controller: ``kafka-storage format`` on a fresh log directory, then
``java -cp ... kafka.Kafka server.properties``, listening on loopback only. Topics are made by
one admin client for the session (``kafka_admin/TopicAdmin.java``, a JVM started on first
use). Kafka's JVMs are killed when the process that started them dies (``PR_SET_PDEATHSIG``,
set by util-linux's ``setpriv``), so none outlives pytest.

Records go in and out through Spark's own Kafka source and sink (the connector the server loads
with ``packages=["kafka"]``), so the tests need no Python Kafka client.
"""
import base64
import os
import socket
import subprocess
import threading
import time
import uuid
from typing import Iterable, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_CLASSPATH = os.path.join(ROOT, ".tools", "kafka-broker", "classpath")
TOPIC_ADMIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_admin",
                           "TopicAdmin.java")
_LOOPBACK = "127.0.0.1"
# Kafka's JVMs are started through this, which sets the parent-death signal and execs java: a
# `preexec_fn` doing the same made Python fork the test process, whose gRPC threads (the
# Connect client's) now and then aborted the child before it ran (exit -6, gRPC's epoll
# error on its stderr); without one, the child is started by vfork, which runs no fork handler.
_DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_LOOPBACK, 0))
        return s.getsockname()[1]


def _cluster_id() -> str:
    """A KRaft cluster id, as ``kafka-storage random-uuid`` makes them (URL-safe base64 of 16
    random bytes, not starting with a dash)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


class KafkaBroker:
    """One Kafka 4 broker and controller in KRaft mode, on loopback, with its log directory
    (and its own log) under ``work_dir``.

    :param work_dir: an empty directory of this broker's own.
    :param startup_timeout: seconds to wait for the broker to say it started.
    """

    def __init__(self, work_dir: str, startup_timeout: float = 120.0) -> None:
        if not os.path.isfile(BROKER_CLASSPATH):
            raise FileNotFoundError(
                f"the Kafka broker's classpath ({BROKER_CLASSPATH}) is not fetched: run "
                "dev/fetch-kafka (dev/test runs it)")
        with open(BROKER_CLASSPATH) as f:
            self._classpath = f.read().strip()
        self.work_dir = work_dir
        self.port = _free_port()
        self.controller_port = _free_port()
        self.log_path = os.path.join(work_dir, "broker.log")
        self._process: Optional[subprocess.Popen] = None
        self._admin: Optional[subprocess.Popen] = None
        # Tests on threads of their own (tests/overlapped.py) make topics at once.
        self._admin_lock = threading.Lock()
        properties = self._write_properties()
        self._java("kafka.tools.StorageTool", "format", "--cluster-id", _cluster_id(),
                   "--config", properties, "--ignore-formatted")
        self._start(properties, startup_timeout)

    @property
    def bootstrap_servers(self) -> str:
        """The ``bootstrap.servers`` of this broker."""
        return f"{_LOOPBACK}:{self.port}"

    def _write_properties(self) -> str:
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{_LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{_LOOPBACK}:{self.port},"
                         f"CONTROLLER://{_LOOPBACK}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{_LOOPBACK}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": os.path.join(self.work_dir, "data"),
            # Topics are made by create_topics before use: one made by a first write raced the
            # write (an idempotent producer's first batch, appended, was sent again and refused
            # as out of sequence). A write to a topic not made fails.
            "auto.create.topics.enable": "false",
            # One broker: every internal topic has a single replica.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        path = os.path.join(self.work_dir, "server.properties")
        with open(path, "w") as f:
            f.writelines(f"{key}={value}\n" for key, value in settings.items())
        # INFO to a file of its own (Kafka's log4j2 default is errors only, to the console).
        with open(os.path.join(self.work_dir, "log4j2.properties"), "w") as f:
            f.write("rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = file\n"
                    "appender.file.type = File\nappender.file.name = file\n"
                    f"appender.file.fileName = {self.log_path}\n"
                    "appender.file.layout.type = PatternLayout\n"
                    "appender.file.layout.pattern = [%d] %p %m (%c)%n\n")
        return path

    def _java_command(self, main_class: str, *args: str, jars: Sequence[str] = ()) -> List[str]:
        return [*_DIE_WITH_PARENT, "java", "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC",
                "-Djava.net.preferIPv4Stack=true",
                "-Dlog4j2.configurationFile=" + os.path.join(self.work_dir, "log4j2.properties"),
                "-cp", os.pathsep.join([self._classpath, *jars]), main_class, *args]

    def start_client(self, main_class: str, *args: str, jars: Sequence[str],
                     out: str) -> subprocess.Popen:
        """Starts a program of `jars` that uses Kafka's clients (a producer), on the broker's
        class path, its output into the file `out`; like the broker, it is killed when this
        process dies."""
        with open(out, "wb") as f:
            return subprocess.Popen(self._java_command(main_class, *args, jars=jars), stdout=f,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def _java(self, main_class: str, *args: str) -> None:
        done = subprocess.run(self._java_command(main_class, *args), capture_output=True,
                              text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{main_class} {' '.join(args)} failed with code "
                               f"{done.returncode}:\n{done.stdout}\n{done.stderr}")

    def _start(self, properties: str, timeout: float) -> None:
        with open(os.path.join(self.work_dir, "broker.out"), "wb") as out:
            self._process = subprocess.Popen(
                self._java_command("kafka.Kafka", properties), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise RuntimeError(f"the Kafka broker exited with code {code} while starting; "
                                   f"its log ends with:\n{self.log_tail()}")
            if "Kafka Server started" in self.log_tail(400):
                return
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"the Kafka broker did not start within {timeout:.0f}s; its log "
                           f"ends with:\n{self.log_tail()}")

    def create_topics(self, *names: str, partitions: int = 2) -> None:
        """Makes topics, each with `partitions` partitions (so that records of different keys
        spread over partitions as in a real topic), through the session's admin client; it
        returns once the broker has made them all, as Kafka's ``kafka-topics --create`` does."""
        if not names or any(not n or n.split() != [n] for n in names):
            raise ValueError(f"topic names must be non-empty words, got {names!r}")
        with self._admin_lock:
            admin = self._topic_admin()
            assert admin.stdin is not None and admin.stdout is not None
            admin.stdin.write(f"create {partitions} {' '.join(names)}\n")
            admin.stdin.flush()
            answer = admin.stdout.readline().strip()
        if answer != "ok":
            raise RuntimeError(f"creating topics {', '.join(names)} failed: "
                               f"{answer or 'the admin client ended'}")

    def _topic_admin(self) -> subprocess.Popen:
        """The admin client (kafka_admin/TopicAdmin.java), started on first use: Java's source
        launcher compiles it on the broker's class path. Its answers come on its standard
        output; anything else it writes goes to ``topic-admin.out``."""
        if self._admin is None or self._admin.poll() is not None:
            out_path = os.path.join(self.work_dir, "topic-admin.out")
            with open(out_path, "ab") as out:
                self._admin = subprocess.Popen(
                    self._java_command(TOPIC_ADMIN, self.bootstrap_servers), text=True,
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=out)
            assert self._admin.stdout is not None
            if self._admin.stdout.readline().strip() != "ready":
                self._admin.wait()
                with open(out_path, errors="replace") as f:
                    raise RuntimeError(f"the topic admin client ended starting:\n{f.read()}")
        return self._admin

    def log_tail(self, lines: int = 40) -> str:
        """The end of the broker's log."""
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """Stops the topic admin client and the broker (SIGTERM, then SIGKILL after 30 s), and
        waits for them."""
        admin, self._admin = self._admin, None
        if admin is not None:
            assert admin.stdin is not None
            admin.stdin.close()  # the end of its input: it closes its client and exits
            try:
                admin.wait(timeout=30)
            except subprocess.TimeoutExpired:
                admin.kill()
                admin.wait()
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def topic_name(prefix: str) -> str:
    """A topic name of its own for one test (the broker is shared by the session); make it
    with :meth:`KafkaBroker.create_topics`."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def produce(spark, bootstrap: str, topic: str,
            records: Iterable[Tuple[Optional[str], str]]) -> None:
    """Writes (key, value) records to `topic` in their order, through Spark's Kafka sink in
    one task (records of one key land in one partition, in order)."""
    rows = list(records)
    spark.createDataFrame(rows, "key STRING, value STRING").coalesce(1).write.format("kafka") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()


def consume(spark, bootstrap: str, topic: str) -> List[Tuple[Optional[str], str]]:
    """Every committed record of `topic` as (key, value), read with
    ``isolation.level=read_committed``, in (partition, offset) order."""
    rows = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", topic).option("startingOffsets", "earliest") \
        .option("kafka.isolation.level", "read_committed").load() \
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                    "partition", "offset").collect()
    return [(r.key, r.value) for r in sorted(rows, key=lambda r: (r.partition, r.offset))]


def deduplicated(records: Sequence[Tuple[Optional[str], str]]) -> dict:
    """Records read back from an at-least-once sink, one per key: key -> value. A key seen
    twice must carry the same value (an idempotent key), else this raises."""
    by_key: dict = {}
    for key, value in records:
        if key in by_key and by_key[key] != value:
            raise AssertionError(f"key {key!r} was written twice with different values: "
                                 f"{by_key[key]!r} and {value!r}")
        by_key[key] = value
    return by_key
