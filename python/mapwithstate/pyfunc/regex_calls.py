"""Python's ``re`` module in a state function: ``re.match/search/fullmatch/findall/split/sub``,
``re.escape`` and ``re.compile`` of constant patterns, a module-level compiled pattern's
methods, and the match object (``m.group(...)``, ``m.groups()``, ``m[1]``, ``m.start()``,
``m.end()``, ``m.span()``, ``m.groupdict()``, its truth and ``is None``).

A pattern must be known when compiling (a literal, a module constant, a module-level
``re.compile(...)``): :mod:`~mapwithstate.pyfunc.regex_syntax` translates it to a Java pattern
with Python's meaning, or refuses it, and the plugin's ``__mws_python_re_*`` functions
(``io.mapwithstate.pyfunc.PythonRegex``) do what sre does around the engine. A match is a
struct Column (its groups and their code point offsets), null where nothing matched; its
Python type (``re.Match``) carries the pattern's group count and names, which ``group`` and
``groups`` are resolved against when compiling.
"""

import ast
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators, tuples
from mapwithstate.pyfunc.pytypes import INT, STR, PyType, dict_of, list_of, tuple_field, tuple_of
from mapwithstate.pyfunc.regex_syntax import RegexRefused, Translated, translate
from mapwithstate.pyfunc.values import Value, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["is_re_function", "call", "pattern_method", "match_method", "subscript"]

#: The module's functions, with their parameters (Python's names, in order).
_FUNCTIONS: Dict[str, Tuple[str, ...]] = {
    "match": ("pattern", "string", "flags"),
    "search": ("pattern", "string", "flags"),
    "fullmatch": ("pattern", "string", "flags"),
    "findall": ("pattern", "string", "flags"),
    "split": ("pattern", "string", "maxsplit", "flags"),
    "sub": ("pattern", "repl", "string", "count", "flags"),
    "escape": ("pattern",),
    "compile": ("pattern", "flags"),
}

#: A compiled pattern's methods: the module's, less the pattern and the flags.
_METHODS: Dict[str, Tuple[str, ...]] = {
    name: tuple(p for p in params if p not in ("pattern", "flags"))
    for name, params in _FUNCTIONS.items()
    if name not in ("escape", "compile")
}

_WAY_OUT = (
    "re.match, search, fullmatch, findall, split, sub, escape and compile of a constant "
    "pattern, and a module-level re.compile(...)'s methods"
)


def is_re_function(target: Any) -> bool:
    return any(target is getattr(re, name) for name in _FUNCTIONS)


def call(it: "Interpreter", node: ast.Call, target: Any) -> Any:
    """``re.<function>(...)``."""
    name: str = target.__name__
    bound = _bind(it, node, f"re.{name}", _FUNCTIONS[name])
    if name == "escape":
        text = it.value(bound["pattern"])
        if not (text.is_const and isinstance(text.const, str)):
            raise it.ctx.refuse(
                node, "re.escape() of a value known only at run time", "escape a constant"
            )
        return literal(re.escape(text.const))
    flags = _flags(it, bound.get("flags"))
    pattern = _pattern(it, bound["pattern"], flags)
    if name == "compile":
        return pattern.compiled
    return _apply(it, node, name, pattern, bound)


def pattern_method(
    it: "Interpreter", node: ast.Call, compiled: "re.Pattern[str]", name: str
) -> Value:
    """``PATTERN.<name>(...)`` of a pattern compiled when the module loaded."""
    if name not in _METHODS:
        raise it.ctx.refuse(node, f"re.Pattern.{name}()", _WAY_OUT)
    bound = _bind(it, node, name, _METHODS[name])
    return _apply(it, node, name, _translated(it, node, compiled.pattern, compiled.flags), bound)


def _bind(
    it: "Interpreter", node: ast.Call, name: str, params: Tuple[str, ...]
) -> Dict[str, ast.expr]:
    """The call's arguments by parameter name, as Python binds them."""
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        raise it.ctx.refuse(node, "*args or **kwargs in a call", "pass arguments one by one")
    if len(node.args) > len(params):
        raise it.ctx.refuse(
            node,
            f"{name}() with {len(node.args)} arguments",
            f"{name}() takes {', '.join(params)} (pos and endpos are not supported)",
        )
    bound = dict(zip(params, node.args, strict=False))
    for keyword in node.keywords:
        if keyword.arg not in params or keyword.arg in bound:
            raise it.ctx.refuse(
                node, f"{name}() with {keyword.arg}=", f"{name}() takes {', '.join(params)}"
            )
        bound[str(keyword.arg)] = keyword.value
    required = [p for p in params if p not in ("flags", "maxsplit", "count")]
    missing = [p for p in required if p not in bound]
    if missing:
        raise it.ctx.refuse(
            node, f"{name}() without {', '.join(missing)}", f"{name}() takes {', '.join(params)}"
        )
    return bound


def _flags(it: "Interpreter", node: Optional[ast.expr]) -> int:
    if node is None:
        return 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(it, node.left) | _flags(it, node.right)  # re.I | re.M
    value = it.expression(node)
    if isinstance(value, Value) and value.is_const and isinstance(value.const, int):
        return int(value.const)
    raise it.ctx.refuse(
        node, "re flags known only at run time", "use re.IGNORECASE, re.I, ... constants"
    )


def _pattern(it: "Interpreter", node: ast.expr, flags: int) -> Translated:
    value = it.expression(node)
    if isinstance(value, re.Pattern):
        if flags:
            raise it.ctx.refuse(
                node,
                "flags with a compiled pattern",
                "Python raises ValueError: give the flags to re.compile",
            )
        return _translated(it, node, value.pattern, value.flags)
    if isinstance(value, Value) and value.is_const and isinstance(value.const, str):
        return _translated(it, node, value.const, flags)
    raise it.ctx.refuse(
        node,
        "a regular expression pattern known only at run time",
        "write the pattern as a literal, a module constant or a module-level re.compile(...)",
    )


def _translated(it: "Interpreter", node: ast.AST, pattern: Any, flags: int) -> Translated:
    if not isinstance(pattern, str):
        raise it.ctx.refuse(node, f"a {type(pattern).__name__} pattern", "use a str pattern")
    try:
        return translate(pattern, flags)
    except re.error as e:
        raise it.ctx.refuse(
            node, f"the pattern {pattern!r}: re.error: {e}", "fix the pattern"
        ) from None
    except RegexRefused as e:
        raise it.ctx.refuse(
            node,
            f"{e.construct} in the pattern {pattern!r}",
            e.way_out
            or "a state function's patterns may use literals, ., classes, \\d \\w \\s "
            "\\b, anchors, groups, backreferences, alternation, greedy and lazy repeats and "
            "lookarounds",
        ) from None


def _string(it: "Interpreter", node: ast.expr) -> Column:
    """The searched string: a str (``None`` fails the query with Python's TypeError)."""
    value = it.value(node)
    if value.type.kind not in ("str", "none"):
        raise it.ctx.refuse(
            node,
            f"a regular expression applied to a {value.type}",
            "Python raises TypeError: expected string or bytes-like object",
        )
    message = "expected string or bytes-like object, got 'NoneType'"
    return operators.none_check(it.ctx, node, value, message).column


def _count(it: "Interpreter", node: Optional[ast.expr], what: str) -> Column:
    if node is None:
        return F.lit(0).cast("bigint")
    from mapwithstate.pyfunc.arguments import int_argument

    return int_argument(it, node, it.value(node), what)


def match_type(pattern: Translated) -> PyType:
    """A match of ``pattern``: its group count and its named groups' numbers."""
    return PyType("match", (pattern.groups, pattern.names))


def _apply(
    it: "Interpreter", node: ast.Call, name: str, pattern: Translated, bound: Dict[str, ast.expr]
) -> Value:
    java = F.lit(pattern.java)
    if name in ("match", "search", "fullmatch"):
        s = _string(it, bound["string"])
        column = F.call_function(f"__mws_python_re_{name}", java, s)
        return Value(column, match_type(pattern), True)
    if name == "findall":
        found = F.call_function("__mws_python_re_findall", java, _string(it, bound["string"]))
        if pattern.groups <= 1:
            return Value(F.transform(found, lambda groups: groups[0]), list_of(STR), False)
        fields = [tuple_field(i) for i in range(pattern.groups)]
        column = F.transform(
            found, lambda groups: F.struct(*[groups[i].alias(f) for i, f in enumerate(fields)])
        )
        return Value(column, list_of(tuple_of((STR,) * pattern.groups)), False)
    if name == "split":
        s = _string(it, bound["string"])
        maxsplit = _count(it, bound.get("maxsplit"), "re.split()'s maxsplit")
        column = F.call_function("__mws_python_re_split", java, s, maxsplit)
        return Value(column, list_of(STR), False)
    assert name == "sub"
    template = _template(it, bound["repl"], pattern)
    s = _string(it, bound["string"])
    count = _count(it, bound.get("count"), "re.sub()'s count")
    column = F.call_function("__mws_python_re_sub", java, s, F.array(*map(F.lit, template)), count)
    return Value(column, STR, False)


def _template(it: "Interpreter", node: ast.expr, pattern: Translated) -> List[str]:
    """``re.sub``'s replacement, parsed as Python parses it: literal texts alternating with
    group numbers (as text), which the plugin expands per match."""
    value = it.expression(node) if not isinstance(node, ast.Lambda) else None
    if not (isinstance(value, Value) and value.is_const and isinstance(value.const, str)):
        raise it.ctx.refuse(
            node,
            "a replacement that is a function or known only at run time",
            "give re.sub a constant replacement (\\1, \\g<name>, \\g<0> refer to groups)",
        )
    from mapwithstate.pyfunc.regex_syntax import PARSER

    try:
        parsed = PARSER.parse_template(value.const, pattern.compiled)
    except re.error as e:
        raise it.ctx.refuse(
            node, f"the replacement {value.const!r}: re.error: {e}", "fix it"
        ) from None
    if isinstance(parsed, tuple):  # CPython 3.11: (group slots, literals with None slots)
        groups, literals = parsed
        slots = dict(groups)
        template = [""]
        for index, piece in enumerate(literals):
            if index in slots:
                template += [str(slots[index]), ""]
            else:
                template[-1] += piece or ""
        return template
    return [str(x) for x in parsed]  # CPython 3.12: literals alternating with group numbers


# ------------------------------------------------------------------ the match object


def _group_index(it: "Interpreter", node: ast.AST, match: Value, which: Value) -> int:
    groups, names = match.type.args
    if which.is_const and isinstance(which.const, int) and not isinstance(which.const, bool):
        if 0 <= which.const <= groups:
            return int(which.const)
    elif which.is_const and isinstance(which.const, str) and which.const in dict(names):
        return int(dict(names)[which.const])
    raise it.ctx.refuse(
        node,
        f"group {which.const if which.is_const else 'known only at run time'}",
        f"name a group of the pattern by a constant: 0 to {groups}"
        + (f" or {', '.join(repr(n) for n, _ in names)}" if names else ""),
    )


def _group(match: Value, index: int) -> Value:
    return Value(match.column.getField("g")[index], STR, index != 0)


def _offset(match: Value, index: int, end: bool) -> Value:
    return Value(match.column.getField("p")[2 * index + int(end)], INT, False)


def match_method(it: "Interpreter", node: ast.Call, match: Value, name: str) -> Value:
    """``m.<name>(...)`` of a match known not to be ``None``."""
    args = [it.value(a) for a in node.args]
    kwargs = {k.arg: it.value(k.value) for k in node.keywords if k.arg is not None}
    groups = match.type.args[0]
    if name == "group" and not kwargs:
        indices = [_group_index(it, node, match, a) for a in args] or [0]
        found = [_group(match, i) for i in indices]
        return found[0] if len(found) == 1 else tuples.make(found)
    if (
        name in ("groups", "groupdict")
        and len(args) + len(kwargs) <= 1
        and set(kwargs) <= {"default"}
    ):
        default = (args or list(kwargs.values()) or [literal(None)])[0]
        if default.type.kind not in ("str", "none"):
            raise it.ctx.refuse(
                node, f"{name}() with a {default.type} default", "give a str default or None"
            )

        def with_default(i: int) -> Value:
            g = _group(match, i)
            if default.type.kind == "none":
                return g
            return Value(F.coalesce(g.column, default.column), STR, default.nullable)

        if name == "groups":
            return tuples.make([with_default(i) for i in range(1, groups + 1)])
        names = match.type.args[1]
        pairs = [c for n, i in names for c in (F.lit(n), with_default(i).column)]
        column = F.create_map(*pairs) if pairs else F.create_map().cast("map<string,string>")
        return Value(column, dict_of(STR, STR), False)
    if name in ("start", "end", "span") and len(args) <= 1 and not kwargs:
        index = _group_index(it, node, match, args[0]) if args else 0
        if name == "span":
            return tuples.make([_offset(match, index, False), _offset(match, index, True)])
        return _offset(match, index, name == "end")
    raise it.ctx.refuse(
        node,
        f"re.Match.{name}() with these arguments",
        "a match has group(...), groups(default), groupdict(default), start(g), end(g), span(g)",
    )


def subscript(it: "Interpreter", node: ast.Subscript, match: Value) -> Value:
    """``m[g]``: ``m.group(g)``."""
    if isinstance(node.slice, ast.Slice):
        raise it.ctx.refuse(node, "a slice of a re.Match", "index it by a group: m[1], m['name']")
    match = operators.none_check(it.ctx, node, match, "'NoneType' object is not subscriptable")
    return _group(match, _group_index(it, node, match, it.value(node.slice)))
