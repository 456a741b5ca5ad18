"""Unit-testing Python state functions without Spark.

:class:`State` is one call's view of a key's state, as a state function's ``state``
parameter; :func:`call` makes one call of a function and returns what it emitted and left.

>>> from mapwithstate.testing import State, call
>>> def count(word, state):
...     state.update(n=(state.n or 0) + 1)
...     return {"word": word, "n": state.n}
>>> call(count, State("n BIGINT"), {"word": "a"}).emitted
[{'word': 'a', 'n': 1}]
"""
from mapwithstate.testing.state import CallResult, State, call

__all__ = ["State", "CallResult", "call"]
