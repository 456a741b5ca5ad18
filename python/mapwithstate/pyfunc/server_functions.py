"""The plugin's reserved functions (``__mws_python_*``), as Columns: where Python's semantics
has no exact equivalent among Spark's functions, the compiler calls one of these, which the
plugin's extensions register in every session (``io.mapwithstate.pyfunc.PythonFunctions``), so
a compiled Column resolves from Spark Connect and from classic PySpark alike.
"""

from typing import Union

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = [
    "ROUND_MAX_DIGITS",
    "ROUND_MIN_DIGITS",
    "python_round",
    "EXACT_INT_FUNCTIONS",
    "exact_int",
    "int_power",
    "modular_power",
]

#: CPython's NDIGITS_MAX and NDIGITS_MIN: ``round(x, n)`` of a float is ``x`` above the first,
#: a zero of ``x``'s sign below the second.
ROUND_MAX_DIGITS = 323
ROUND_MIN_DIGITS = -308


def python_round(x: Column, ndigits: Union[int, Column]) -> Column:
    """Python's ``round(x, ndigits)`` of a DOUBLE ``x`` (``ndigits`` an int, or a BIGINT
    Column): its exact binary value rounded half to even, infinite where Python raises
    OverflowError (only for ``ndigits < 0``).

    >>> python_round(F.col("amount"), 2)  # doctest: +SKIP
    Column<'__mws_python_round(amount, 2)'>
    """
    # Clamped into an INT; any ndigits past the bounds gives what the bound just past gives.
    low, high = ROUND_MIN_DIGITS - 1, ROUND_MAX_DIGITS + 1
    if isinstance(ndigits, Column):
        clamped = F.least(F.greatest(ndigits, F.lit(low)), F.lit(high)).cast("int")
    else:
        clamped = F.lit(max(min(ndigits, high), low))
    return F.call_function("__mws_python_round", x, clamped)


#: The reserved function of Python's ``+``, ``-`` and ``*`` of ints, by operator symbol.
EXACT_INT_FUNCTIONS = {
    "+": "__mws_python_add",
    "-": "__mws_python_subtract",
    "*": "__mws_python_multiply",
}


def exact_int(symbol: str, a: Column, b: Column, message: str) -> Column:
    """Python's ``a <symbol> b`` (``+``, ``-`` or ``*``) of BIGINTs, which fails the query with
    ``message`` (Spark's ``raise_error``'s failure) where the result is beyond 64 bits, and
    only there: one exact JVM operation, as Spark's ANSI ``+`` is.

    >>> exact_int("+", F.col("n"), F.lit(1), "OverflowError: ...")  # doctest: +SKIP
    Column<'__mws_python_add(n, 1, OverflowError: ...)'>
    """
    return F.call_function(EXACT_INT_FUNCTIONS[symbol], a, b, F.lit(message))


def int_power(a: Column, b: Column) -> Column:
    """Python's ``a ** b`` of BIGINTs as the compiler's int-or-float value: a struct whose ``i``
    is the exact int for ``b >= 0`` (null beyond 64 bits, which the caller checks) and ``f``
    CPython's float for ``b < 0`` (infinite for ``0 ** b``, which the caller checks).

    >>> int_power(F.col("base"), F.col("exponent"))  # doctest: +SKIP
    Column<'__mws_python_int_pow(base, exponent)'>
    """
    return F.call_function("__mws_python_int_pow", a, b)


def modular_power(a: Column, b: Column, m: Column) -> Column:
    """Python's ``pow(a, b, m)`` of BIGINTs, exactly: in ``[0, m)`` for ``m > 0``, ``(m, 0]``
    for ``m < 0``; for ``b < 0`` the power of ``a``'s inverse modulo ``m`` (Python 3.8+).
    Null where Python raises ValueError (``m`` is 0, or ``a`` has no inverse modulo ``m``),
    which the caller checks.

    >>> modular_power(F.col("a"), F.col("b"), F.lit(97))  # doctest: +SKIP
    Column<'__mws_python_mod_pow(a, b, 97)'>
    """
    return F.call_function("__mws_python_mod_pow", a, b, m)
