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

# Set by pyspark once a Connect session exists; pyspark.sql.functions (and so the state
# functions) then make Connect Columns. Classic tests run with it unset.
_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
SHUFFLE_PARTITIONS = "4"
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


def pytest_generate_tests(metafunc):
    if "spark" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("sessions")
    kinds = list(marker.args) if marker else ["connect"]
    if metafunc.definition.get_closest_marker("connect_only"):
        kinds = ["connect"]
    backends = metafunc.definition.get_closest_marker("backends")
    if backends and not metafunc.definition.get_closest_marker("memory_only"):
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
    """The local Connect server (4 shuffle partitions, as the project's benchmarks use)."""
    with mws.LocalConnectServer(conf={"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS}) as s:
        yield s


@pytest.fixture(scope="session")
def connect_spark(server):
    session = server.session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def classic_spark():
    """A classic SparkSession in this process, with the plugin jar and its SQL extensions."""
    from pyspark.sql import SparkSession

    saved = os.environ.pop(_CONNECT_MODE, None)
    try:
        builder = (SparkSession.builder.master("local[2]")
                   .appName("mapwithstate-classic-tests")
                   .config("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
                   .config("spark.ui.enabled", "false"))
        # What a Connect server gets, less Connect's own settings: the jar, the extensions and
        # the fork-free checkpoint file manager.
        for key, value in mws.server_conf().items():
            if not key.startswith("spark.connect."):
                builder = builder.config(key, value)
        session = builder.getOrCreate()
    finally:
        if saved is not None:
            os.environ[_CONNECT_MODE] = saved
    yield session
    session.stop()


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
