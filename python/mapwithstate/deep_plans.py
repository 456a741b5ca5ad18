"""Deep Columns on Spark Connect: protobuf's client-side nesting limit, lifted while
mapwithstate builds a plan, and the depth a Column's message nests to.

PySpark Connect builds an expression's message bottom-up, copying each child's message into its
parent, and the upb protobuf runtime copies a message by serializing and parsing it: its parser
refuses a message nested deeper than 100 (``DecodeError: ... Exceeded
upb_DecodeOptions_MaxDepth``), which an expression of about 50 nested calls reaches. A compiled
state function of a few dozen statements, each building on the last, nests that deep. The
server parses a request with a limit of its own (``spark.connect.grpc.marshallerRecursionLimit``,
1024 by default; the plugin parses its message with the same), so the client's is the one in
the way.

:func:`lifted_depth_limit` lifts upb's limit (``SetAllowOversizeProtos``) while mapwithstate
builds such a plan: the ``MapWithState`` message (packed as bytes into ``Relation.extension``,
so the relations around it parse as shallow ones wherever PySpark copies them) and the state
function compiler's typing probes. :func:`message_depth` measures a Column, so the compiler
refuses one the server would, naming the function's line, before sending it.
"""

import contextlib
import threading
from typing import Any, Dict, Iterator, List, Tuple

__all__ = ["lifted_depth_limit", "message_depth", "SERVER_DEPTH_LIMIT"]

#: The nesting the server parses a request to (Spark Connect's default
#: ``spark.connect.grpc.marshallerRecursionLimit``), in messages.
SERVER_DEPTH_LIMIT = 1024

_lock = threading.Lock()
_lifts = 0


@contextlib.contextmanager
def lifted_depth_limit() -> Iterator[None]:
    """Within the block, protobuf's Python runtime parses messages of any depth (as far as
    it can: the upb runtime, the default one, can; with another, nothing changes). The limit
    is put back when the last such block in the process ends."""
    global _lifts
    set_allowed = _oversize_switch()
    if set_allowed is None:
        yield
        return
    with _lock:
        _lifts += 1
        if _lifts == 1:
            set_allowed(True)
    try:
        yield
    finally:
        with _lock:
            _lifts -= 1
            if _lifts == 0:
                set_allowed(False)


def _oversize_switch() -> Any:
    """upb's ``SetAllowOversizeProtos``, or None under another protobuf runtime."""
    try:
        from google._upb import _message  # type: ignore[import-untyped]
    except ImportError:
        return None
    return getattr(_message, "SetAllowOversizeProtos", None)


def message_depth(column: Any, known: Dict[int, Tuple[Any, int]]) -> int:
    """How deep the message of Spark Connect ``column`` nests: two messages (``Expression``
    and its kind: a call, a cast, a lambda) for each level of its expression tree.

    ``known`` memoizes the depth of each expression already measured (by identity, holding the
    expression so its identity stays its own): a compilation's Columns share their
    subexpressions, so measuring each new Column costs only its new nodes."""
    if not type(column).__module__.startswith("pyspark.sql.connect"):
        # A classic session's Column is a JVM object, never a message (and its attributes
        # are fields: getattr(column, "_expr") would be one).
        return 0
    root = getattr(column, "_expr", None)
    if root is None:
        return 0
    pending: List[Tuple[Any, bool]] = [(root, False)]
    while pending:
        expression, expanded = pending.pop()
        if id(expression) in known:
            continue
        children = list(getattr(expression, "children", ()) or ())
        if expanded:
            deepest = max((known[id(c)][1] for c in children), default=0)
            known[id(expression)] = (expression, deepest + 2)
            continue
        pending.append((expression, True))
        pending.extend((c, False) for c in children if id(c) not in known)
    return known[id(root)][1]
