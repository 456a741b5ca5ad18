"""Python's ``math`` functions as Columns, with Python's errors.

Each function takes ints, bools and floats (``None`` fails the query with Python's
``TypeError``), works on doubles as CPython does, and fails the query where CPython raises:
``ValueError: math domain error`` outside the domain (``sqrt(-1)``, ``log(0)``, ``asin(2)``,
``sin(inf)``), ``OverflowError: math range error`` where a finite argument's result is beyond
a double (``exp(1000)``, ``cosh(1000)``). ``floor``, ``ceil`` and ``trunc`` give ints.

Spark computes with Java's ``Math``; CPython calls the platform's C library, so results other
than ``sqrt``, ``floor``, ``ceil``, ``trunc``, ``fabs``, ``copysign``, ``fmod``, ``degrees``
and ``radians`` (exact, or one multiplication by the same constant) may differ in the last bit.
Where Spark's own function is not accurate — its ``asinh`` is ``log(x + sqrt(x*x + 1))``,
``-inf`` at ``-1e10`` — the function is composed here the way C libraries compute it.
"""

import ast
import math
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.arguments import Handler
from mapwithstate.pyfunc.arguments import arity as _arity
from mapwithstate.pyfunc.pytypes import BOOL, FLOAT, INT
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["MATH_FUNCTIONS"]

_INF = float("inf")
_LN2 = math.log(2.0)
_PREDICATES = ("isnan", "isinf", "isfinite")


def _finite(x: Column) -> Column:
    return ~F.isnan(x) & (F.abs(x) != F.lit(_INF))


def _number(it: "Interpreter", node: ast.Call, value: Value, name: str) -> Column:
    """``value`` as a DOUBLE, which must be a number (``TypeError`` where it is None)."""
    value = operators.none_check(it.ctx, node, value, "must be real number, not NoneType")
    if not value.type.is_numeric and value.type.kind != "num":
        raise it.ctx.refuse(node, f"math.{name}() of a {value.type}", "math functions take numbers")
    return operators.as_float(value)


def _math_unary(
    name: str,
    spark: Callable[[Column], Column],
    domain: Optional[Callable[[Column], Column]] = None,
    result_int: bool = False,
    overflows: bool = False,
) -> Handler:
    """``math.name(x)``: ``spark`` of the double ``x``; ``ValueError`` where ``domain`` holds;
    ``OverflowError`` where ``overflows`` and a finite ``x`` gives an infinite result."""

    def handler(
        it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
    ) -> Value:
        _arity(it, node, args, kwargs, 1, 1, f"math.{name}")
        value = operators.none_check(it.ctx, node, args[0], "must be real number, not NoneType")
        if not value.type.is_numeric and value.type.kind != "num":
            raise it.ctx.refuse(
                node, f"math.{name}() of a {value.type}", "math functions take numbers"
            )
        if result_int and value.type.kind in ("int", "bool"):
            return Value(value.column.cast("bigint"), INT, False)
        x = operators.as_float(value)
        if domain is not None:
            it.ctx.check(node, domain(x), "ValueError", "math domain error")
        if result_int:
            from mapwithstate.pyfunc.builtins import float_to_int

            return float_to_int(it, node, spark(x).cast("double"), truncate=False)
        result = spark(x)
        if overflows:
            it.ctx.check(
                node,
                _finite(x) & (F.abs(result) == F.lit(_INF)),
                "OverflowError",
                "math range error",
            )
        return Value(result, BOOL if name in _PREDICATES else FLOAT, False)

    return handler


def _math_log(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    _arity(it, node, args, kwargs, 1, 2, "math.log")
    x = _number(it, node, args[0], "log")
    it.ctx.check(node, x <= F.lit(0.0), "ValueError", "math domain error")
    if len(args) == 1:
        return Value(F.log(x), FLOAT, False)
    base = _number(it, node, args[1], "log")
    it.ctx.check(node, base <= F.lit(0.0), "ValueError", "math domain error")
    it.ctx.check(node, base == F.lit(1.0), "ZeroDivisionError", "float division by zero")
    return Value(F.log(x) / F.log(base), FLOAT, False)


def _math_pow(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    _arity(it, node, args, kwargs, 2, 2, "math.pow")
    a = Value(operators.as_float(args[0]), FLOAT, args[0].nullable)
    b = Value(operators.as_float(args[1]), FLOAT, args[1].nullable)
    return operators.binary(it.ctx, node, ast.Pow(), a, b)


def _binary(
    name: str,
    spark: Callable[[Column, Column], Column],
    domain: Optional[Callable[[Column, Column], Column]] = None,
    overflows: bool = False,
) -> Handler:
    """``math.name(x, y)`` of two numbers, as :func:`_math_unary`."""

    def handler(
        it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
    ) -> Value:
        _arity(it, node, args, kwargs, 2, 2, f"math.{name}")
        x, y = _number(it, node, args[0], name), _number(it, node, args[1], name)
        if domain is not None:
            it.ctx.check(node, domain(x, y), "ValueError", "math domain error")
        result = spark(x, y)
        if overflows:
            it.ctx.check(
                node,
                _finite(x) & _finite(y) & (F.abs(result) == F.lit(_INF)),
                "OverflowError",
                "math range error",
            )
        return Value(result, FLOAT, False)

    return handler


def _signed(x: Column, magnitude: Column) -> Column:
    """``magnitude`` with ``x``'s sign (``-0.0`` counts as negative)."""
    return F.when(_negative(x), -magnitude).otherwise(magnitude)


def _negative(x: Column) -> Column:
    # atan2(-0.0, -1) is -pi and atan2(0.0, -1) is pi: the sign bit of a zero.
    return (x < F.lit(0.0)) | ((x == F.lit(0.0)) & (F.atan2(x, F.lit(-1.0)) < F.lit(0.0)))


def _asinh(x: Column) -> Column:
    """C's asinh: exact for tiny ``x``, ``log1p`` near zero, ``log`` far from it."""
    ax = F.abs(x)
    square = x * x
    magnitude = (
        F.when(ax < F.lit(2.0**-28), ax)
        .when(ax > F.lit(2.0**28), F.log(ax) + F.lit(_LN2))
        .when(ax > F.lit(2.0), F.log(F.lit(2.0) * ax + F.lit(1.0) / (F.sqrt(square + 1.0) + ax)))
        .otherwise(F.log1p(ax + square / (F.lit(1.0) + F.sqrt(F.lit(1.0) + square))))
    )
    return F.when(F.isnan(x) | (ax == F.lit(_INF)), x).otherwise(_signed(x, magnitude))


def _acosh(x: Column) -> Column:
    """C's acosh (``x >= 1``)."""
    t = x - F.lit(1.0)
    return (
        F.when(F.isnan(x) | (x == F.lit(_INF)), x)
        .when(x > F.lit(2.0**28), F.log(x) + F.lit(_LN2))
        .when(x > F.lit(2.0), F.log(F.lit(2.0) * x - F.lit(1.0) / (x + F.sqrt(x * x - 1.0))))
        .otherwise(F.log1p(t + F.sqrt(F.lit(2.0) * t + t * t)))
    )


def _atanh(x: Column) -> Column:
    """C's atanh (``|x| < 1``)."""
    ax = F.abs(x)
    magnitude = F.when(
        ax < F.lit(0.5),
        F.lit(0.5) * F.log1p(F.lit(2.0) * ax + F.lit(2.0) * ax * ax / (F.lit(1.0) - ax)),
    ).otherwise(F.lit(0.5) * F.log1p(F.lit(2.0) * ax / (F.lit(1.0) - ax)))
    return F.when(F.isnan(x) | (ax < F.lit(2.0**-28)), x).otherwise(_signed(x, magnitude))


def _copysign(x: Column, y: Column) -> Column:
    return _signed(y, F.abs(x))


def _isclose(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``math.isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0)``, CPython's test term by term."""
    _arity(it, node, args, kwargs, 2, 2, "math.isclose", ("rel_tol", "abs_tol"))
    a, b = _number(it, node, args[0], "isclose"), _number(it, node, args[1], "isclose")
    rel = _number(it, node, kwargs["rel_tol"], "isclose") if "rel_tol" in kwargs else F.lit(1e-09)
    tol = _number(it, node, kwargs["abs_tol"], "isclose") if "abs_tol" in kwargs else F.lit(0.0)
    it.ctx.check(
        node,
        (rel < F.lit(0.0)) | (tol < F.lit(0.0)),
        "ValueError",
        "tolerances must be non-negative",
    )
    diff = F.abs(b - a)
    close = (
        F.when(a == b, F.lit(True))
        .when((F.abs(a) == F.lit(_INF)) | (F.abs(b) == F.lit(_INF)), F.lit(False))
        .otherwise((diff <= F.abs(rel * b)) | (diff <= F.abs(rel * a)) | (diff <= tol))
    )
    # NaN compares unequal to everything: no branch above holds for it.
    return Value(F.coalesce(close & ~F.isnan(a) & ~F.isnan(b), F.lit(False)), BOOL, False)


def _hypot(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    """``math.hypot(x, y)`` (the two-coordinate form)."""
    _arity(it, node, args, kwargs, 2, 2, "math.hypot")
    x, y = _number(it, node, args[0], "hypot"), _number(it, node, args[1], "hypot")
    return Value(F.hypot(x, y), FLOAT, False)


_FACTORIALS = [math.factorial(n) for n in range(21)]


def _factorial(
    it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``math.factorial(n)`` of an int: ``ValueError`` for a negative ``n``; beyond ``20!``
    the result does not fit 64 bits, which fails the query with ``OverflowError``."""
    _arity(it, node, args, kwargs, 1, 1, "math.factorial")
    if args[0].type.kind not in ("int", "bool", "none"):
        raise it.ctx.refuse(
            node,
            f"math.factorial() of a {args[0].type}",
            "Python raises TypeError: 'float' object cannot be interpreted as an integer",
        )
    value = operators.none_check(
        it.ctx, node, args[0], "'NoneType' object cannot be interpreted as an integer"
    )
    n = value.column.cast("bigint")
    it.ctx.check(node, n < F.lit(0), "ValueError", "factorial() not defined for negative values")
    it.ctx.check(
        node, n > F.lit(20), "OverflowError", "int result does not fit in 64 bits (BIGINT)"
    )
    table = F.array(*[F.lit(f).cast("bigint") for f in _FACTORIALS])
    inside = (n >= F.lit(0)) & (n <= F.lit(20))
    return Value(F.when(inside, F.element_at(table, (n + F.lit(1)).cast("int"))), INT, False)


MATH_FUNCTIONS: Dict[int, Handler] = {
    id(math.sqrt): _math_unary("sqrt", F.sqrt, lambda x: x < F.lit(0.0)),
    id(math.exp): _math_unary("exp", F.exp, overflows=True),
    id(math.expm1): _math_unary("expm1", F.expm1, overflows=True),
    id(math.log10): _math_unary("log10", F.log10, lambda x: x <= F.lit(0.0)),
    id(math.log2): _math_unary("log2", F.log2, lambda x: x <= F.lit(0.0)),
    id(math.log1p): _math_unary("log1p", F.log1p, lambda x: x <= F.lit(-1.0)),
    id(math.fabs): _math_unary("fabs", F.abs),
    id(math.floor): _math_unary("floor", F.floor, result_int=True),
    id(math.ceil): _math_unary("ceil", F.ceil, result_int=True),
    id(math.trunc): _math_unary(
        "trunc", lambda x: F.when(x < 0, F.ceil(x)).otherwise(F.floor(x)), result_int=True
    ),
    id(math.isnan): _math_unary("isnan", F.isnan),
    id(math.isinf): _math_unary("isinf", lambda x: F.abs(x) == F.lit(_INF)),
    id(math.isfinite): _math_unary("isfinite", _finite),
    id(math.sin): _math_unary("sin", F.sin, lambda x: F.abs(x) == F.lit(_INF)),
    id(math.cos): _math_unary("cos", F.cos, lambda x: F.abs(x) == F.lit(_INF)),
    id(math.tan): _math_unary("tan", F.tan, lambda x: F.abs(x) == F.lit(_INF)),
    id(math.asin): _math_unary("asin", F.asin, lambda x: F.abs(x) > F.lit(1.0)),
    id(math.acos): _math_unary("acos", F.acos, lambda x: F.abs(x) > F.lit(1.0)),
    id(math.atan): _math_unary("atan", F.atan),
    id(math.sinh): _math_unary("sinh", F.sinh, overflows=True),
    id(math.cosh): _math_unary("cosh", F.cosh, overflows=True),
    id(math.tanh): _math_unary("tanh", F.tanh),
    id(math.asinh): _math_unary("asinh", _asinh),
    id(math.acosh): _math_unary("acosh", _acosh, lambda x: x < F.lit(1.0)),
    id(math.atanh): _math_unary("atanh", _atanh, lambda x: F.abs(x) >= F.lit(1.0)),
    id(math.degrees): _math_unary("degrees", F.degrees),
    id(math.radians): _math_unary("radians", F.radians),
    id(math.atan2): _binary("atan2", F.atan2),
    id(math.copysign): _binary("copysign", _copysign),
    # Java's % of doubles is C's fmod; CPython raises where it gives NaN of no NaN.
    id(math.fmod): _binary(
        "fmod",
        lambda x, y: x % F.when(y != F.lit(0.0), y),
        lambda x, y: ~F.isnan(x) & ~F.isnan(y) & ((y == F.lit(0.0)) | (F.abs(x) == F.lit(_INF))),
    ),
    id(math.hypot): _hypot,
    id(math.isclose): _isclose,
    id(math.factorial): _factorial,
    id(math.log): _math_log,
    id(math.pow): _math_pow,
}
