"""Unit-testing Python state functions without Spark.

:class:`Tester` runs a state function over batches of records with the semantics of
``map_with_state`` and ``map_groups_with_state`` (record order per key, idle timeouts, timers
in both domains, watermarks and late rows, initial state, remove), in plain Python, and
:func:`replay` cuts recorded data into batches as a batch replay does. :class:`State` is one
call's view of a key's state, the ``state`` parameter; :func:`call` makes one call.

>>> from datetime import datetime
>>> from mapwithstate.testing import Tester
>>> def count(word, state):
...     state.update(n=(state.n or 0) + 1)
...     return {"word": word, "n": state.n}
>>> tester = Tester(count, key="word", state_schema="n BIGINT")
>>> tester.batch([{"word": "a"}, {"word": "a"}], datetime(2024, 1, 1)).emitted
[{'word': 'a', 'n': 1}, {'word': 'a', 'n': 2}]
>>> tester.state
{'a': {'n': 2}}
"""

from mapwithstate.testing.runner import BatchResult, Tester, replay
from mapwithstate.testing.state import CallResult, State, call

__all__ = ["Tester", "BatchResult", "replay", "State", "CallResult", "call"]
