"""The one local Connect server of a test session, shared by the tests of every folder.

``tests/conftest.py``'s ``server`` fixture holds it for the session; a folder its fixtures do
not reach (``bench/tests``) holds it too, so a session starts one server, not one per folder.
It stops when its last holder lets it go (at the session's end when conftest's fixture holds
it).
"""
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

import mapwithstate as mws

__all__ = ["SHUFFLE_PARTITIONS", "shared_server"]

SHUFFLE_PARTITIONS = "4"
# Every Connect test of the session shares it, so it gets a heap of 3 GB, not Spark's default
# 1 GB: late in a full run, generating the code of a compiled Python function's large
# projections ran the 1 GB heap out, and the server's end hung the tests after it.
CONF = {"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS, "spark.driver.memory": "3g"}

_lock = threading.Lock()
_server: Optional[mws.LocalConnectServer] = None
_holders = 0


@contextmanager
def shared_server() -> Iterator[mws.LocalConnectServer]:
    """The session's server (4 shuffle partitions, as the project's benchmarks use), started
    by its first holder and stopped when its last holder leaves."""
    global _server, _holders
    with _lock:
        if _server is None:
            _server = mws.LocalConnectServer(conf=CONF)
        _holders += 1
        server = _server
    try:
        yield server
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                _server = None
                server.stop()
