"""``CompileError``: why a Python state function cannot be compiled, and where.

Raised at compile time (in ``map_with_state`` / ``map_groups_with_state``, or ``explain``) for
any construct the compiler does not translate exactly: it names the source file, line and
column, the construct, and the way out. There is no fallback to a Python worker.
"""
from typing import Optional

__all__ = ["CompileError"]


class CompileError(Exception):
    """A Python state function uses something that cannot be compiled to Spark Columns.

    >>> raise CompileError("f.py", 3, 4, "while loop", "use a comprehension")  # doctest: +SKIP
    mapwithstate.pyfunc.errors.CompileError: f.py:3:4: while loop is not supported: use ...
    """

    def __init__(self, file: str, line: int, col: int, construct: str,
                 hint: Optional[str] = None) -> None:
        self.file = file
        self.line = line
        self.col = col
        self.construct = construct
        self.hint = hint
        message = f"{file}:{line}:{col}: {construct}"
        if hint:
            message += f": {hint}"
        super().__init__(message)
