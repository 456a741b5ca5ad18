"""Calls a state function may make: Python's builtins, ``str``/``list``/``dict`` methods,
``math``, ``datetime``/``timedelta`` constructors, and any ``pyspark.sql.functions`` call as the
escape hatch — each with Python's semantics (``round`` halves to even, ``len`` counts code
points, ``max`` keeps the first largest and fails on an empty list, ``int("x")`` fails the
query with ``ValueError``).
"""

import ast
import builtins as py
import collections
import re
import types
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, Union

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import (
    heapq_bisect_itertools,
    in_place,
    iteration,
    operators,
    ordering,
    ranges,
    regex_calls,
    struct_targets,
)
from mapwithstate.pyfunc.arguments import Handler, MethodHandler
from mapwithstate.pyfunc.arguments import arity as _arity
from mapwithstate.pyfunc.collection_variables import DEQUE_IN_PLACE, constructor, kind_of
from mapwithstate.pyfunc.datetime_methods import DATE_METHODS, DATETIME_METHODS
from mapwithstate.pyfunc.datetimes import TIMEDELTA_METHODS as _TIMEDELTA_METHODS
from mapwithstate.pyfunc.datetimes import date_call as _date
from mapwithstate.pyfunc.datetimes import datetime_call as _datetime
from mapwithstate.pyfunc.datetimes import timedelta_call as _timedelta
from mapwithstate.pyfunc.dict_displays import keyword_dict, record_as_dict
from mapwithstate.pyfunc.formatting import to_str
from mapwithstate.pyfunc.list_methods import LIST_METHODS
from mapwithstate.pyfunc.local_functions import LocalFunction
from mapwithstate.pyfunc.math_functions import MATH_FUNCTIONS
from mapwithstate.pyfunc.number_text import FLOAT_METHODS, INT_METHODS, NUMBER_TEXT_FUNCTIONS
from mapwithstate.pyfunc.paths import Record, converted
from mapwithstate.pyfunc.pytypes import (
    BOOL,
    FLOAT,
    INT,
    NONE,
    NUM,
    TIMEDELTA,
    PyType,
    from_spark,
    list_of,
    to_spark,
    unify,
)
from mapwithstate.pyfunc.sequences import comprehension, is_rows, stopping_comprehension
from mapwithstate.pyfunc.server_functions import modular_power, python_round
from mapwithstate.pyfunc.statistics_functions import ORDER_FREE as STATISTICS_ORDER_FREE
from mapwithstate.pyfunc.statistics_functions import STATISTICS_FUNCTIONS
from mapwithstate.pyfunc.strings import ACCEPTS_NONE
from mapwithstate.pyfunc.strings import STR_METHODS as _STR_METHODS
from mapwithstate.pyfunc.timedelta_arithmetic import DAY, micros, whole_days
from mapwithstate.pyfunc.values import Cond, Value, c_and, c_column, c_not, let, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["call", "module_attribute", "int_of", "value_attribute", "dict_get"]

_MIN_LONG = -(1 << 63)


def call(it: "Interpreter", node: ast.Call) -> Any:
    """Compiles a call expression (not on ``state``)."""
    func = node.func
    if isinstance(func, ast.Attribute):
        base = it.expression(func.value)
        if isinstance(base, Record):
            base = record_as_dict(it.ctx, func.value, base)
        if isinstance(base, Value):
            return _method(it, node, base, func.attr)
        if base is datetime or base is date:
            from mapwithstate.pyfunc.time_parsing import class_method

            parsed = class_method(it, node, base, func.attr)
            if parsed is not None:
                return parsed
        if base is py.str and func.attr == "maketrans":
            from mapwithstate.pyfunc.str_translation import maketrans

            return maketrans(it, node)
        if isinstance(base, re.Pattern):
            return regex_calls.pattern_method(it, node, base, func.attr)
        target = _attribute(it, func, base)
    else:
        target = it.expression(func)
    if isinstance(target, Value):
        raise it.ctx.refuse(node, f"call of a {target.type} value", "it is not a function")
    if isinstance(target, LocalFunction):
        return target.call(it, node)
    if (target is py.min or target is py.max) and node.keywords:
        return ordering.min_max_with_keywords(it, node, target is py.max)
    if target is py.sorted and any(k.arg == "key" for k in node.keywords):
        return ordering.sorted_with_key(it, node)
    if target is py.len and len(node.args) == 1 and is_rows(it, node.args[0]):
        from mapwithstate.pyfunc.aggregates import rows_length

        return rows_length(it)
    if target is py.isinstance:
        return _isinstance(it, node)
    if target is py.next:
        from mapwithstate.pyfunc.sequences import next_item

        return next_item(it, node)
    if target is py.range:
        return ranges.range_list(it, node)
    if (
        target is py.len
        and len(node.args) == 1
        and not node.keywords
        and ranges.is_range(it, node.args[0])
    ):
        assert isinstance(node.args[0], ast.Call)
        return ranges.range_length(it, node.args[0])
    if target is py.dict and (node.keywords or not node.args):
        return keyword_dict(it, node)
    if _is_spark_function(target):
        return _spark_call(it, node, target)
    if regex_calls.is_re_function(target):
        return regex_calls.call(it, node, target)
    if target is py.set:
        from mapwithstate.pyfunc import sets

        return sets.call(it, node)
    if target is collections.defaultdict:
        from mapwithstate.pyfunc import default_dicts

        kind = constructor(it.ctx.source, node)
        assert kind is not None  # its factory was checked with the function's variables
        return default_dicts.construct(kind)
    if id(target) in heapq_bisect_itertools.FUNCTIONS:
        return heapq_bisect_itertools.call(it, node, target)
    handler = _BUILTINS.get(id(target))
    if handler is None:
        name = getattr(target, "__qualname__", type(target).__name__)
        raise it.ctx.refuse(
            node,
            f"call to {name}()",
            "a state function may call Python's builtins (len abs min max "
            "round int float str bool sum any all sorted list dict set zip enumerate reversed "
            "range hex oct bin chr ord map filter), math, statistics, datetime and timedelta, "
            "collections' Counter, defaultdict and deque, heapq.nlargest/nsmallest, bisect, "
            "itertools' pairwise, chain and islice, str/list/dict methods and "
            "pyspark.sql.functions; inline other functions",
        )
    generator = (
        node.args[0] if len(node.args) == 1 and isinstance(node.args[0], ast.GeneratorExp) else None
    )
    if generator is not None and _iterates_rows(it, generator):
        from mapwithstate.pyfunc.aggregates import aggregate, reduces

        if reduces(target):
            return aggregate(it, node, target, generator)
        # Any other consumer of an iterable (Counter, statistics.mean, set, list, ...) takes
        # the records' values as Python hands them over: a list, in record order.
        listed = ast.ListComp(elt=generator.elt, generators=generator.generators)
        args = [it.value(ast.copy_location(listed, generator))]
    elif generator is not None and (target is py.any or target is py.all):
        # any() stops at the first true item, all() at the first false one.
        def stops(item: Value, is_all: bool = target is py.all) -> Cond:
            truth = operators.truthy(item)
            return c_not(truth) if is_all else truth

        stopping = stopping_comprehension(it, generator, stops)
        args = [stopping if stopping is not None else comprehension(it, generator, True)]
    elif generator is not None:
        # A generator summed, tested or sorted may iterate a set: its order cannot show.
        order_free = id(target) in _ORDER_FREE or id(target) in STATISTICS_ORDER_FREE
        args = [comprehension(it, generator, order_free=order_free)]
    else:
        args = [it.value(a) for a in node.args]
    kwargs = {k.arg: it.value(k.value) for k in node.keywords if k.arg is not None}
    if any(k.arg is None for k in node.keywords) or any(
        isinstance(a, ast.Starred) for a in node.args
    ):
        raise it.ctx.refuse(node, "*args or **kwargs in a call", "pass arguments one by one")
    return handler(it, node, args, kwargs)


def _iterates_rows(it: "Interpreter", generator: ast.GeneratorExp) -> bool:
    return is_rows(it, generator.generators[0].iter)


def _attribute(it: "Interpreter", node: ast.Attribute, base: Any) -> Any:
    if isinstance(base, types.ModuleType) or base in (datetime, date, timedelta):
        found = getattr(base, node.attr, None)
        if found is None:
            raise it.ctx.refuse(
                node,
                f"unknown attribute {node.attr!r}",
                f"{getattr(base, '__name__', base)} has no {node.attr}",
            )
        return found
    raise it.ctx.refuse(
        node,
        f"attribute {node.attr!r} of a {type(base).__name__}",
        "attributes are read from state, rows, row fields and modules",
    )


def module_attribute(ctx: Any, node: ast.Attribute, base: Any) -> Any:
    """``module.name`` outside a call: a constant (``math.pi``) or a function/class."""
    from mapwithstate.pyfunc.interpreter import captured

    if isinstance(base, Value):
        return _value_attribute(ctx, node, base)
    if isinstance(base, types.ModuleType) or base in (datetime, date, timedelta):
        found = getattr(base, node.attr, None)
        if found is None:
            raise ctx.refuse(
                node,
                f"unknown attribute {node.attr!r}",
                f"{getattr(base, '__name__', base)} has no {node.attr}",
            )
        return captured(ctx, node, found)
    constant = getattr(base, node.attr, None) if isinstance(base, type) else None
    if (
        isinstance(base, type)
        and base.__module__ != "builtins"
        and type(constant) in (bool, int, float, str)
    ):
        # A constant of a class used as a namespace (Kinds.LOGIN), captured as a module's.
        return captured(ctx, node, constant)
    raise ctx.refuse(
        node,
        f"attribute {node.attr!r} of a {type(base).__name__}",
        "attributes are read from state, rows, row fields, modules and constants of "
        "classes (Kinds.LOGIN)",
    )


def _value_attribute(ctx: Any, node: ast.Attribute, base: Value) -> Value:
    if base.type.kind == "tuple" and node.attr in base.type.names:
        # A named tuple's field (iso.week of iso = ts.isocalendar()).
        from mapwithstate.pyfunc.tuples import element

        base = operators.attribute_of_none(ctx, node, base, node.attr)
        return element(base, base.type.names.index(node.attr))
    return value_attribute(ctx, node, base, node.attr)


def value_attribute(ctx: Any, node: ast.AST, base: Value, attr: str) -> Value:
    """``base.<attr>`` of a datetime, date or timedelta value."""
    parts = {
        "year": "year",
        "month": "month",
        "day": "day",
        "hour": "hour",
        "minute": "minute",
        "second": "second",
    }
    kind = base.type.kind
    if kind in ("datetime", "date", "timedelta") and (
        attr in parts or attr in ("microsecond", "days", "seconds", "microseconds")
    ):
        base = operators.attribute_of_none(ctx, node, base, attr)
    if kind == "datetime" and attr in parts or kind == "date" and attr in _DATE_PARTS:
        return Value(getattr(F, parts[attr])(base.column).cast("bigint"), INT, False)
    if kind == "datetime" and attr == "microsecond":
        return Value(F.pmod(F.unix_micros(base.column), F.lit(1_000_000)), INT, False)
    if kind == "timedelta" and attr in ("days", "seconds", "microseconds"):
        # Python's normal form: days of any sign, 0 <= seconds < 86400, 0 <= microseconds
        # < 10**6.
        count = micros(base.column)
        column = {
            "days": whole_days(base.column),
            "seconds": F.call_function("div", F.pmod(count, F.lit(DAY)), F.lit(1_000_000)),
            "microseconds": F.pmod(count, F.lit(1_000_000)),
        }[attr]
        return Value(column.cast("bigint"), INT, False)
    raise ctx.refuse(
        node,
        f"attribute {attr!r} of a {base.type}",
        "datetime's year, month, day, hour, minute, second, microsecond; timedelta's days, "
        "seconds, microseconds",
    )


_DATE_PARTS = ("year", "month", "day")


# ------------------------------------------------------------------ the escape hatch


def _is_spark_function(target: Any) -> bool:
    module = getattr(target, "__module__", "") or ""
    return callable(target) and module.startswith(
        ("pyspark.sql.functions", "pyspark.sql.connect.functions")
    )


def _spark_call(it: "Interpreter", node: ast.Call, function: Callable[..., Any]) -> Value:
    """``F.some_function(...)``: Values pass as their Columns, constants as Python values;
    the result's type is what Spark resolves it to over the function's inputs."""

    def argument(arg: ast.expr) -> Any:
        if isinstance(arg, ast.Lambda):
            raise it.ctx.refuse(arg, "a lambda argument", "use a comprehension for lists instead")
        from mapwithstate.pyfunc.aggregates import UntypedColumn

        value = it.expression(arg)
        if isinstance(value, Value):
            return (
                value.const
                if value.is_const and not isinstance(value.const, list)
                else value.column
            )
        if isinstance(value, UntypedColumn):
            return value.column
        return value

    args = [argument(a) for a in node.args]
    keywords = [(k.arg, argument(k.value)) for k in node.keywords]
    kwargs = {name: value for name, value in keywords if name is not None}
    if len(kwargs) < len(keywords):
        # What calling the function with a **mapping's None key raises.
        raise it.ctx.refuse(
            node, f"{function.__name__}(...)", "pyspark refused it: keywords must be strings"
        )
    try:
        column = function(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - pyspark's own argument checks
        raise it.ctx.refuse(node, f"{function.__name__}(...)", f"pyspark refused it: {e}") from None
    if not isinstance(column, Column):
        raise it.ctx.refuse(node, f"{function.__name__}(...)", "it does not return a Column")
    spark_type = it.ctx.type_of(node, column)
    py_type = from_spark(spark_type)
    if py_type is None:
        raise it.ctx.refuse(
            node,
            f"{function.__name__}(...) of type {spark_type.simpleString()}",
            "its result has no exact Python type here; cast it (.cast('double'), .cast('string'))",
        )
    if isinstance(spark_type, (type(to_spark(INT)),)) or py_type.kind not in ("int", "float"):
        return Value(column, py_type, True)
    return Value(column.cast(to_spark(py_type)), py_type, True)


# ------------------------------------------------------------------ builtins


def _len(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 1, 1, "len")
    (value,) = args
    kind = value.type.kind
    if kind == "tuple":
        operators.none_check(it.ctx, node, value, "object of type 'NoneType' has no len()")
        return literal(len(value.type.args))
    if kind not in ("str", "list", "dict", "set"):
        raise it.ctx.refuse(
            node,
            f"len() of a {value.type}",
            f"Python raises TypeError: object of type '{value.type}' has no len()",
        )
    value = operators.none_check(it.ctx, node, value, "object of type 'NoneType' has no len()")
    column = F.length(value.column) if kind == "str" else F.size(value.column)
    return Value(column.cast("bigint"), INT, False)


def _abs(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 1, 1, "abs")
    value = operators.none_check(it.ctx, node, args[0], "bad operand type for abs(): 'NoneType'")
    kind = value.type.kind
    if kind == "num":
        value = it.ctx.share(value)
        return operators.per_branch(
            it.ctx, value, lambda i: _abs(it, node, [i], {}), lambda f: _abs(it, node, [f], {})
        )
    if kind in ("int", "bool"):
        column = value.column.cast("bigint")
        it.ctx.check(
            node,
            column == F.lit(_MIN_LONG),
            "OverflowError",
            "int result does not fit in 64 bits (BIGINT)",
        )
        return Value(
            F.when(column == F.lit(_MIN_LONG), F.lit(None)).otherwise(F.abs(column)).cast("bigint"),
            INT,
            False,
        )
    if kind in ("float", "timedelta"):
        if kind == "timedelta":
            return Value(
                F.when(value.column < F.lit(timedelta(0)), -value.column).otherwise(value.column),
                TIMEDELTA,
                False,
            )
        return Value(F.abs(value.column), FLOAT, False)
    raise it.ctx.refuse(
        node,
        f"abs() of a {value.type}",
        f"Python raises TypeError: bad operand type for abs(): '{value.type}'",
    )


def _bool(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 0, 1, "bool")
    if not args:
        return literal(False)
    return Value(c_column(operators.truthy(args[0])), BOOL, False)


def _str(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 0, 1, "str")
    return to_str(it.ctx, node, args[0]) if args else literal("")


def _format(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    from mapwithstate.pyfunc.format_specs import format_value

    _arity(it, node, args, kwargs, 1, 2, "format")
    spec = args[1] if len(args) > 1 else literal("")
    if not (spec.is_const and isinstance(spec.const, str)):
        raise it.ctx.refuse(node, "format() with a spec known only at run time", "a constant spec")
    return format_value(it.ctx, node, args[0], spec.const)


def _repr(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    from mapwithstate.pyfunc.format_specs import convert

    _arity(it, node, args, kwargs, 1, 1, "repr")
    return convert(it.ctx, node, args[0], ord("r"))


def _int(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 0, 2, "int", ("base",))
    base = args[1] if len(args) == 2 else kwargs.get("base")
    if base is not None:
        from mapwithstate.pyfunc.number_text import int_in_base

        if not args:
            raise it.ctx.refuse(
                node, "int(base=...)", "Python raises TypeError: int() missing string argument"
            )
        return int_in_base(it, node, args[0], base)
    if not args:
        return literal(0)
    return int_of(it, node, args[0])


def int_of(it: "Interpreter", node: ast.AST, value: Value) -> Value:
    """``int(value)``."""
    kind = value.type.kind
    if value.type.kind == "none" or value.nullable:
        value = operators.none_check(
            it.ctx,
            node,
            value,
            "int() argument must be a string, a bytes-like object or a real number, not 'NoneType'",
        )
    if kind in ("int", "bool"):
        return Value(value.column.cast("bigint"), INT, False)
    if kind == "float":
        return float_to_int(it, node, value.column, truncate=True)
    if kind == "num":
        # The int itself where the value is an int (exact beyond 2**53), else the float's.
        whole = float_to_int(it, node, value.column.getField("f"), truncate=True).column
        return Value(F.coalesce(value.column.getField("i"), whole), INT, False)
    if kind == "str":
        from mapwithstate.pyfunc.number_text import int_in_base

        return int_in_base(it, node, value, literal(10))
    raise it.ctx.refuse(node, f"int() of a {value.type}", "int() takes a str, int or float")


def float_to_int(it: "Interpreter", node: ast.AST, x: Column, truncate: bool) -> Value:
    it.ctx.check(node, F.isnan(x), "ValueError", "cannot convert float NaN to integer")
    it.ctx.check(
        node,
        F.abs(x) == F.lit(float("inf")),
        "OverflowError",
        "cannot convert float infinity to integer",
    )
    whole = F.when(x < 0, F.ceil(x)).otherwise(F.floor(x)) if truncate else x
    # 2**63 is the first double beyond BIGINT; -2**63 is BIGINT's own minimum.
    fits = (x.cast("double") < F.lit(9.223372036854775808e18)) & (
        x.cast("double") >= F.lit(-9.223372036854775808e18)
    )
    it.ctx.check(
        node,
        ~F.isnan(x) & (F.abs(x) != F.lit(float("inf"))) & ~fits,
        "OverflowError",
        "int result does not fit in 64 bits (BIGINT)",
    )
    return Value(F.when(fits, whole.cast("decimal(20,0)").cast("bigint")), INT, False)


def _float(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 0, 1, "float")
    if not args:
        return literal(0.0)
    value = operators.none_check(
        it.ctx, node, args[0], "float() argument must be a string or a real number, not 'NoneType'"
    )
    kind = value.type.kind
    if kind in ("int", "bool", "float", "num"):
        return Value(operators.as_float(value), FLOAT, False)
    if kind == "str":
        from mapwithstate.pyfunc.number_text import float_of_str

        return float_of_str(it, node, value)
    raise it.ctx.refuse(node, f"float() of a {value.type}", "float() takes a str, int or float")


def _round(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 1, 2, "round", ("ndigits",))
    ndigits = args[1] if len(args) == 2 else kwargs.get("ndigits")
    value = operators.none_check(
        it.ctx, node, args[0], "type NoneType doesn't define __round__ method"
    )
    if ndigits is not None and ndigits.type.kind == "none":
        ndigits = None  # round(x, None) is round(x)
    kind = value.type.kind
    if ndigits is not None and not (ndigits.is_const and isinstance(ndigits.const, int)):
        return _round_to(it, node, value, ndigits)
    if kind in ("int", "bool"):
        if ndigits is None or ndigits.const >= 0:
            return Value(value.column.cast("bigint"), INT, False)
        return int_result_of(
            it, node, F.bround(value.column.cast("decimal(20,0)"), ndigits.const).try_cast("bigint")
        )
    if kind == "float":
        if ndigits is None:
            return float_to_int(it, node, F.bround(value.column, 0), truncate=False)
        return _round_float(it, node, value.column, ndigits.const)
    if kind == "num":
        value = it.ctx.share(value)
        return operators.per_branch(
            it.ctx,
            value,
            lambda i: _round(it, node, [i] + args[1:], kwargs),
            lambda f: _round(it, node, [f] + args[1:], kwargs),
        )
    raise it.ctx.refuse(node, f"round() of a {value.type}", "round() takes an int or a float")


def _round_float(it: "Interpreter", node: ast.AST, x: Column, ndigits: Union[int, Column]) -> Value:
    """``round(x, ndigits)`` of a float: the plugin's exact rounding of its binary value (Spark's
    ``round`` and ``bround`` round its shortest decimal text: 2.675 to 2.68, Python to 2.67)."""
    rounded = python_round(x, ndigits)
    if isinstance(ndigits, Column) or ndigits < 0:
        # Rounding to tens and beyond can carry past the largest double.
        infinite = F.lit(float("inf"))
        it.ctx.check(
            node,
            (F.abs(rounded) == infinite) & (F.abs(x) != infinite),
            "OverflowError",
            "rounded value too large to represent",
        )
    return Value(rounded, FLOAT, False)


def _round_to(it: "Interpreter", node: ast.Call, value: Value, ndigits: Value) -> Value:
    """``round(x, n)`` with ``n`` known only at run time: of an int, the int itself for ``n >=
    0``, else rounded half to even at ``10 ** -n``; of a float, the plugin's rounding of its
    exact binary value. Where ``n`` is ``None``, ``round(x)``: an int, so that a float's
    result is then an int-or-float value."""
    if ndigits.type.kind not in ("int", "bool"):
        raise it.ctx.refuse(
            node,
            f"round() with ndigits of type {ndigits.type}",
            f"Python raises TypeError: '{ndigits.type}' object cannot be interpreted as an integer",
        )
    n = ndigits.column.cast("bigint")
    kind = value.type.kind
    if kind in ("int", "bool"):
        x = value.column.cast("bigint")
        rounded = let([x, n], _round_int)
        it.ctx.check(
            node,
            (n < F.lit(0)) & rounded.isNull(),
            "OverflowError",
            "int result does not fit in 64 bits (BIGINT)",
        )
        return Value(F.when(n < F.lit(0), rounded).otherwise(x), INT, False)
    if kind == "num":
        value = it.ctx.share(value)
        return operators.per_branch(
            it.ctx,
            value,
            lambda i: _round_to(it, node, i, ndigits),
            lambda f: _round_to(it, node, f, ndigits),
        )
    if kind != "float":
        raise it.ctx.refuse(node, f"round() of a {value.type}", "round() takes an int or a float")
    if not ndigits.nullable:
        return _round_float(it, node, value.column, n)
    saved = it.ctx.guard
    try:
        it.ctx.guard = c_and(saved, n.isNull())
        whole = float_to_int(it, node, F.bround(value.column, 0), truncate=False).column
        it.ctx.guard = c_and(saved, n.isNotNull())
        digits = _round_float(it, node, value.column, n).column
    finally:
        it.ctx.guard = saved
    return Value(
        F.struct(F.when(n.isNull(), whole).alias("i"), F.when(n.isNotNull(), digits).alias("f")),
        NUM,
        False,
    )


#: 10 ** k for k = 1 .. 18, the powers of ten a BIGINT holds.
_POWERS_OF_TEN = [10**k for k in range(1, 19)]


def _round_int(x: Column, n: Column) -> Column:
    """Python's ``round(x, n)`` of a BIGINT for ``n < 0``, half to even at ``p = 10 ** -n``;
    null where the result does not fit 64 bits. With ``q, r = divmod(x, p)``, the result is
    ``q * p``, or ``(q + 1) * p`` where ``2 * r > p``, or ``2 * r == p`` and ``q`` is odd.
    For ``-n == 19``, ``p`` is beyond 64 bits and ``q`` is 0 or -1: 0 where ``|x| <= p / 2``,
    else ``±p``, which does not fit; for ``-n >= 20``, ``p / 2`` is beyond every BIGINT: 0."""
    k = F.least(-F.greatest(n, F.lit(-20)), F.lit(20))
    p = F.element_at(
        F.array(*[F.lit(v).cast("bigint") for v in _POWERS_OF_TEN]),
        F.least(F.greatest(k, F.lit(1)), F.lit(18)).cast("int"),
    )
    r = F.pmod(x, p)
    q = F.call_function("div", x, p) - F.when((r != F.lit(0)) & (x < F.lit(0)), F.lit(1)).otherwise(
        F.lit(0)
    )
    up = (r * F.lit(2) > p) | ((r * F.lit(2) == p) & (F.pmod(q, F.lit(2)) == F.lit(1)))
    near = F.try_multiply(F.when(up, q + F.lit(1)).otherwise(q), p)
    half = F.lit(5 * 10**18)
    zero = F.lit(0).cast("bigint")
    far = F.when((x <= half) & (x >= -half), zero)
    return F.when(k >= F.lit(20), zero).when(k == F.lit(19), far).otherwise(near)


def int_result_of(it: "Interpreter", node: ast.AST, column: Column) -> Value:
    return operators.int_result(it.ctx, node, column, True)


def _min_max(largest: bool) -> Handler:
    name = "max" if largest else "min"

    def handler(
        it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
    ) -> Value:
        if len(args) > 1:
            return ordering.fold(it, node, args, largest)
        if len(args) == 1 and args[0].type.kind in ("list", "dict", "tuple", "str", "set"):
            # Of a set too: its equal elements are one, so no tie can show its order.
            values = iteration.iterated(it, node.args[0], args[0], f"{name}()", True)
            return ordering.list_min_max(it, node, values, largest)
        raise it.ctx.refuse(
            node,
            f"{name}() of one {args[0].type if args else 'nothing'}",
            f"{name}(a, b, ...) or {name}(list)",
        )

    return handler


def _sum(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 1, 2, "sum", ("start",))
    values = iteration.iterated(it, node.args[0], args[0], "sum()", True)
    element = values.type.args[0]
    start = args[1] if len(args) > 1 else kwargs.get("start", literal(0))
    it.ctx.check(
        node,
        F.exists(values.column, lambda e: e.isNull()),
        "TypeError",
        f"unsupported operand type(s) for +: '{element}' and 'NoneType'",
    )
    if element.kind in ("int", "bool", "none") and start.type.kind == "int":
        total = F.aggregate(
            values.column, start.column, lambda acc, x: F.try_add(acc, x.cast("bigint"))
        )
        return operators.int_result(it.ctx, node, total, True)
    if element.kind in ("int", "float", "bool") and start.type.kind in ("int", "float"):
        total = F.aggregate(
            values.column, operators.as_float(start), lambda acc, x: acc + x.cast("double")
        )
        if element.kind == "float" and start.type.kind == "int":

            def summed(floats: Column, first: Column) -> Column:
                total = F.aggregate(floats, first.cast("double"), lambda acc, x: acc + x)
                return operators.int_or_float_sum(total, F.size(floats) == 0, first)

            return Value(let([values.column, start.column], summed), NUM, False)
        return Value(total, FLOAT, False)
    raise it.ctx.refuse(node, f"sum() of a list of {element}", "sum() of ints or floats")


def _any_all(is_all: bool) -> Handler:
    def handler(
        it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
    ) -> Value:
        name = "all" if is_all else "any"
        _arity(it, node, args, kwargs, 1, 1, name)
        values = iteration.iterated(it, node.args[0], args[0], f"{name}()", True)
        element = values.type.args[0]

        def test(e: Column) -> Column:
            return c_column(operators.truthy(Value(e, element, True)))

        column = F.forall(values.column, test) if is_all else F.exists(values.column, test)
        return Value(column, BOOL, False)

    return handler


def _list(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 0, 1, "list")
    if not args:
        return Value(F.array(), list_of(NONE), False)
    return iteration.iterated(it, node.args[0], args[0], "list()")


def _pow(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    """``pow(base, exp)``, which is ``base ** exp``, and ``pow(base, exp, mod)`` of ints: the
    exact modular power (the plugin's ``__mws_python_mod_pow``), ValueError where ``mod`` is 0
    or, for a negative ``exp``, ``base`` has no inverse modulo ``mod``; where ``mod`` is None,
    ``base ** exp``."""
    names = ("base", "exp", "mod")
    _arity(it, node, args, kwargs, 0, 3, "pow", names)
    given = dict(zip(names, args, strict=False))
    for name, value in kwargs.items():
        if name in given:
            raise it.ctx.refuse(
                node,
                f"pow() with {name} twice",
                f"Python raises TypeError: argument for pow() given by name ('{name}') and "
                "position",
            )
        given[name] = value
    missing = [name for name in names[:2] if name not in given]
    if missing:
        raise it.ctx.refuse(
            node,
            f"pow() without {', '.join(missing)}",
            "pow(base, exp) or pow(base, exp, mod)",
        )
    base, exp, mod = given["base"], given["exp"], given.get("mod")
    if mod is None or mod.type.kind == "none":
        return operators.binary(it.ctx, node, ast.Pow(), base, exp)
    if any(v.type.kind not in ("int", "bool", "none") for v in (base, exp, mod)):
        raise it.ctx.refuse(
            node,
            f"pow() of {base.type}, {exp.type} and {mod.type}",
            "Python raises TypeError: pow() 3rd argument not allowed unless all arguments "
            "are integers",
        )
    if not mod.nullable:
        return _modular_power(it, node, base, exp, mod)
    from mapwithstate.pyfunc.paths import merge_values

    # Where mod is None at run time, pow(base, exp, None) is base ** exp.
    saved = it.ctx.guard
    try:
        it.ctx.guard = c_and(saved, mod.column.isNull())
        power = operators.binary(it.ctx, node, ast.Pow(), base, exp)
        it.ctx.guard = c_and(saved, mod.column.isNotNull())
        modular = _modular_power(it, node, base, exp, mod.non_null())
    finally:
        it.ctx.guard = saved

    merged = merge_values(mod.column.isNull(), power, modular)
    assert merged is not None  # an int, a float or an int-or-float with an int
    return merged


def _modular_power(it: "Interpreter", node: ast.Call, base: Value, exp: Value, mod: Value) -> Value:
    """``pow(base, exp, mod)`` of ints, ``mod`` not None."""
    message = "unsupported operand type(s) for ** or pow(): '{}', '{}', '{}'"
    for index, value in enumerate((base, exp)):
        types = ["int", "int", "int"]
        types[index] = "NoneType"
        operators.none_check(it.ctx, node, value, message.format(*types))
    a, b, m = (v.column.cast("bigint") for v in (base, exp, mod))
    it.ctx.check(node, m == F.lit(0), "ValueError", "pow() 3rd argument cannot be 0")
    result = modular_power(a, b, m)
    it.ctx.check(
        node,
        (m != F.lit(0)) & (b < F.lit(0)) & result.isNull(),
        "ValueError",
        "base is not invertible for the given modulus",
    )
    return Value(result, INT, False)


def _divmod(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``divmod(a, b)``: the tuple ``(a // b, a % b)``, with their errors (for floats CPython
    says ``float divmod()`` where ``//`` would say ``float floor division by zero``)."""
    _arity(it, node, args, kwargs, 2, 2, "divmod")
    a, b = args
    if a.type.kind == "float" or b.type.kind == "float":
        zero = F.lit(0.0) if b.type.kind != "num" else None
        if zero is not None:
            it.ctx.check(
                node,
                operators.as_float(b) == zero,
                "ZeroDivisionError",
                "float divmod()",
            )
    from mapwithstate.pyfunc.tuples import make

    a, b = it.ctx.share(a), it.ctx.share(b)
    quotient = operators.binary(it.ctx, node, ast.FloorDiv(), a, b)
    remainder = operators.binary(it.ctx, node, ast.Mod(), a, b)
    return make([quotient, remainder])


#: The Python type objects ``isinstance`` accepts, and the value kinds that are instances.
_INSTANCE_KINDS: Dict[Any, Tuple[str, ...]] = {
    py.int: ("int", "bool"),
    py.bool: ("bool",),
    py.float: ("float",),
    py.str: ("str",),
    py.list: ("list",),
    py.dict: ("dict",),
    py.tuple: ("tuple",),
    datetime: ("datetime",),
    date: ("date", "datetime"),
    timedelta: ("timedelta",),
}


def _isinstance(it: "Interpreter", node: ast.Call) -> Value:
    """``isinstance(x, T)`` or ``isinstance(x, (T1, T2))``: decided by ``x``'s type when
    compiling, and by whether ``x`` is ``None`` (and, for an int-or-float, which) at run
    time."""
    if len(node.args) != 2 or node.keywords:
        raise it.ctx.refuse(
            node, "isinstance() call", "isinstance(x, int) or isinstance(x, (int, float))"
        )
    classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
    kinds: Set[str] = set()
    for c in classes:
        target = it.expression(c)
        if not any(target is t for t in _INSTANCE_KINDS):
            raise it.ctx.refuse(
                c,
                f"isinstance() of {getattr(target, '__name__', type(target).__name__)}",
                "isinstance() takes int, bool, float, str, list, dict, tuple, datetime, date, "
                "timedelta or a tuple of them",
            )
        kinds.update(next(v for t, v in _INSTANCE_KINDS.items() if t is target))
    value = it.value(node.args[0])
    kind = value.type.kind
    if kind == "num":
        test: Any = F.lit(False)
        if "int" in kinds:
            test = test | value.column.getField("i").isNotNull()
        if "float" in kinds:
            test = test | value.column.getField("f").isNotNull()
        return Value(F.coalesce(test, F.lit(False)), BOOL, False)
    if kind not in kinds:
        return literal(False)
    if not value.nullable:
        return literal(True)
    return Value(value.column.isNotNull(), BOOL, False)


def _counter(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    from mapwithstate.pyfunc import counters

    return counters.construct(it, node, args, kwargs)


def _deque(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    from mapwithstate.pyfunc import deques

    kind = constructor(it.ctx.source, node)
    assert kind is not None
    return deques.construct(it, node, kind, args, kwargs)


#: The builtins whose result a generator's order cannot change: it may iterate a set.
_ORDER_FREE = {id(f) for f in (py.sum, py.min, py.max, py.any, py.all, py.sorted)}

_BUILTINS: Dict[int, Handler] = {
    id(py.len): _len,
    id(py.abs): _abs,
    id(py.bool): _bool,
    id(py.str): _str,
    id(py.int): _int,
    id(py.format): _format,
    id(py.repr): _repr,
    id(py.float): _float,
    id(py.round): _round,
    id(py.pow): _pow,
    id(py.divmod): _divmod,
    id(py.min): _min_max(False),
    id(py.max): _min_max(True),
    id(py.sum): _sum,
    id(py.any): _any_all(False),
    id(py.all): _any_all(True),
    id(py.sorted): ordering.sorted_list,
    id(py.list): _list,
    id(py.dict): iteration.dict_call,
    id(py.zip): iteration.zip_call,
    id(py.enumerate): iteration.enumerate_call,
    id(py.reversed): iteration.reversed_call,
    id(datetime): _datetime,
    id(timedelta): _timedelta,
    id(date): _date,
    **MATH_FUNCTIONS,
    **NUMBER_TEXT_FUNCTIONS,
    **STATISTICS_FUNCTIONS,
    id(collections.Counter): _counter,
    id(collections.deque): _deque,
}


# ------------------------------------------------------------------ methods


def method_argument(it: "Interpreter", node: ast.expr, expected: Optional[PyType] = None) -> Value:
    """A method's argument (``expected``: the type the method stores it as, see
    :mod:`~mapwithstate.pyfunc.struct_targets`); a generator expression is its list (``",
    ".join(str(x) for x in xs)``, ``xs.extend(...)``): the methods that take an iterable
    consume it whole, in order, so the list's elements, checks and order are the
    generator's."""
    if isinstance(node, ast.GeneratorExp):
        listed = ast.copy_location(ast.ListComp(elt=node.elt, generators=node.generators), node)
        return it.value(listed)
    return struct_targets.value(it, node, expected)


def _method(it: "Interpreter", node: ast.Call, base: Value, name: str) -> Value:
    assert isinstance(node.func, ast.Attribute)
    variable = kind_of(it, node.func.value)
    if variable is not None and variable.name == "Counter" and name in ("most_common", "total"):
        from mapwithstate.pyfunc import counters

        return counters.method(it, node, base, name)
    if variable is not None and variable.name == "deque" and name in DEQUE_IN_PLACE:
        raise it.ctx.refuse(
            node,
            f"deque.{name}() inside an expression",
            "call it as a statement of its own (d.append(v)) or as an assignment's whole "
            "value (last = d.popleft())",
        )
    kind = base.type.kind
    if kind == "match":
        match = operators.attribute_of_none(it.ctx, node, base, name)
        return regex_calls.match_method(it, node, match, name)
    if kind == "set":
        from mapwithstate.pyfunc import sets

        return sets.method(it, node, operators.attribute_of_none(it.ctx, node, base, name), name)
    table = {
        "str": _STR_METHODS,
        "dict": _DICT_METHODS,
        "timedelta": _TIMEDELTA_METHODS,
        "datetime": DATETIME_METHODS,
        "date": DATE_METHODS,
        "list": LIST_METHODS,
        "int": INT_METHODS,
        "bool": INT_METHODS,
        "float": FLOAT_METHODS,
    }.get(kind, {})
    handler = table.get(name)
    if handler is None:
        changing = in_place.refusal(it, node, base, name)
        if changing is not None:
            raise changing
        raise it.ctx.refuse(
            node,
            f"{base.type}.{name}()",
            f"supported {base.type} methods: {', '.join(sorted(table)) or 'none'}",
        )
    # None has no such method: Python raises AttributeError looking it up, before it
    # evaluates the arguments.
    base = operators.attribute_of_none(it.ctx, node, base, name)
    args = [method_argument(it, a) for a in node.args]
    keywords = [(k.arg, it.value(k.value)) for k in node.keywords]
    kwargs = {keyword: value for keyword, value in keywords if keyword is not None}
    if len(kwargs) < len(keywords):
        raise it.ctx.refuse(node, "**kwargs in a call", "pass arguments one by one")
    # A dict's key and default may be None (get(None) is the default: a map has no null key).
    if kind != "dict" and not (kind == "str" and name in ACCEPTS_NONE):
        for arg in args + list(kwargs.values()):
            if arg.type.kind == "str" and arg.nullable:
                operators.none_check(it.ctx, node, arg, f"{name}() argument must be str, not None")
    return handler(it, node, base, args, kwargs)


def dict_get(
    it: "Interpreter",
    node: ast.Call,
    base: Value,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Value:
    _arity(it, node, args, kwargs, 1, 2, "get")
    key_type, value_type = base.type.args
    key = args[0]
    default = args[1] if len(args) > 1 else literal(None)
    joined = unify(value_type, default.type)
    if joined is None:
        raise it.ctx.refuse(
            node,
            f"get() with a {default.type} default for {value_type} values",
            "give the default the values' type",
        )
    # A None key (Spark takes no untyped null there) is a null of the keys' type: not found.
    key_column = key.column if key.type.kind != "none" else key.column.cast(to_spark(key_type))
    found = F.coalesce(F.map_contains_key(base.column, key_column), F.lit(False))
    # Each side made the joined type's: an int and a float default or value (a Counter of
    # floats, whose missing key is 0) become an int-or-float.
    present = Value(F.element_at(base.column, key_column), value_type, True)
    column = F.when(found, converted(present, joined)).otherwise(converted(default, joined))
    return Value(column, joined, True)


_DICT_METHODS: Dict[str, MethodHandler] = {"get": dict_get, **iteration.DICT_VIEWS}
