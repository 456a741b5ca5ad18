"""``str`` methods a state function may call, with Python's semantics: ``split`` and ``strip``
by a separator or characters known only at run time (``None`` splitting and stripping
whitespace, an empty separator failing with ``ValueError``), ``startswith``/``endswith`` of a
tuple of prefixes (tried in order: a ``None`` among them fails with ``TypeError`` unless an
earlier one matched) and within ``start``/``end`` as CPython's ``tailmatch`` bounds them.
"""

import ast
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators, tuples
from mapwithstate.pyfunc.arguments import MethodHandler, arity
from mapwithstate.pyfunc.pytypes import BOOL, INT, STR, list_of
from mapwithstate.pyfunc.server_functions import STR_CASE_METHODS, STR_PREDICATES, str_method
from mapwithstate.pyfunc.str_search_and_pad import SEARCH_AND_PAD_METHODS
from mapwithstate.pyfunc.str_translation import TRANSLATION_METHODS
from mapwithstate.pyfunc.values import Value, let, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["STR_METHODS", "ACCEPTS_NONE", "WHITESPACE"]

#: The characters Python's str.strip() and str.split() treat as whitespace, as a Java regular
#: expression's character class.
WHITESPACE = (
    "[\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029"
    "\\u202f\\u205f\\u3000]"
)
#: The largest ``limit`` of Spark's ``split`` (an INT) less one: ``maxsplit`` beyond it splits
#: every separator, as no string holds that many.
_MAX_SPLITS = (1 << 31) - 2


def _escaped(text: str) -> str:
    """``text`` as a Java regular expression matching it literally, code point by code
    point."""
    return "".join(f"\\x{{{ord(c):x}}}" for c in text)


def _quoted(text: Column) -> Column:
    """A Java regular expression matching the string in ``text`` literally (Java's
    ``Pattern.quote``)."""
    inner = F.replace(text, F.lit("\\E"), F.lit("\\E\\\\E\\Q"))
    return F.concat(F.lit("\\Q"), inner, F.lit("\\E"))


def _ends(cls: str, side: str) -> str:
    """A regular expression matching runs of ``cls`` at the string's ends: both (``side``
    ``""``), the left (``"l"``) or the right (``"r"``)."""
    return {"": f"^{cls}+|{cls}+$", "l": f"^{cls}+", "r": f"{cls}+$"}[side]


def _strip(side: str) -> MethodHandler:
    def handler(
        it: "Interpreter",
        node: ast.Call,
        base: Value,
        args: List[Value],
        kwargs: Dict[str, Value],
    ) -> Value:
        name = side + "strip"
        arity(it, node, args, kwargs, 0, 1, name)
        chars = args[0] if args else literal(None)
        if chars.type.kind not in ("str", "none"):
            raise it.ctx.refuse(
                node,
                f"{name}() of a {chars.type}",
                f"Python raises TypeError: {name} arg must be None or str",
            )
        whitespace = F.regexp_replace(base.column, _ends(WHITESPACE, side), "")
        if chars.is_const:
            if chars.const is None:
                return Value(whitespace, STR, False)
            if not chars.const:
                return base
            pattern = _ends("[" + _escaped(chars.const) + "]", side)
            return Value(F.regexp_replace(base.column, pattern, ""), STR, False)
        trim = {"": F.trim, "l": F.ltrim, "r": F.rtrim}[side]
        trimmed = trim(base.column, chars.column)
        if chars.nullable:
            trimmed = F.when(chars.column.isNull(), whitespace).otherwise(trimmed)
        return Value(trimmed, STR, False)

    return handler


def _unicode(name: str) -> MethodHandler:
    """``s.<name>()``, a predicate (``isdigit``, ...) or a case method (``lower``, ...), with
    Python's Unicode tables: the JVM's are an older Unicode's, and its special casing and
    final sigma are not Python's."""
    result = BOOL if name in STR_PREDICATES else STR

    def handler(
        it: "Interpreter",
        node: ast.Call,
        base: Value,
        args: List[Value],
        kwargs: Dict[str, Value],
    ) -> Value:
        arity(it, node, args, kwargs, 0, 0, name)
        return Value(str_method(name, base.column), result, False)

    return handler


def _is_tuple(it: "Interpreter", node: ast.expr) -> bool:
    """Whether ``node`` is a tuple compiled as a list: a module constant that is one (a
    captured constant is an array, which does not tell a tuple from a list)."""
    if isinstance(node, ast.Tuple):
        return True
    if not isinstance(node, ast.Name):
        return False
    assigned = [
        statement.value
        for statement in ast.walk(it.ctx.source.tree)
        if isinstance(statement, ast.Assign)
        for target in statement.targets
        if isinstance(target, ast.Name) and target.id == node.id
    ]
    parameters = {a.arg for a in it.ctx.source.tree.args.args}
    if assigned or node.id in parameters:
        return node.id not in parameters and all(isinstance(v, ast.Tuple) for v in assigned)
    return isinstance(it.ctx.source.lookup(node.id), tuple)


def _affix(start: bool) -> MethodHandler:
    name = "startswith" if start else "endswith"

    def handler(
        it: "Interpreter",
        node: ast.Call,
        base: Value,
        args: List[Value],
        kwargs: Dict[str, Value],
    ) -> Value:
        arity(it, node, args, kwargs, 1, 3, name)
        affix, bounds = args[0], args[1:]
        for bound in bounds:
            if bound.type.kind not in ("int", "bool", "none"):
                raise it.ctx.refuse(
                    node,
                    f"{name}() with a bound of type {bound.type}",
                    "Python raises TypeError: slice indices must be integers or None",
                )
        matches = _matcher(base, bounds, start)
        if affix.type.kind == "str":
            return Value(matches(affix.column), BOOL, False)
        if affix.type.kind == "tuple":
            affix = operators.none_check(
                it.ctx, node, affix, f"{name} first arg must be str or a tuple of str, not None"
            )
            return _any_affix(it, node, name, tuples.as_list(it.ctx, node, affix, name), matches)
        if affix.type.kind == "list" and _is_tuple(it, node.args[0]):
            # A module constant that is a tuple (compiled as a list).
            return _any_affix(it, node, name, affix, matches)
        kind = "list" if affix.type.kind == "list" else str(affix.type)
        raise it.ctx.refuse(
            node,
            f"{name}() of a {kind}",
            f"Python raises TypeError: {name} first arg must be str or a tuple of str, not {kind}",
        )

    return handler


def _matcher(base: Value, bounds: List[Value], start: bool) -> Callable[[Column], Column]:
    """Whether ``base`` (within ``bounds``: start, end) starts (or ends) with an affix, as
    CPython's ``tailmatch``: the bounds adjusted as a slice's, except that a start past the
    end is kept (so ``"abc".startswith("", 5)`` is false), and an affix longer than the
    bounded part never matches."""
    if not bounds or all(b.type.kind == "none" for b in bounds):
        return (
            (lambda affix: F.startswith(base.column, affix))
            if start
            else (lambda affix: F.endswith(base.column, affix))
        )
    length = F.length(base.column).cast("bigint")

    def adjusted(bound: Optional[Value], default: Column, clamp_high: bool) -> Column:
        if bound is None or bound.type.kind == "none":
            return default
        value = bound.column.cast("bigint")
        result = F.when(value < 0, F.greatest(value + length, F.lit(0).cast("bigint")))
        result = result.otherwise(F.least(value, length) if clamp_high else value)
        return F.coalesce(result, default) if bound.nullable else result

    begin = adjusted(bounds[0], F.lit(0).cast("bigint"), False)
    end = adjusted(bounds[1] if len(bounds) > 1 else None, length, True)

    def matches(affix: Column) -> Column:
        size = F.length(affix).cast("bigint")
        last = end - size
        at = begin if start else last
        # Where the affix fits, its place is within the string: 1 to len + 1.
        piece = F.substring(base.column, (at + 1).cast("int"), size.cast("int"))
        return F.when(last >= begin, piece == affix).otherwise(F.lit(False))

    return matches


def _any_affix(
    it: "Interpreter",
    node: ast.Call,
    name: str,
    affixes: Value,
    matches: Callable[[Column], Column],
) -> Value:
    """``s.startswith((a, b, ...))``: the affixes tried in order; the first that is ``None``
    before any matched fails with ``TypeError``, as Python's loop does."""
    affixes = operators.none_check(
        it.ctx, node, affixes, f"{name} first arg must be str or a tuple of str, not NoneType"
    )
    element = affixes.type.args[0]
    if element.kind not in ("str", "none"):
        raise it.ctx.refuse(
            node,
            f"{name}() of a tuple of {element}",
            f"Python raises TypeError: tuple for {name} must only contain str",
        )
    array = affixes.column
    if element.kind == "none":
        it.ctx.check(
            node,
            F.size(array) > 0,
            "TypeError",
            f"tuple for {name} must only contain str, not NoneType",
        )
        return Value(F.lit(False), BOOL, False)
    hits = F.filter(array, lambda affix: affix.isNull() | matches(affix))
    found = F.size(hits) > 0
    first = F.get(hits, 0)
    it.ctx.check(
        node,
        found & first.isNull(),
        "TypeError",
        f"tuple for {name} must only contain str, not NoneType",
    )
    return Value(found & first.isNotNull(), BOOL, False)


def _replace(
    it: "Interpreter",
    node: ast.Call,
    base: Value,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Value:
    arity(it, node, args, kwargs, 2, 2, "replace")
    old, new = args
    # Python inserts the replacement between every character for an empty pattern.
    if old.is_const and old.const == "":
        raise it.ctx.refuse(node, "replace('' , ...)", "replace a non-empty string")
    return Value(F.replace(base.column, old.column, new.column), STR, False)


def _whitespace_split(text: Column, limit: Optional[Column]) -> Column:
    """``text.split()`` (``maxsplit`` giving ``limit``, Spark's: at most that many parts):
    leading whitespace skipped, runs of whitespace separating, no empty parts; the last part,
    once ``limit`` is reached, keeps its trailing whitespace, as Python's."""
    if limit is None:
        parts = F.split(F.regexp_replace(text, _ends(WHITESPACE, ""), ""), f"{WHITESPACE}+")
    else:
        parts = F.split(F.regexp_replace(text, _ends(WHITESPACE, "l"), ""), f"{WHITESPACE}+", limit)
    return F.filter(parts, lambda p: F.length(p) > 0)


def _split(
    it: "Interpreter",
    node: ast.Call,
    base: Value,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Value:
    arity(it, node, args, kwargs, 0, 2, "split", ("sep", "maxsplit"))
    given = dict(zip(("sep", "maxsplit"), args, strict=False))
    for keyword in kwargs:
        if keyword in given:
            raise it.ctx.refuse(
                node,
                f"split() with {keyword} given twice",
                f"Python raises TypeError: argument for split() given by name ('{keyword}') "
                "and position",
            )
    given.update(kwargs)
    sep = given.get("sep", literal(None))
    if sep.type.kind not in ("str", "none"):
        raise it.ctx.refuse(
            node,
            f"split() by a {sep.type}",
            "Python raises TypeError: must be str or None",
        )
    limit: Optional[Column] = None
    maxsplit = given.get("maxsplit")
    if maxsplit is not None and not (maxsplit.is_const and maxsplit.const == -1):
        if maxsplit.type.kind not in ("int", "bool", "none"):
            raise it.ctx.refuse(
                node,
                f"split(maxsplit=<{maxsplit.type}>)",
                f"Python raises TypeError: '{maxsplit.type}' object cannot be interpreted "
                "as an integer",
            )
        maxsplit = operators.none_check(
            it.ctx, node, maxsplit, "'NoneType' object cannot be interpreted as an integer"
        )
        count = maxsplit.column.cast("bigint")
        limit = (
            F.when(count < 0, F.lit(-1))
            .otherwise(F.least(count, F.lit(_MAX_SPLITS)) + F.lit(1))
            .cast("int")
        )
    whitespace = _whitespace_split(base.column, limit)
    if sep.is_const:
        if sep.const is None:
            return Value(whitespace, list_of(STR), False)
        if sep.const == "":
            raise it.ctx.refuse(node, "split('')", "Python raises ValueError: empty separator")
        pattern = _escaped(sep.const)
        return Value(
            F.split(base.column, pattern, -1 if limit is None else limit), list_of(STR), False
        )
    it.ctx.check(node, sep.column == F.lit(""), "ValueError", "empty separator")
    parts = F.split(base.column, _quoted(sep.column), F.lit(-1) if limit is None else limit)
    if sep.nullable:
        parts = F.when(sep.column.isNull(), whitespace).otherwise(parts)
    return Value(parts, list_of(STR), False)


def _find(
    it: "Interpreter",
    node: ast.Call,
    base: Value,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Value:
    arity(it, node, args, kwargs, 1, 1, "find")
    if args[0].type.kind != "str":
        raise it.ctx.refuse(node, f"find() of a {args[0].type}", "find a str")
    # instr counts characters from 1 and gives 0 when absent; Python counts from 0, -1.
    return Value(F.instr(base.column, args[0].column).cast("bigint") - F.lit(1), INT, False)


def _join(
    it: "Interpreter",
    node: ast.Call,
    base: Value,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Value:
    arity(it, node, args, kwargs, 1, 1, "join")
    items = operators.none_check(it.ctx, node, args[0], "can only join an iterable")
    if items.type.kind in ("tuple", "dict"):
        from mapwithstate.pyfunc.iteration import iterated

        items = iterated(it, node, items, "join()")
    if items.type.kind != "list" or items.type.args[0].kind not in ("str", "none"):
        raise it.ctx.refuse(node, f"join of a {items.type}", "join a list of str")
    it.ctx.check(
        node,
        F.exists(items.column, lambda e: e.isNull()),
        "TypeError",
        "sequence item: expected str instance, NoneType found",
    )
    return Value(
        # pyspark's stub types the delimiter as str, but Spark Connect's array_join passes it
        # through lit(), which keeps a Column as it is.
        F.array_join(items.column, base.column)  # type: ignore[arg-type]
        if not base.is_const
        else F.array_join(items.column, base.const),
        STR,
        False,
    )


def _format(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    from mapwithstate.pyfunc.format_specs import str_format

    return str_format(it, node, base, args, kwargs)


#: Python's line boundaries (``str.splitlines``): ``\r\n`` first, then each one alone.
_LINE_BOUNDARY = "\r\n|[\n\r\u000b\u000c\u001c\u001d\u001e\u0085\u2028\u2029]"


def _rsplit(
    it: "Interpreter",
    node: ast.Call,
    base: Value,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Value:
    """``text.rsplit(sep, maxsplit)``: split's parts where nothing limits them; else the
    parts of the reversed text split by the reversed separator (matches found from the
    right, as Python's scan finds them), each reversed back, in reverse order."""
    arity(it, node, args, kwargs, 0, 2, "rsplit", ("sep", "maxsplit"))
    given = dict(zip(("sep", "maxsplit"), args, strict=False))
    if set(given) & set(kwargs):
        return _split(it, node, base, args, kwargs)  # its refusal: an argument given twice
    given.update(kwargs)
    maxsplit = given.get("maxsplit")
    if maxsplit is None or (maxsplit.is_const and maxsplit.const == -1):
        return _split(it, node, base, args, kwargs)
    sep = given.get("sep", literal(None))
    if sep.type.kind == "str":
        sep = (
            literal(sep.const[::-1])
            if sep.is_const
            else Value(F.reverse(sep.column), sep.type, sep.nullable)
        )
    reversed_text = Value(F.reverse(base.column), base.type, base.nullable)
    parts = _split(it, node, reversed_text, [], {"sep": sep, "maxsplit": maxsplit})
    column = F.reverse(F.transform(parts.column, lambda p: F.reverse(p)))
    return Value(column, parts.type, parts.nullable)


def _splitlines(
    it: "Interpreter",
    node: ast.Call,
    base: Value,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Value:
    """``s.splitlines()``: the lines between Python's line boundaries, without a last empty
    one (``"a\n".splitlines()`` is ``["a"]``, ``"".splitlines()`` is ``[]``)."""
    arity(it, node, args, kwargs, 0, 1, "splitlines", ("keepends",))
    keepends = args[0] if args else kwargs.get("keepends")
    if keepends is not None and not (keepends.is_const and not keepends.const):
        raise it.ctx.refuse(
            node, "splitlines(keepends=True)", "split on the boundaries with re-joining, or F.split"
        )

    def lines(parts: Column) -> Column:
        last_empty = F.element_at(parts, -1) == F.lit("")
        return F.when(last_empty, F.slice(parts, 1, F.size(parts) - 1)).otherwise(parts)

    return Value(let([F.split(base.column, _LINE_BOUNDARY, -1)], lines), list_of(STR), False)


STR_METHODS: Dict[str, MethodHandler] = {
    **{name: _unicode(name) for name in STR_PREDICATES + STR_CASE_METHODS},
    "strip": _strip(""),
    "lstrip": _strip("l"),
    "rstrip": _strip("r"),
    "startswith": _affix(True),
    "endswith": _affix(False),
    "replace": _replace,
    "split": _split,
    "rsplit": _rsplit,
    "splitlines": _splitlines,
    "find": _find,
    "join": _join,
    "format": _format,
    **SEARCH_AND_PAD_METHODS,
    **TRANSLATION_METHODS,
}
#: The methods whose str arguments may be ``None`` (whitespace; ``format``: any value);
#: others fail with TypeError.
ACCEPTS_NONE = frozenset({"strip", "lstrip", "rstrip", "split", "rsplit", "format"})
