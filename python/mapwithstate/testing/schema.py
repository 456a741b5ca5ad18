"""State schemas without a Spark session: a DDL string parsed in Python (by
:mod:`mapwithstate.ddl`, the client's parser of Spark's schema grammar), and each field's
values checked and converted to what the server would store.
"""

import datetime
import decimal
import math
from typing import Any, List, Tuple, Union

from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from mapwithstate.ddl import parse_struct

__all__ = ["state_schema", "to_stored", "emitted_as"]

_INTEGER_BITS = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}


def state_schema(schema: Union[str, StructType]) -> StructType:
    """``schema`` as a ``StructType``: a DDL string is parsed, a ``StructType`` returned as is.

    >>> state_schema("n BIGINT, seen ARRAY<STRING>").fieldNames()
    ['n', 'seen']
    """
    if isinstance(schema, StructType):
        return schema
    if not isinstance(schema, str):
        raise TypeError(
            f"a state schema is a DDL string or a StructType, got {type(schema).__name__}"
        )
    return parse_struct(schema)


def to_stored(value: Any, data_type: DataType, where: str) -> Any:
    """``value`` as a column of ``data_type`` holds it: an ``int`` in a DOUBLE becomes a
    ``float``, a ``bool`` in a BIGINT an ``int``, a dict in a STRUCT a ``Row``. A value of
    another kind raises ``TypeError``, an integer beyond the type's range ``OverflowError``;
    both name ``where`` (the field) and the type, as the server's query fails on them.

    >>> to_stored(True, LongType(), "state.n")
    1
    >>> to_stored(2, DoubleType(), "state.x")
    2.0
    """
    if value is None:
        return None
    kind = type(data_type)
    if kind in _INTEGER_BITS:
        if not isinstance(value, int):
            raise _mismatch(value, data_type, where)
        bits = _INTEGER_BITS[kind]
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise OverflowError(f"{where}: {value} does not fit {data_type.simpleString()}")
        return int(value)
    if kind in (DoubleType, FloatType):
        if not isinstance(value, (int, float)):
            raise _mismatch(value, data_type, where)
        try:
            stored = float(value)
        except OverflowError:
            raise OverflowError(
                f"{where}: {value} does not fit {data_type.simpleString()}"
            ) from None
        if kind is FloatType and math.isfinite(stored):
            import struct

            stored = struct.unpack("f", struct.pack("f", stored))[0]
        return stored
    if isinstance(data_type, DecimalType):
        if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
            raise _mismatch(value, data_type, where)
        quantum = decimal.Decimal(1).scaleb(-data_type.scale)
        exact = decimal.Decimal(value).quantize(quantum, rounding=decimal.ROUND_HALF_UP)
        if len(exact.as_tuple().digits) > data_type.precision:
            raise OverflowError(f"{where}: {value} does not fit {data_type.simpleString()}")
        return exact
    if kind is StringType:
        return _expect(value, str, data_type, where)
    if kind is BooleanType:
        return _expect(value, bool, data_type, where)
    if kind is BinaryType:
        if not isinstance(value, (bytes, bytearray)):
            raise _mismatch(value, data_type, where)
        return bytes(value)
    if kind in (TimestampType, TimestampNTZType):
        return _expect(value, datetime.datetime, data_type, where)
    if kind is DateType:
        if isinstance(value, datetime.datetime) or not isinstance(value, datetime.date):
            raise _mismatch(value, data_type, where)
        return value
    if isinstance(data_type, ArrayType):
        if not isinstance(value, (list, tuple)):
            raise _mismatch(value, data_type, where)
        return [to_stored(v, data_type.elementType, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(data_type, MapType):
        if not isinstance(value, dict):
            raise _mismatch(value, data_type, where)
        return {
            to_stored(k, data_type.keyType, f"{where} key"): to_stored(
                v, data_type.valueType, f"{where}[{k!r}]"
            )
            for k, v in value.items()
        }
    if isinstance(data_type, StructType):
        return _struct(value, data_type, where)
    raise TypeError(f"{where}: type {data_type.simpleString()} is not supported here")


def emitted_as(value: Any, data_type: DataType, function: str, column: str) -> Any:
    """An emitted ``value`` as the server's output column of ``data_type`` holds it: an int
    in a DOUBLE (a column the compiler made a DOUBLE because it is an int on some paths and a
    float on others) must be exactly a double, else ``OverflowError``, as the query fails;
    other values are returned as they are.

    >>> emitted_as(3, DoubleType(), "f", "hi")
    3.0
    >>> emitted_as(2 ** 63 - 1, DoubleType(), "f", "hi")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    OverflowError: f's output column 'hi': int 9223372036854775807 is not exactly a double...
    """
    if (
        isinstance(data_type, (DoubleType, FloatType))
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        if float(value) != value:
            raise OverflowError(
                f"{function}'s output column {column!r}: int {value} is not exactly a double "
                f"({data_type.simpleString()})"
            )
        return to_stored(value, data_type, f"{function}'s output column {column!r}")
    return value


def _struct(value: Any, data_type: StructType, where: str) -> Row:
    items: List[Tuple[str, Any]]
    if isinstance(value, Row):
        items = list(value.asDict().items())
    elif isinstance(value, dict):
        items = list(value.items())
    else:
        raise _mismatch(value, data_type, where)
    names = data_type.fieldNames()
    unknown = [name for name, _ in items if name not in names]
    if unknown:
        raise TypeError(
            f"{where}: unknown field(s) {', '.join(unknown)} for {data_type.simpleString()}"
        )
    given = dict(items)
    return Row(
        **{
            f.name: to_stored(given.get(f.name), f.dataType, f"{where}.{f.name}")
            for f in data_type.fields
        }
    )


def _expect(value: Any, kind: type, data_type: DataType, where: str) -> Any:
    if not isinstance(value, kind):
        raise _mismatch(value, data_type, where)
    return value


def _mismatch(value: Any, data_type: DataType, where: str) -> TypeError:
    return TypeError(
        f"{where}: a {type(value).__name__} ({value!r}) cannot be stored as "
        f"{data_type.simpleString()}"
    )
