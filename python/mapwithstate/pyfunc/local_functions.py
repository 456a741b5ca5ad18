"""Local functions: ``f = lambda x: ...`` and ``def f(x): return ...`` inside a state function.

A local function of one expression is kept as its syntax and inlined at each call: its
arguments are evaluated in order, its parameters bound to them for the time of the body, and
the body compiled where the call is. Its free names are read at the call, as Python's closures
read the enclosing function's variables when called. A body of more than one ``return``, a
parameter with a default, ``*args`` and recursion are refused (a compiled function has no call
stack); module-level functions stay refused, as any other Python function.
"""

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Union

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["LocalFunction", "of_lambda", "of_def"]

#: How deep local functions may call one another (deeper is taken for recursion).
_DEPTH = 16


@dataclass(frozen=True)
class LocalFunction:
    """A local function: its name (for errors), parameter names and body expression."""

    name: str
    parameters: List[str]
    body: ast.expr
    node: ast.AST

    def call(self, it: "Interpreter", node: ast.Call) -> Any:
        """The call ``node`` of this function, its body compiled with the parameters bound."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            raise it.ctx.refuse(node, "*args or **kwargs in a call", "pass arguments one by one")
        arguments: Dict[str, Any] = {}
        for name, arg in zip(self.parameters, node.args, strict=False):
            arguments[name] = it.value(arg)
        for keyword in node.keywords:
            assert keyword.arg is not None
            if keyword.arg not in self.parameters or keyword.arg in arguments:
                raise it.ctx.refuse(
                    keyword,
                    f"argument {keyword.arg!r} of {self.name}()",
                    f"Python raises TypeError: {self.name}() takes "
                    f"{', '.join(self.parameters) or 'no arguments'}",
                )
            arguments[keyword.arg] = it.value(keyword.value)
        if len(node.args) > len(self.parameters) or len(arguments) != len(self.parameters):
            raise it.ctx.refuse(
                node,
                f"call of {self.name}() with {len(node.args) + len(node.keywords)} arguments",
                f"Python raises TypeError: {self.name}() takes {len(self.parameters)}",
            )
        depth = it.local_depth
        if depth >= _DEPTH:
            raise it.ctx.refuse(
                node,
                f"recursive call of local function {self.name}()",
                "a compiled state function has no call stack: use a for loop",
            )
        env = it.path.env
        saved = {name: env[name] for name in self.parameters if name in env}
        it.local_depth = depth + 1
        try:
            env.update(arguments)
            return it.expression(self.body)
        finally:
            it.local_depth = depth
            for name in self.parameters:
                if name in saved:
                    it.path.env[name] = saved[name]
                else:
                    it.path.env.pop(name, None)


def _parameters(it: "Interpreter", node: Union[ast.Lambda, ast.FunctionDef]) -> List[str]:
    args = node.args
    if args.vararg or args.kwarg or args.posonlyargs or args.kwonlyargs or args.defaults:
        raise it.ctx.refuse(
            node,
            "a local function with *args, **kwargs, keyword-only, positional-only or "
            "default parameters",
            "give it plain parameters and pass every argument",
        )
    return [a.arg for a in args.args]


def of_lambda(it: "Interpreter", node: ast.Lambda, name: str = "<lambda>") -> LocalFunction:
    """``lambda x: body`` as a local function."""
    return LocalFunction(name, _parameters(it, node), node.body, node)


def of_def(it: "Interpreter", node: ast.FunctionDef) -> LocalFunction:
    """``def f(x): return body`` (a docstring allowed before it) as a local function."""
    body = list(node.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    if node.decorator_list:
        raise it.ctx.refuse(node, "a decorated local function", "define it without decorators")
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        raise it.ctx.refuse(
            node,
            f"local function {node.name}() of more than one return statement",
            "a local function is inlined where it is called: write its body as one "
            "return <expression> (a conditional expression for branches), or inline it",
        )
    return LocalFunction(node.name, _parameters(it, node), body[0].value, node)
