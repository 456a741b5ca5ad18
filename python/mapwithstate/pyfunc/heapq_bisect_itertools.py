"""``heapq.nlargest``/``nsmallest``, ``bisect`` over a sorted list and the ``itertools``
functions a state function reaches for over a list (``pairwise``, ``chain``, ``islice``),
compiled from the plain Python the library documents them as.

``heapq.nlargest(n, xs, key=k)`` is ``sorted(xs, key=k, reverse=True)[:n]`` and ``nsmallest``
the same ascending (the library's own words, and its result: both keep equal items in their
order, as a stable sort does), but nothing for ``n <= 0``, where a slice ``[:n]`` would drop
from the end. ``pairwise(xs)`` is ``zip(xs, xs[1:])``, ``chain(a, b)`` of lists ``a + b`` and
``islice(xs, start, stop, step)`` of a list ``xs[start:stop:step]`` for the arguments
``islice`` takes (``None`` or non-negative constants, a positive step). Of a ``str`` they are
characters where the slice or ``+`` would be a ``str``, so only lists are taken there;
``heapq``'s other functions keep a list in heap order, which depends on every push: refused.

``bisect_left(a, x)`` / ``bisect_right(a, x)`` (``bisect``) are a binary search, whose answer
on a list that is not sorted depends on the probes it makes. On a sorted list it is where the
search's test turns: the number of items ``e < x`` (left) or ``not x < e`` (right), compiled
as those counts with Python's comparisons (a ``None`` ``x`` raises TypeError where the list is
not empty, as the first probe does). Where the list is not sorted, or holds ``None`` or NaN,
and has two items or more, the query fails with NotImplementedError rather than guess the
probes. ``insort(a, x)`` (a statement) is ``a.insert(bisect_right(a, x), x)``, the in-place
change it is, under :mod:`~mapwithstate.pyfunc.in_place`'s rules. ``lo``, ``hi`` and ``key``
are refused.
"""

import ast
import bisect
import heapq
import itertools
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators, ordering
from mapwithstate.pyfunc.source import NOT_FOUND
from mapwithstate.pyfunc.synthesized import evaluated
from mapwithstate.pyfunc.values import Value

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["FUNCTIONS", "call", "insort"]


def _positional(
    it: "Interpreter", node: ast.Call, name: str, names: List[str]
) -> Dict[str, ast.expr]:
    """The call's arguments by parameter name (``names``, the first ones required)."""
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        raise it.ctx.refuse(node, "*args or **kwargs in a call", "pass arguments one by one")
    given = dict(zip(names, node.args, strict=False))
    for keyword in node.keywords:
        assert keyword.arg is not None
        if keyword.arg not in names or keyword.arg in given:
            raise it.ctx.refuse(
                node,
                f"{name}() with {keyword.arg}=",
                f"Python raises TypeError: {name}({', '.join(names)})",
            )
        given[keyword.arg] = keyword.value
    if len(node.args) > len(names):
        raise it.ctx.refuse(
            node, f"{name}() with {len(node.args)} arguments", f"{name}({', '.join(names)})"
        )
    return given


def _count(it: "Interpreter", node: ast.Call, name: str, argument: ast.expr) -> Value:
    count = it.value(argument)
    # None fails comparing with 0 (TypeError), as nlargest's own n >= len(xs) does.
    if count.type.kind not in ("int", "bool", "none"):
        raise it.ctx.refuse(node, f"{name}() of a {count.type}", f"{name}(n, xs) with n an int")
    return count


def _extremes(largest: bool) -> Callable[["Interpreter", ast.Call], Any]:
    name = "nlargest" if largest else "nsmallest"

    def extremes(it: "Interpreter", node: ast.Call) -> Any:
        given = _positional(it, node, name, ["n", "iterable", "key"])
        if "n" not in given or "iterable" not in given:
            raise it.ctx.refuse(node, f"{name}() without n and an iterable", f"{name}(n, xs)")
        count = _count(it, node, name, given["n"])
        ordered = ordering.sorted_by(it, node, name, given["iterable"], given.get("key"), largest)
        names = {"__mws_ordered": ordered, "__mws_n": count}
        return evaluated(it, node, "__mws_ordered[:max(__mws_n, 0)]", names)

    return extremes


def _a_list(it: "Interpreter", node: ast.Call, name: str, argument: ast.expr) -> Value:
    value = it.value(argument)
    if value.type.kind != "list":
        raise it.ctx.refuse(
            node,
            f"itertools.{name}() of a {value.type}",
            f"itertools.{name}() of lists (of a str, write list(s) first)",
        )
    return value


def _pairwise(it: "Interpreter", node: ast.Call) -> Any:
    given = _positional(it, node, "pairwise", ["iterable"])
    if "iterable" not in given:
        raise it.ctx.refuse(node, "pairwise() without an iterable", "pairwise(xs)")
    values = it.ctx.share(_a_list(it, node, "pairwise", given["iterable"]))
    return evaluated(it, node, "zip(__mws_xs, __mws_xs[1:])", {"__mws_xs": values})


def _chain(it: "Interpreter", node: ast.Call) -> Any:
    if node.keywords or not node.args or any(isinstance(a, ast.Starred) for a in node.args):
        raise it.ctx.refuse(node, "chain() of no lists, or with keywords", "chain(a, b[, ...])")
    names = {f"__mws_{i}": _a_list(it, node, "chain", a) for i, a in enumerate(node.args)}
    return evaluated(it, node, " + ".join(names), names)


def _islice(it: "Interpreter", node: ast.Call) -> Any:
    if node.keywords or not 2 <= len(node.args) <= 4:
        raise it.ctx.refuse(
            node,
            "islice() of these arguments",
            "islice(xs, stop) or islice(xs, start, stop[, step])",
        )
    bounds: List[Optional[int]] = []
    for argument in node.args[1:]:
        if not (
            isinstance(argument, ast.Constant)
            and (argument.value is None or type(argument.value) is int)
        ):
            raise it.ctx.refuse(
                argument,
                "islice() of a bound that is not a literal",
                "write the bounds as literals, or slice the list: xs[a:b]",
            )
        bounds.append(argument.value)
    start, stop, step = (None, bounds[0], None) if len(bounds) == 1 else (bounds + [None])[:3]
    if any(b is not None and b < 0 for b in (start, stop)) or (step is not None and step < 1):
        raise it.ctx.refuse(
            node,
            "islice() of a negative bound or a step below 1",
            "Python raises ValueError: its bounds are None or 0 <= x, its step positive",
        )
    values = _a_list(it, node, "islice", node.args[0])
    start_, stop_, step_ = ("" if b is None else str(b) for b in (start, stop, step))
    return evaluated(it, node, f"__mws_xs[{start_}:{stop_}:{step_}]", {"__mws_xs": values})


_NO_LEN = "object of type 'NoneType' has no len()"
#: The item types whose order Spark's comparisons give as Python's (NaN aside).
_SEARCHABLE = ("int", "float", "str", "datetime", "date")


def _bisect(right: bool) -> Callable[["Interpreter", ast.Call], Any]:
    name = "bisect_right" if right else "bisect_left"

    def search(it: "Interpreter", node: ast.Call) -> Any:
        given = _positional(it, node, name, ["a", "x", "lo", "hi", "key"])
        if set(given) != {"a", "x"}:
            raise it.ctx.refuse(
                node,
                f"{name}() with {', '.join(sorted(set(given) - {'a', 'x'})) or 'no list'}",
                f"{name}(a, x) over the whole list (slice it first: a[lo:hi])",
            )
        values = it.ctx.share(_a_list(it, node, name, given["a"]))
        item = values.type.args[0]
        if item.kind not in _SEARCHABLE + ("none",):
            raise it.ctx.refuse(
                node,
                f"{name}() of a {values.type}",
                f"{name}() of a list of {', '.join(_SEARCHABLE)}",
            )
        x = it.value(given["x"])
        if values.nullable:
            values = operators.none_check(it.ctx, node, values, _NO_LEN)
        column = values.column
        several = F.size(column) > 1
        unordered = F.exists(column, lambda e: e.isNull())
        if item.kind == "float":
            unordered = unordered | F.exists(column, lambda e: F.isnan(e))
        if item.kind != "none":
            pairs = F.arrays_zip(
                F.slice(column, 1, F.size(column) - 1), F.slice(column, 2, F.size(column))
            )
            unordered = unordered | F.exists(pairs, lambda p: p.getItem("0") > p.getItem("1"))
        it.ctx.check(
            node,
            several & unordered,
            "NotImplementedError",
            f"{name}() of a list that is not sorted or holds None or NaN: its answer depends "
            "on the binary search's probes; sort the list first",
        )
        test = "not __mws_x < __mws_e" if right else "__mws_e < __mws_x"
        return evaluated(
            it,
            node,
            f"sum(1 for __mws_e in __mws_a if {test})",
            {"__mws_a": values, "__mws_x": x},
        )

    return search


def _resolved(it: "Interpreter", node: ast.expr) -> Any:
    """What ``node`` names (a module's function, a captured global), or None."""
    if isinstance(node, ast.Name):
        if node.id in it.path.env:
            return it.path.env[node.id]
        found = it.ctx.source.lookup(node.id)
        return None if found is NOT_FOUND else found
    if isinstance(node, ast.Attribute):
        base = _resolved(it, node.value)
        return getattr(base, node.attr, None) if isinstance(base, type(bisect)) else None
    return None


_INSORTS = {id(bisect.insort), id(bisect.insort_right), id(bisect.insort_left)}


def insort(it: "Interpreter", statement: ast.stmt) -> bool:
    """Compiles ``statement`` if it is ``insort(a, x)``: ``a.insert(bisect_right(a, x), x)``
    (``insort_left``: left), the change of ``a`` it makes, for
    :mod:`~mapwithstate.pyfunc.in_place` to take."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return False
    call = statement.value
    function = _resolved(it, call.func)
    if id(function) not in _INSORTS:
        return False
    if len(call.args) != 2 or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        raise it.ctx.refuse(call, "insort() with lo, hi or key", "insort(a, x)")
    position = _bisect(function is not bisect.insort_left)(it, call)
    owner, x = call.args
    name = "__mws_insort_position"
    insert = ast.Call(
        func=ast.Attribute(value=owner, attr="insert", ctx=ast.Load()),
        args=[ast.Name(id=name, ctx=ast.Load()), x],
        keywords=[],
    )
    for node in (insert, insert.func, insert.args[0]):
        ast.copy_location(node, call)
    it.path.env[name] = position
    try:
        it.statement(ast.copy_location(ast.Expr(value=insert), statement))
    finally:
        it.path.env.pop(name, None)
    return True


#: The functions by id, each compiling its whole call.
FUNCTIONS: Dict[int, Callable[["Interpreter", ast.Call], Any]] = {
    id(heapq.nlargest): _extremes(True),
    id(heapq.nsmallest): _extremes(False),
    id(bisect.bisect_left): _bisect(False),
    id(bisect.bisect_right): _bisect(True),
    id(itertools.pairwise): _pairwise,
    id(itertools.chain): _chain,
    id(itertools.islice): _islice,
}


def call(it: "Interpreter", node: ast.Call, function: Any) -> Any:
    """The call ``node`` of ``function``, one of :data:`FUNCTIONS`."""
    return FUNCTIONS[id(function)](it, node)
