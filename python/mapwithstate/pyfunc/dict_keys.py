"""What a compiled dict takes as a key: one Column type, and no ``None``.

A compiled dict is a Spark map, whose keys are one type and never null. Python's dict takes
any hashable key, ``None`` included, so where a ``None`` key would be stored (``d[k] = v``,
``d.setdefault(k)``, ``dict(pairs)``, a display) the query fails with ``NotImplementedError``
rather than lose the item, and where one is only looked up (``d.get(None)``, ``None in d``,
``d.pop(None, 0)``) it is a null of the keys' type, which no map holds.
"""

import ast
from typing import TYPE_CHECKING

from pyspark.sql import Column

from mapwithstate.pyfunc.pytypes import PyType, to_spark, unify
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context

__all__ = ["NONE_KEY", "stored_key", "looked_up_key", "key_column"]

#: The failure of a ``None`` key stored into a compiled dict.
NONE_KEY = "None as a dict key: a compiled dict (a Spark map) holds no None key"


def _typed(ctx: "Context", node: ast.AST, key_type: PyType, key: Value) -> None:
    if key.type.kind != "none" and unify(key_type, key.type) != key_type:
        raise ctx.refuse(
            node,
            f"a {key.type} key into a dict of {key_type} keys",
            "a dict's keys are one Column type; convert it explicitly",
        )


def stored_key(ctx: "Context", node: ast.AST, key_type: PyType, key: Value) -> Column:
    """``key`` as a key stored into a dict of ``key_type`` keys: the query fails with
    ``NotImplementedError`` where it is ``None``."""
    _typed(ctx, node, key_type, key)
    if key.nullable:
        ctx.check(node, key.column.isNull(), "NotImplementedError", NONE_KEY)
    return key.column if key.type == key_type else key.column.cast(to_spark(key_type))


def looked_up_key(ctx: "Context", node: ast.AST, key_type: PyType, key: Value) -> Column:
    """``key`` as a key looked up in a dict of ``key_type`` keys (``None``: a typed null,
    which no map holds)."""
    _typed(ctx, node, key_type, key)
    return key_column(key_type, key)


def key_column(key_type: PyType, key: Value) -> Column:
    """``key``'s Column as one of ``key_type`` (``None``: a typed null; Spark takes no untyped
    one)."""
    if key.type == key_type and key.type.kind != "none":
        return key.column
    return key.column.cast(to_spark(key_type))
