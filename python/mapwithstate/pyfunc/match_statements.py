"""The ``match`` statement, compiled as the ``if``/``elif`` chain it means.

The subject is evaluated once (held under a name no Python variable has for the time of the
statement); each ``case`` becomes a test of it, in order: the first case whose pattern matches
and whose guard holds runs, no other. Supported patterns: literals (``==``, and ``is`` for
``None``/``True``/``False``, as Python compares them), dotted constants (``case
Kinds.LOGIN``), ``|`` alternatives, ``_``, captures (``case x``, ``case 1 | 2 as x``), and
sequences of them over a tuple or a list (``case (a, 0)``, ``case [x, y]``: a length that
differs does not match). A capture binds only in its case (a name assigned in some cases only
follows the definite-assignment rules of ``if``/``elif``). Class, mapping and star patterns
are refused, with ``if``/``elif`` as the way out.
"""

import ast
import copy
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["match"]

#: The way out for a pattern the compiler refuses.
_WAY_OUT = (
    "write the cases as if/elif tests (isinstance(...), dict.get(...), len(...)); match "
    "takes literals, dotted constants, |, _, captures and sequences of them"
)


def match(it: "Interpreter", node: ast.Match) -> None:
    """Runs ``match subject: case ...`` as its ``if``/``elif`` chain."""
    subject_name = f"__mws_match_{node.lineno}_{node.col_offset}"
    subject = it.value(node.subject)
    env = it.path.env
    env[subject_name] = it.ctx.share(subject)
    chain: Optional[ast.If] = None
    last: Optional[ast.If] = None
    for case in node.cases:
        captures: Dict[str, ast.expr] = {}
        load = ast.copy_location(ast.Name(id=subject_name, ctx=ast.Load()), case.pattern)
        test = _test(it, case.pattern, load, subject, captures)
        body: List[ast.stmt] = [
            ast.copy_location(
                ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value),
                case.pattern,
            )
            for name, value in captures.items()
        ]
        if case.guard is not None:
            # A copy: the function's own tree stays as parsed (it is compiled again per input).
            guard = _Substituted(captures).visit(copy.deepcopy(case.guard))
            test = guard if test is None else ast.BoolOp(op=ast.And(), values=[test, guard])
        body += case.body
        if test is None:
            test = ast.Constant(value=True)
        branch = ast.copy_location(ast.If(test=test, body=body, orelse=[]), case.pattern)
        ast.fix_missing_locations(branch)
        if last is None:
            chain = branch
        else:
            last.orelse = [branch]
        last = branch
    try:
        if chain is not None:
            it.if_(chain)
    finally:
        it.path.env.pop(subject_name, None)


def _test(
    it: "Interpreter",
    pattern: ast.pattern,
    subject: ast.expr,
    value: Optional[Value],
    captures: Dict[str, ast.expr],
) -> Optional[ast.expr]:
    """The test of ``pattern`` against ``subject`` (an expression; ``value``: its value where
    known, for its type), None where it always matches; its captures are added to
    ``captures`` (name: the expression bound)."""

    def located(expr: ast.expr) -> ast.expr:
        return ast.copy_location(expr, pattern)

    if isinstance(pattern, ast.MatchAs):
        test = (
            None
            if pattern.pattern is None
            else _test(it, pattern.pattern, subject, value, captures)
        )
        if pattern.name is not None:
            captures[pattern.name] = subject
        return test
    if isinstance(pattern, ast.MatchValue):
        return located(ast.Compare(left=subject, ops=[ast.Eq()], comparators=[pattern.value]))
    if isinstance(pattern, ast.MatchSingleton):
        if pattern.value is None:
            return located(
                ast.Compare(left=subject, ops=[ast.Is()], comparators=[ast.Constant(None)])
            )
        if value is not None and value.type.kind == "bool":
            # `is True`: a bool subject equal to it (None is not True).
            return located(
                ast.Compare(left=subject, ops=[ast.Eq()], comparators=[ast.Constant(pattern.value)])
            )
        # No value of another type is True or False itself (1 is not True).
        return located(ast.Constant(False))
    if isinstance(pattern, ast.MatchOr):
        alternatives: List[ast.expr] = []
        for alternative in pattern.patterns:
            inner: Dict[str, ast.expr] = {}
            test = _test(it, alternative, subject, value, inner)
            if inner:
                raise it.ctx.refuse(
                    alternative,
                    "a capture inside a | pattern",
                    "capture the whole alternative: case 1 | 2 as x",
                )
            if test is None:
                return None
            alternatives.append(test)
        return located(ast.BoolOp(op=ast.Or(), values=alternatives))
    if isinstance(pattern, ast.MatchSequence):
        return _sequence(it, pattern, subject, value, captures)
    construct = {
        ast.MatchClass: "class pattern",
        ast.MatchMapping: "mapping pattern",
        ast.MatchStar: "star pattern",
    }.get(type(pattern), f"{type(pattern).__name__} pattern")
    raise it.ctx.refuse(pattern, f"match with a {construct}", _WAY_OUT)


def _sequence(
    it: "Interpreter",
    pattern: ast.MatchSequence,
    subject: ast.expr,
    value: Optional[Value],
    captures: Dict[str, ast.expr],
) -> ast.expr:
    """A sequence pattern: the subject is a tuple or list of as many items, each matching."""
    if any(isinstance(p, ast.MatchStar) for p in pattern.patterns):
        raise it.ctx.refuse(pattern, "match with a star pattern", _WAY_OUT)
    kind = value.type.kind if value is not None else None
    if kind not in ("tuple", "list"):
        raise it.ctx.refuse(
            pattern,
            f"a sequence pattern matched against a {value.type if value else 'value'}",
            "match sequences against a tuple or a list; " + _WAY_OUT,
        )
    assert value is not None
    count = len(pattern.patterns)

    def located(expr: ast.expr) -> ast.expr:
        return ast.copy_location(expr, pattern)

    tests: List[ast.expr] = []
    if value.nullable:
        tests.append(
            located(ast.Compare(left=subject, ops=[ast.IsNot()], comparators=[ast.Constant(None)]))
        )
    items: List[Tuple[ast.pattern, Optional[Value]]]
    if kind == "tuple":
        if len(value.type.args) != count:
            return located(ast.Constant(False))
        from mapwithstate.pyfunc.tuples import elements

        parts = elements(value.non_null()) if value.nullable else elements(value)
        items = list(zip(pattern.patterns, parts, strict=True))
    else:
        length = ast.Call(func=ast.Name(id="len", ctx=ast.Load()), args=[subject], keywords=[])
        tests.append(
            located(ast.Compare(left=length, ops=[ast.Eq()], comparators=[ast.Constant(count)]))
        )
        element = Value(value.column, value.type.args[0], True)
        items = [(p, element) for p in pattern.patterns]
    for index, (item_pattern, item_value) in enumerate(items):
        item = located(ast.Subscript(value=subject, slice=ast.Constant(index), ctx=ast.Load()))
        test = _test(it, item_pattern, item, item_value, captures)
        if test is not None:
            tests.append(test)
    if not tests:
        return located(ast.Constant(True))
    return located(ast.BoolOp(op=ast.And(), values=tests)) if len(tests) > 1 else tests[0]


class _Substituted(ast.NodeTransformer):
    """A guard reading the case's captures: each capture read as the expression it binds
    (the names are bound only where the case matches)."""

    def __init__(self, captures: Dict[str, ast.expr]) -> None:
        self.captures = captures

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self.captures:
            return ast.copy_location(copy.deepcopy(self.captures[node.id]), node)
        return node
