"""One real Spark Connect server with the real plugin jar for the whole test session."""
import warnings

import pytest

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)

import mapwithstate as mws  # noqa: E402


@pytest.fixture(scope="session")
def server():
    """The local Connect server (4 shuffle partitions, as the project's benchmarks use)."""
    with mws.LocalConnectServer(conf={"spark.sql.shuffle.partitions": "4"}) as s:
        yield s


@pytest.fixture(scope="session")
def spark(server):
    session = server.session()
    yield session
    session.stop()


def pytest_report_header(config):
    try:
        return f"mapwithstate jar: {mws.jar_path()}"
    except FileNotFoundError as e:
        return f"mapwithstate jar: {e}"
