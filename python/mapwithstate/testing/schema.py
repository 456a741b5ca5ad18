"""State schemas without a Spark session: a DDL string parsed in Python, and each field's
values checked and converted to what the server would store.

``pyspark.sql.types._parse_datatype_string`` asks a live session to parse DDL; a unit test of
a state function runs with none, so the state schemas ``StateSpec.function`` accepts are
parsed here: ``"n BIGINT, seen ARRAY<STRING>"``, with ``STRUCT<...>``, ``MAP<K, V>`` and
``DECIMAL(p, s)`` nested as deep as needed.
"""

import datetime
import decimal
import math
import re
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
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["state_schema", "to_stored"]

_ATOMIC = {
    "TINYINT": ByteType,
    "BYTE": ByteType,
    "SMALLINT": ShortType,
    "SHORT": ShortType,
    "INT": IntegerType,
    "INTEGER": IntegerType,
    "BIGINT": LongType,
    "LONG": LongType,
    "FLOAT": FloatType,
    "REAL": FloatType,
    "DOUBLE": DoubleType,
    "STRING": StringType,
    "BOOLEAN": BooleanType,
    "BOOL": BooleanType,
    "BINARY": BinaryType,
    "DATE": DateType,
    "TIMESTAMP": TimestampType,
    "TIMESTAMP_LTZ": TimestampType,
    "TIMESTAMP_NTZ": TimestampNTZType,
}
_INTEGER_BITS = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


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
    parser = _Parser(schema)
    fields = parser.fields(end=None)
    return StructType(fields)


class _Parser:
    """A recursive-descent parser of Spark's DDL for types, over a list of tokens."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: List[str] = []
        position = 0
        while position < len(text):
            if text[position:].strip() == "":
                break
            match = _TOKEN.match(text, position)
            if match is None:
                raise ValueError(f"state schema {text!r}: unexpected {text[position:]!r}")
            self.tokens.append(match.group(1))
            position = match.end()
        self.at = 0

    def fail(self, expected: str) -> ValueError:
        found = self.tokens[self.at] if self.at < len(self.tokens) else "the end"
        return ValueError(f"state schema {self.text!r}: expected {expected}, found {found!r}")

    def peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def take(self, expected: str) -> None:
        if self.peek().upper() != expected:
            raise self.fail(repr(expected))
        self.at += 1

    def fields(self, end: Union[str, None]) -> List[StructField]:
        fields = []
        while True:
            name = self.peek()
            if not name or name in "<>(),:":
                raise self.fail("a field name")
            self.at += 1
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            if self.peek() == ":":
                self.at += 1
            fields.append(StructField(name, self.data_type(), True))
            if self.peek() == ",":
                self.at += 1
                continue
            if end is None and self.at == len(self.tokens):
                return fields
            if end is not None and self.peek() == end:
                return fields
            raise self.fail("',' or " + (repr(end) if end else "the end"))

    def data_type(self) -> DataType:
        word = self.peek().upper()
        self.at += 1
        if word in _ATOMIC:
            return _ATOMIC[word]()
        if word in ("DECIMAL", "DEC", "NUMERIC"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.at += 1
                precision = self.number()
                if self.peek() == ",":
                    self.at += 1
                    scale = self.number()
                self.take(")")
            return DecimalType(precision, scale)
        if word == "ARRAY":
            self.take("<")
            element = self.data_type()
            self.take(">")
            return ArrayType(element, True)
        if word == "MAP":
            self.take("<")
            key = self.data_type()
            self.take(",")
            value = self.data_type()
            self.take(">")
            return MapType(key, value, True)
        if word == "STRUCT":
            self.take("<")
            fields = self.fields(end=">")
            self.take(">")
            return StructType(fields)
        self.at -= 1
        raise self.fail("a type")

    def number(self) -> int:
        token = self.peek()
        if not token.isdigit():
            raise self.fail("a number")
        self.at += 1
        return int(token)


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
            raise OverflowError(
                f"{where}: {value} does not fit {data_type.simpleString()}"
            ) from None
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
    if kind is DecimalType:
        if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
            raise _mismatch(value, data_type, where)
        quantum = decimal.Decimal(1).scaleb(-data_type.scale)
        stored = decimal.Decimal(value).quantize(quantum, rounding=decimal.ROUND_HALF_UP)
        if len(stored.as_tuple().digits) > data_type.precision:
            raise OverflowError(
                f"{where}: {value} does not fit {data_type.simpleString()}"
            ) from None
        return stored
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
    if kind is ArrayType:
        if not isinstance(value, (list, tuple)):
            raise _mismatch(value, data_type, where)
        return [to_stored(v, data_type.elementType, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind is MapType:
        if not isinstance(value, dict):
            raise _mismatch(value, data_type, where)
        return {
            to_stored(k, data_type.keyType, f"{where} key"): to_stored(
                v, data_type.valueType, f"{where}[{k!r}]"
            )
            for k, v in value.items()
        }
    if kind is StructType:
        return _struct(value, data_type, where)
    raise TypeError(f"{where}: type {data_type.simpleString()} is not supported here")


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
