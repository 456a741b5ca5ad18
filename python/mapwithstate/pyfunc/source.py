"""The source of a state function: its syntax tree, where it is, and the names it sees.

The compiler reads the function's own source (``inspect.getsource``), so every node keeps its
place in the file for error messages; names that are not parameters or locals resolve to the
function's globals and closure at compile time (module constants, imported modules).
"""

import ast
import builtins
import inspect
import textwrap
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Dict, Optional, Set

from mapwithstate.pyfunc.errors import CompileError

__all__ = ["FunctionSource", "NOT_FOUND"]

#: What :meth:`FunctionSource.lookup` gives for a name the function cannot see.
NOT_FOUND = object()


@dataclass
class FunctionSource:
    """A function's definition node, its file and line offset, and its global names."""

    function: Callable[..., Any]
    tree: ast.FunctionDef
    file: str
    first_line: int
    scope: Dict[str, Any]

    @cached_property
    def parents(self) -> Dict[int, ast.AST]:
        """Each node's parent in the function's tree, by the node's id (made once: the
        aliasing and scoping checks ask it for every change they check)."""
        return {
            id(child): parent
            for parent in ast.walk(self.tree)
            for child in ast.iter_child_nodes(parent)
        }

    @cached_property
    def local_names(self) -> Set[str]:
        """The function's parameters and the names it assigns anywhere."""
        names = {a.arg for a in self.tree.args.args}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
        return names

    @cached_property
    def collection_variables(self) -> Dict[str, Any]:
        """The locals holding a ``Counter``, ``defaultdict`` or ``deque``, by name, with
        their :class:`~mapwithstate.pyfunc.collection_variables.Kind` (made once: the
        compiler asks it at every call, subscript and method)."""
        from mapwithstate.pyfunc.collection_variables import variables

        return variables(self)

    @staticmethod
    def of(function: Callable[..., Any]) -> "FunctionSource":
        """Parses ``function``; a function without source (a lambda in a REPL, a builtin) or
        that is not a plain ``def`` is refused."""
        name = getattr(function, "__name__", repr(function))
        file = getattr(getattr(function, "__code__", None), "co_filename", "<unknown>")
        try:
            lines, first_line = inspect.getsourcelines(function)
        except (OSError, TypeError) as e:
            raise CompileError(
                file,
                0,
                0,
                f"state function {name} has no source",
                f"define it with def in a file or notebook cell ({e})",
            ) from None
        module = ast.parse(textwrap.dedent("".join(lines)))
        tree = module.body[0] if module.body else None
        if not isinstance(tree, ast.FunctionDef):
            raise CompileError(
                file,
                first_line,
                0,
                f"{name} is not a def",
                "decorate a plain def function (not async, not a lambda)",
            )
        ast.increment_lineno(tree, first_line - 1)
        scope = dict(vars(builtins))
        scope.update(getattr(function, "__globals__", {}))
        closure = getattr(function, "__closure__", None) or ()
        for var, cell in zip(function.__code__.co_freevars, closure, strict=False):
            try:
                scope[var] = cell.cell_contents
            except ValueError:
                pass
        from mapwithstate.pyfunc.map_and_filter import rewritten

        bound = {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        bound |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
        tree = rewritten(tree, scope, bound)
        return FunctionSource(function, tree, file, first_line, scope)

    @property
    def name(self) -> str:
        return self.tree.name

    def lookup(self, name: str) -> Any:
        """The object a free name refers to when compiling, or :data:`NOT_FOUND`."""
        return self.scope.get(name, NOT_FOUND)

    def error(self, node: Optional[ast.AST], construct: str, hint: str) -> CompileError:
        """A :class:`CompileError` at ``node``."""
        line = getattr(node, "lineno", self.first_line)
        col = getattr(node, "col_offset", 0)
        return CompileError(self.file, line, col, construct, hint)

    def where(self, node: ast.AST) -> str:
        """``function <name>, <file>:<line>`` for a runtime error's message."""
        return f"state function {self.name}, {self.file}:{getattr(node, 'lineno', 0)}"
