"""Python's ``statistics`` module in a state function: ``mean``, ``fmean``, ``median``,
``median_low``, ``median_high``, ``mode``, ``pvariance``, ``variance``, ``pstdev`` and
``stdev`` of a list, a generator or any iterable of ints or of floats, with CPython 3.11's
results to the last bit.

CPython computes the means and variances in exact fractions, rounded once at the end (``mean``
of ints is an int where it is whole: ``mean([1, 3])`` is ``2``, ``mean([1, 2])`` ``1.5``), and
the deviations as the correctly rounded square root of the exact variance; ``fmean`` is
``math.fsum(data) / n``. Spark's ``avg`` and ``stddev`` round at every step, so these compile
to the plugin's ``__mws_python_statistics_*`` functions, which compute exactly as CPython does
(``io.mapwithstate.pyfunc.PythonStatistics``). ``median``, ``median_low`` and ``median_high``
sort as ``sorted()`` does and take the middle (``median`` of an even count is ``(a + b) /
2``, a float); ``mode`` is the first of the most common items (as ``Counter.most_common(1)``).
Where Python raises, the query fails with its exception: ``StatisticsError`` for too few data
points, ``TypeError`` for a ``None`` item, and CPython's own failures for NaN and infinities
and for a variance past the largest float (``OverflowError: integer division result too large
for a float``).
"""

import ast
import statistics
from typing import TYPE_CHECKING, Dict, List

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import iteration
from mapwithstate.pyfunc.arguments import Handler, arity
from mapwithstate.pyfunc.pytypes import FLOAT, NUM
from mapwithstate.pyfunc.values import Value, let

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["STATISTICS_FUNCTIONS", "ORDER_FREE"]

#: What each exact function needs at least, and Python's message for fewer.
_LEAST = {
    "mean": (1, "mean requires at least one data point"),
    "fmean": (1, "fmean requires at least one data point"),
    "pvariance": (1, "pvariance requires at least one data point"),
    "variance": (2, "variance requires at least two data points"),
    "pstdev": (1, "pstdev requires at least one data point"),
    "stdev": (2, "stdev requires at least two data points"),
}
#: The plugin's failures (``PythonStatistics.Errors``): Python's exception and message.
_ERRORS = {
    "overflow": ("OverflowError", "int result does not fit in 64 bits (BIGINT)"),
    "numerator": ("AttributeError", "'float' object has no attribute 'numerator'"),
    "fsum_inf": ("ValueError", "-inf + inf in fsum"),
    "fsum_overflow": ("OverflowError", "intermediate overflow in fsum"),
    "division_overflow": ("OverflowError", "integer division result too large for a float"),
}
#: Which failures each function may have.
_MAY_FAIL = {
    "mean": (),
    "fmean": ("fsum_inf", "fsum_overflow"),
    "pvariance": ("overflow", "division_overflow"),
    "variance": ("overflow", "division_overflow"),
    "pstdev": ("numerator",),
    "stdev": ("numerator",),
}


def _data(
    it: "Interpreter",
    node: ast.Call,
    args: List[Value],
    kwargs: Dict[str, Value],
    name: str,
    order_free: bool = True,
) -> Value:
    """The one argument's items as a list (the statistics of a set are of its items)."""
    arity(it, node, args, kwargs, 1, 1, f"statistics.{name}")
    return iteration.iterated(it, node.args[0], args[0], f"statistics.{name}()", order_free)


def _numbers(it: "Interpreter", node: ast.Call, data: Value, name: str, message: str) -> bool:
    """Whether the items are ints (else floats); refuses other items, and fails the query
    with ``TypeError`` where one is ``None``."""
    element = data.type.args[0]
    if element.kind not in ("int", "float", "none"):
        raise it.ctx.refuse(
            node,
            f"statistics.{name}() of {element} items",
            "the statistics of ints or of floats (an int-or-float or a bool item: convert "
            "with float(x) or int(x))",
        )
    it.ctx.check(node, F.exists(data.column, lambda e: e.isNull()), "TypeError", message)
    return element.kind != "float"


def _exact(name: str) -> Handler:
    def handler(
        it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
    ) -> Value:
        data = _data(it, node, args, kwargs, name)
        none_message = (
            "must be real number, not NoneType"
            if name == "fmean"
            else "can't convert type 'NoneType' to numerator/denominator"
        )
        ints = _numbers(it, node, data, name, none_message)
        least, message = _LEAST[name]
        it.ctx.check(node, F.size(data.column) < least, "StatisticsError", message)
        values = data.column.cast("array<bigint>" if ints else "array<double>")
        result = F.call_function(f"__mws_python_statistics_{name}", values)
        for error in _MAY_FAIL[name]:
            exception, text = _ERRORS[error]
            it.ctx.check(node, result.getField("error") == F.lit(error), exception, text)
        if ints and name in ("mean", "pvariance", "variance"):
            # An int where the fraction is whole, else a float: Python's _convert.
            column = F.struct(result.getField("i").alias("i"), result.getField("f").alias("f"))
            return Value(column, NUM, False)
        return Value(result.getField("f"), FLOAT, False)

    return handler


def _median(name: str) -> Handler:
    def handler(
        it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
    ) -> Value:
        from mapwithstate.pyfunc import ordering

        data = _data(it, node, args, kwargs, name)
        element = data.type.args[0]
        if name == "median" and element.kind not in ("int", "float", "none"):
            raise it.ctx.refuse(
                node,
                f"statistics.median() of {element} items",
                "median of ints or floats (median_low and median_high take any items)",
            )
        ordered = ordering.sorted_list(it, node, [data], {})
        size = F.size(ordered.column)
        it.ctx.check(node, size == 0, "StatisticsError", "no median for empty data")

        def at(s: Column, position: Column) -> Column:
            return F.element_at(s, position.cast("int"))

        half = F.floor(size / 2).cast("bigint")
        odd = F.pmod(size, F.lit(2)) == 1
        if name == "median_high":
            return Value(let([ordered.column], lambda s: at(s, half + 1)), element, True)
        if name == "median_low":
            return Value(
                let(
                    [ordered.column], lambda s: F.when(odd, at(s, half + 1)).otherwise(at(s, half))
                ),
                element,
                True,
            )
        # (a + b) / 2 of the middle two: Python's ints do not overflow, nor does a decimal.
        if element.kind == "float":
            return Value(
                let(
                    [ordered.column],
                    lambda s: F.when(odd, at(s, half + 1)).otherwise(
                        (at(s, half) + at(s, half + 1)) / 2
                    ),
                ),
                FLOAT,
                False,
            )

        def middle(s: Column) -> Column:
            a, b = at(s, half).cast("decimal(20,0)"), at(s, half + 1).cast("decimal(20,0)")
            return F.struct(
                F.when(odd, at(s, half + 1)).alias("i"),
                F.when(~odd, ((a + b) / 2).cast("double")).alias("f"),
            )

        return Value(let([ordered.column], middle), NUM, False)

    return handler


def _mode(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    """``statistics.mode(data)``: the first of the most common items
    (``Counter(data).most_common(1)``: the first largest count)."""
    data = _data(it, node, args, kwargs, "mode", order_free=False)
    element = data.type.args[0]
    if element.kind not in ("int", "str", "bool", "datetime", "date", "timedelta", "none"):
        raise it.ctx.refuse(
            node,
            f"statistics.mode() of {element} items",
            "the mode of ints, strs, bools, datetimes, dates or timedeltas",
        )
    it.ctx.check(node, F.size(data.column) == 0, "StatisticsError", "no mode for empty data")

    def first_most_common(values: Column) -> Column:
        keys = F.array_distinct(values)
        counts = F.transform(keys, lambda k: F.size(F.filter(values, lambda e: e.eqNullSafe(k))))
        return F.element_at(keys, F.array_position(counts, F.array_max(counts)).cast("int"))

    column = let([data.column], first_most_common)
    return Value(F.when(F.size(data.column) > 0, column), element, True)


_EXACT = ("mean", "fmean", "pvariance", "variance", "pstdev", "stdev")
_MEDIANS = ("median", "median_low", "median_high")

STATISTICS_FUNCTIONS: Dict[int, Handler] = {
    **{id(getattr(statistics, name)): _exact(name) for name in _EXACT},
    **{id(getattr(statistics, name)): _median(name) for name in _MEDIANS},
    id(statistics.mode): _mode,
}
#: The functions whose result the order of their items cannot change (a set may be given).
ORDER_FREE = {id(getattr(statistics, name)) for name in _EXACT + _MEDIANS}
