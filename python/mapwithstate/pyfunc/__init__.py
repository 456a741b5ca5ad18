"""Python state functions compiled to Spark Columns: ``state_function`` and ``CompileError``.

One concept per module: :mod:`.source` (the function's tree and names), :mod:`.pytypes`
(Python types and the Spark types that hold them), :mod:`.values` (typed values over Columns),
:mod:`.operators`, :mod:`.formatting` (``str()``), :mod:`.builtins` (builtins, methods,
``math``, ``datetime``, the ``pyspark.sql.functions`` escape hatch), :mod:`.aggregates` (a
group function's ``rows``), :mod:`.paths` (a path's symbolic state and merging),
:mod:`.interpreter` (statements and expressions), :mod:`.compiler` (the Columns of a
``StateSpec``) and :mod:`.spec` (the decorator and the spec it returns).
"""
from mapwithstate.pyfunc.errors import CompileError
from mapwithstate.pyfunc.spec import PythonStateSpec, compile_for, state_function

__all__ = ["CompileError", "PythonStateSpec", "state_function", "compile_for"]
