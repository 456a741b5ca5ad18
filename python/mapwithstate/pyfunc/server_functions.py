"""The plugin's reserved functions (``__mws_python_*``), as Columns: where Python's semantics
has no exact equivalent among Spark's functions, the compiler calls one of these, which the
plugin's extensions register in every session (``io.mapwithstate.pyfunc.PythonFunctions``), so
a compiled Column resolves from Spark Connect and from classic PySpark alike.
"""

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["ROUND_MAX_DIGITS", "ROUND_MIN_DIGITS", "python_round"]

#: CPython's NDIGITS_MAX and NDIGITS_MIN: ``round(x, n)`` of a float is ``x`` above the first,
#: a zero of ``x``'s sign below the second.
ROUND_MAX_DIGITS = 323
ROUND_MIN_DIGITS = -308


def python_round(x: Column, ndigits: int) -> Column:
    """Python's ``round(x, ndigits)`` of a DOUBLE ``x``: its exact binary value rounded half
    to even, infinite where Python raises OverflowError (only for ``ndigits < 0``).

    >>> python_round(F.col("amount"), 2)  # doctest: +SKIP
    Column<'__mws_python_round(amount, 2)'>
    """
    # Clamped into an INT; any ndigits past the bounds gives what the bound just past gives.
    clamped = max(min(ndigits, ROUND_MAX_DIGITS + 1), ROUND_MIN_DIGITS - 1)
    return F.call_function("__mws_python_round", x, F.lit(clamped))
