"""Long tests whose waits overlap: a module's tests that spend their time waiting (a real-time
batch of half a minute, a server starting) run their bodies at once, each on a thread of its
own, and each test then collects its own body's outcome, raising what it raised.

A module registers each such body under its test's name (:meth:`OverlappedRuns.body`), starts
the bodies of the tests pytest selected in it from a module-scoped fixture
(:meth:`OverlappedRuns.start_selected`), and each test waits for its own
(:meth:`OverlappedRuns.outcome`). The checks are the bodies' own: only when they run changes.
"""
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Dict, Optional


class OverlappedRuns:
    """The bodies of one module's long tests, each run on a thread of its own once started.

    :param name: a prefix for the threads' names.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._bodies: Dict[str, Callable[..., None]] = {}
        self._started: Dict[str, Future] = {}
        self._pool: Optional[ThreadPoolExecutor] = None

    def body(self, test_name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
        """Registers the decorated function as the body of the test named `test_name`."""
        def register(function: Callable[..., None]) -> Callable[..., None]:
            assert test_name not in self._bodies, f"{test_name} has two bodies"
            self._bodies[test_name] = function
            return function
        return register

    def start_selected(self, request, make_args: Callable[[Any], Dict[str, Any]]) -> None:
        """Starts the body of every test of `request`'s module that this pytest run selected
        (``-k`` and the like are obeyed), each called with ``make_args(item)`` and the test's
        parameters; the caller must :meth:`close` the runs."""
        items = [item for item in request.session.items
                 if item.module is request.module and item.originalname in self._bodies]
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(items)),
                                        thread_name_prefix=self._name)
        for item in items:
            params = item.callspec.params if hasattr(item, "callspec") else {}
            self._started[item.nodeid] = self._pool.submit(
                self._bodies[item.originalname], **make_args(item), **params)

    def outcome(self, request) -> None:
        """Waits for the body of `request`'s test; raises what it raised."""
        self._started[request.node.nodeid].result()

    def close(self) -> None:
        """Waits for every body started (each stops what it started, however it ends)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._pool, self._started = None, {}
