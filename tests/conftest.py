"""The sessions the tests run on: one real Spark Connect server with the real plugin jar, and
(for suites that run on both) one classic SparkSession in this process with the same jar.

A module opts into both with ``pytestmark = pytest.mark.sessions("connect", "classic")``: its
tests that use the ``spark`` fixture then run once per session kind. A test that can only run
on Connect (it needs a second server, or Connect's lazy errors) is marked ``connect_only``.
"""
import os
import warnings

import pytest

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)

import mapwithstate as mws  # noqa: E402
from shared_server import SHUFFLE_PARTITIONS, shared_server  # noqa: E402

# Set by pyspark once a Connect session exists; pyspark.sql.functions (and so the state
# functions) then make Connect Columns. Classic tests run with it unset.
_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
# The backend of a spec that names none; the `backends` marker sets it per test.
BACKEND_CONF = "spark.mapwithstate.stateStore.backend"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "sessions(*kinds): run the module's tests on each session kind "
                   "('connect', 'classic')")
    config.addinivalue_line("markers", "connect_only: runs on the Spark Connect session only")
    config.addinivalue_line(
        "markers", "backends(*names): also run the module's Connect tests with the state in "
                   "each named backend ('rocksdb'), set as the session's default backend")
    config.addinivalue_line("markers", "memory_only: about the heap backend's own files")
    config.addinivalue_line(
        "markers", "backend_only(name): runs once, on Connect with the state in that backend")


def pytest_generate_tests(metafunc):
    if "spark" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("sessions")
    kinds = list(marker.args) if marker else ["connect"]
    if metafunc.definition.get_closest_marker("connect_only"):
        kinds = ["connect"]
    only = metafunc.definition.get_closest_marker("backend_only")
    backends = metafunc.definition.get_closest_marker("backends")
    if only:
        metafunc.parametrize("spark", [("connect", only.args[0])], indirect=True,
                             ids=[f"connect-{only.args[0]}"])
    elif backends and not metafunc.definition.get_closest_marker("memory_only"):
        # The heap backend on every session kind; the others on Connect only, to keep the
        # suite's time in check (classic and Connect plan through the same JVM code).
        kinds = [(k, "memory") for k in kinds] + \
                [("connect", b) for b in backends.args if "connect" in kinds]
        metafunc.parametrize("spark", kinds, indirect=True,
                             ids=[k if b == "memory" else f"{k}-{b}" for k, b in kinds])
    else:
        metafunc.parametrize("spark", kinds, indirect=True)


@pytest.fixture(scope="session")
def server():
    """The local Connect server (tests/shared_server.py) every Connect test of the session
    shares."""
    with shared_server() as s:
        yield s


@pytest.fixture(scope="session")
def testing_server():
    """A session on a second local Connect server, in Spark's testing mode, which the
    test-only failure injector and repartition interruption need; tasks may fail 3 times
    (local[2,3]) so failures are retried, and state store maintenance runs every second
    (RocksDB uploads its snapshots there, and the stores of a stopped run close promptly).
    One for the session: test_repartition_state and test_streaming share it."""
    conf = {"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS,
            "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
            "spark.driver.extraJavaOptions": "-Dspark.testing=true"}
    with mws.LocalConnectServer(master="local[2,3]", conf=conf) as s:
        session = s.session()
        yield session
        session.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real Kafka broker (tests/kafka.py) for the whole session, started by the first test
    that needs it; a fresh log directory each session."""
    from kafka import KafkaBroker

    broker = KafkaBroker(str(tmp_path_factory.mktemp("kafka-broker")))
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kafka_server():
    """A local Connect server with Spark's Kafka connector (``packages=["kafka"]``).

    It has 24 task slots, for the Real-Time Mode tests (tests/test_real_time.py): a real-time
    batch runs every stage at once, each partition a task (4 there), and the reads of its
    output topic need slots beside them (2 each); those tests run four such queries at once,
    each read by a thread of its own."""
    with mws.LocalConnectServer(master="local[24]",
                                conf={"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS},
                                packages=["kafka"]) as s:
        yield s


@pytest.fixture
def kafka_spark(kafka_server, monkeypatch):
    """A session on the Kafka-enabled server, pyspark making Connect Columns."""
    monkeypatch.setenv(_CONNECT_MODE, "1")
    session = kafka_server.session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_spark(server):
    session = server.session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def classic_spark(tmp_path_factory):
    """A classic SparkSession in this process, with the plugin jar and its SQL extensions.

    Launched as the local Connect server is: Spark from the installed pyspark (whatever
    ``SPARK_HOME`` the environment has), bound to loopback, the JVM's output kept in a log
    file. pyspark's own launch lets the JVM's output go to the test's captured stderr and
    says only "Java gateway process exited" when it dies starting; this fixture quotes the
    JVM's log, and tries a second JVM once if the first dies before the plugin is even
    loaded (warning with the first one's log).
    """
    import pyspark
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    conf = (SparkConf(loadDefaults=False).setMaster("local[2]")
            .setAppName("mapwithstate-classic-tests")
            .set("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
            .set("spark.ui.enabled", "false")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.driver.host", "127.0.0.1"))
    # What a Connect server gets, less Connect's own settings: the jar, the extensions and
    # the fork-free checkpoint file manager.
    for key, value in mws.server_conf().items():
        if not key.startswith("spark.connect."):
            conf.set(key, value)
    logs = tmp_path_factory.mktemp("classic-jvm")
    with pytest.MonkeyPatch.context() as env:
        env.delenv(_CONNECT_MODE, raising=False)
        env.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
        env.setenv("SPARK_HOME", os.path.dirname(os.path.abspath(pyspark.__file__)))
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        failures = []
        for attempt in (1, 2):
            log_path = logs / f"gateway-{attempt}.log"
            with open(log_path, "wb") as log:
                try:
                    gateway = launch_gateway(conf, popen_kwargs={"stdout": log,
                                                                 "stderr": log})
                    break
                except Exception as e:  # noqa: BLE001 -- quoted with the JVM's log below
                    failures.append(f"attempt {attempt}: {e}\n{_tail(log_path)}")
            if attempt == 1:
                warnings.warn("the classic Spark JVM died starting; trying once more. "
                              + failures[-1], stacklevel=1)
        else:
            raise RuntimeError("the classic Spark JVM died starting, twice:\n"
                               + "\n".join(failures))
        SparkContext(conf=conf, gateway=gateway)
        session = SparkSession.builder.getOrCreate()
    yield session
    session.stop()


def _tail(path, lines: int = 40) -> str:
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:]) or "(the JVM printed nothing)"


@pytest.fixture
def spark(request, monkeypatch):
    """The session of the test's kind, with pyspark in the matching mode for the test's
    duration (so that ``pyspark.sql.functions`` makes that kind of Column)."""
    kind = getattr(request, "param", "connect")
    kind, backend = kind if isinstance(kind, tuple) else (kind, "memory")
    if kind == "classic":
        session = request.getfixturevalue("classic_spark")
        monkeypatch.delenv(_CONNECT_MODE, raising=False)
    else:
        session = request.getfixturevalue("connect_spark")
        monkeypatch.setenv(_CONNECT_MODE, "1")
    if backend != "memory":
        session.conf.set(BACKEND_CONF, backend)
        request.addfinalizer(lambda: session.conf.unset(BACKEND_CONF))
    return session


def pytest_report_header(config):
    try:
        return f"mapwithstate jar: {mws.jar_path()}"
    except FileNotFoundError as e:
        return f"mapwithstate jar: {e}"
