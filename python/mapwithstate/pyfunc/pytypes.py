"""The Python types a compiled value may have, and the Spark types that hold them.

A value of a state function is a Spark Column plus its Python type: the type decides the
Python semantics an operation gets (``//`` on ints floors, ``str`` of a float is its
``repr``), and which Spark type the Column has (every ``int`` is a BIGINT, every ``float`` a
DOUBLE, so arithmetic never overflows at 32 bits where Python would not).
"""

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Tuple

from pyspark.sql import types as T

__all__ = [
    "PyType",
    "INT",
    "FLOAT",
    "NUM",
    "BOOL",
    "STR",
    "NONE",
    "DATETIME",
    "DATE",
    "TIMEDELTA",
    "list_of",
    "set_of",
    "dict_of",
    "row_of",
    "tuple_of",
    "tuple_field",
    "holds_tuple",
    "from_spark",
    "to_spark",
    "unify",
    "unified",
]


@dataclass(frozen=True)
class PyType:
    """A Python type: ``kind`` is ``int float bool str none datetime date timedelta list set
    dict row tuple match``; ``args`` the element type of a list or a set, key and value of a
    dict, a row's (name, type) fields, a tuple's element types in order (a tuple's arity is part
    of its type), or a ``re.Match``'s group count and (name, number) pairs; ``names`` a named
    tuple's field names (``isocalendar()``'s ``year``, ``week``, ``weekday``), which do not make
    it another type: it is a tuple."""

    kind: str
    args: Tuple[Any, ...] = ()
    names: Tuple[str, ...] = field(default=(), compare=False)

    @property
    def name(self) -> str:
        """The type's name as Python spells it in error messages."""
        return {
            "none": "NoneType",
            "datetime": "datetime.datetime",
            "date": "datetime.date",
            "timedelta": "datetime.timedelta",
            "row": "Row",
            "match": "re.Match",
        }.get(self.kind, self.kind)

    @property
    def is_numeric(self) -> bool:
        return self.kind in ("int", "float", "bool")

    def __str__(self) -> str:
        return self.name


INT = PyType("int")
FLOAT = PyType("float")
BOOL = PyType("bool")
STR = PyType("str")
NONE = PyType("none")
DATETIME = PyType("datetime")
DATE = PyType("date")
TIMEDELTA = PyType("timedelta")
#: An int on some paths and a float on others (``max(1, 2.5)``, ``state.total or 0``): a
#: struct whose field ``i`` holds the int, or ``f`` the float.
NUM = PyType("num")


def list_of(element: PyType) -> PyType:
    return PyType("list", (element,))


def set_of(element: PyType) -> PyType:
    """A set: an array Column of distinct elements (see :mod:`~mapwithstate.pyfunc.sets`)."""
    return PyType("set", (element,))


def dict_of(key: PyType, value: PyType) -> PyType:
    return PyType("dict", (key, value))


def row_of(fields: Tuple[Tuple[str, PyType], ...]) -> PyType:
    return PyType("row", fields)


def tuple_of(elements: Tuple[PyType, ...], names: Tuple[str, ...] = ()) -> PyType:
    """The type of a tuple of ``elements``; ``names``: a named tuple's field names."""
    return PyType("tuple", tuple(elements), names)


def tuple_field(index: int) -> str:
    """The name of a tuple's struct field ``index`` (0-based): ``_1``, ``_2``, ...; a tuple is
    a struct whose fields are its elements, by position."""
    return f"_{index + 1}"


def holds_tuple(py_type: PyType) -> bool:
    """Whether ``py_type`` is a tuple or a list or dict holding tuples."""
    if py_type.kind == "tuple":
        return True
    return py_type.kind in ("list", "dict") and any(holds_tuple(t) for t in py_type.args)


def from_spark(data_type: T.DataType) -> Optional[PyType]:
    """The Python type of a Spark type's values (as ``collect()`` gives them), or None when
    the compiler has no exact translation for it (decimals, binary, year-month intervals)."""
    if isinstance(data_type, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return INT
    if isinstance(data_type, (T.DoubleType, T.FloatType)):
        return FLOAT
    if isinstance(data_type, T.BooleanType):
        return BOOL
    if isinstance(data_type, (T.StringType, T.CharType, T.VarcharType)):
        return STR
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        return DATETIME
    if isinstance(data_type, T.DateType):
        return DATE
    if isinstance(data_type, T.DayTimeIntervalType):
        return TIMEDELTA
    if isinstance(data_type, T.NullType):
        return NONE
    if isinstance(data_type, T.ArrayType):
        element = from_spark(data_type.elementType)
        return None if element is None else list_of(element)
    if isinstance(data_type, T.MapType):
        key, value = from_spark(data_type.keyType), from_spark(data_type.valueType)
        return None if key is None or value is None else dict_of(key, value)
    if isinstance(data_type, T.StructType):
        fields = []
        for field in data_type.fields:
            field_type = from_spark(field.dataType)
            if field_type is None:
                return None
            fields.append((field.name, field_type))
        return row_of(tuple(fields))
    return None


def to_spark(py_type: PyType) -> T.DataType:
    """The Spark type that holds values of ``py_type`` in a compiled function."""
    simple = {
        "int": T.LongType(),
        "float": T.DoubleType(),
        "bool": T.BooleanType(),
        "str": T.StringType(),
        "none": T.NullType(),
        "datetime": T.TimestampType(),
        "date": T.DateType(),
        "timedelta": T.DayTimeIntervalType(),
    }
    if py_type.kind in simple:
        return simple[py_type.kind]
    if py_type.kind in ("list", "set"):
        return T.ArrayType(to_spark(py_type.args[0]))
    if py_type.kind == "num":
        return T.StructType([T.StructField("i", T.LongType()), T.StructField("f", T.DoubleType())])
    if py_type.kind == "dict":
        return T.MapType(to_spark(py_type.args[0]), to_spark(py_type.args[1]))
    if py_type.kind == "tuple":
        return T.StructType(
            [T.StructField(tuple_field(i), to_spark(t)) for i, t in enumerate(py_type.args)]
        )
    if py_type.kind == "match":
        # A re.Match (mapwithstate.pyfunc.regex_calls): its groups, their code point offsets.
        return T.StructType(
            [
                T.StructField("g", T.ArrayType(T.StringType())),
                T.StructField("p", T.ArrayType(T.LongType(), containsNull=False)),
            ]
        )
    return T.StructType([T.StructField(n, to_spark(t)) for n, t in py_type.args])


def unify(a: PyType, b: PyType) -> Optional[PyType]:
    """The one type that holds values of both ``a`` and ``b`` (``None`` joins anything), or
    None when a Column cannot hold both exactly (an int on one path, a str on another)."""
    if a == b:
        return a
    if a.kind == "none":
        return b
    if b.kind == "none":
        return a
    if {a.kind, b.kind} <= {"int", "float", "num"}:
        return NUM
    if a.kind == b.kind and a.kind in ("list", "set"):
        element = unify(a.args[0], b.args[0])
        return None if element is None else PyType(a.kind, (element,))
    if a.kind == b.kind == "dict":
        key, value = unify(a.args[0], b.args[0]), unify(a.args[1], b.args[1])
        return None if key is None or value is None else dict_of(key, value)
    if a.kind == b.kind == "tuple" and len(a.args) == len(b.args):
        elements = [unify(x, y) for x, y in zip(a.args, b.args, strict=True)]
        if any(e is None for e in elements):
            return None
        return tuple_of(tuple(e for e in elements if e is not None))
    return None


def unified(types: Iterable[PyType], mixed: Callable[[PyType, PyType], Exception]) -> PyType:
    """The one type holding every type of ``types`` (``None`` joins any; none at all is
    ``NONE``): the element type of a list, set or dict display, or of a module constant.
    Where two cannot share a Column, raises ``mixed(joined so far, the next type)``: the
    caller's refusal, naming what mixes where."""
    joined = NONE
    for t in types:
        both = unify(joined, t)
        if both is None:
            raise mixed(joined, t)
        joined = both
    return joined
