"""``str`` methods that search a string (``count``, ``rfind``, ``index``, ``rindex``,
``partition``, ``rpartition``), take an
affix off it (``removeprefix``, ``removesuffix``) or pad it (``zfill``, ``ljust``, ``rjust``,
``center``), with Python's semantics: positions and widths in code points (Spark's string
functions count characters the same way), ``count`` of non-overlapping occurrences and of
``""`` as ``len(s) + 1``, ``ValueError: substring not found`` from ``index``/``rindex``,
``zfill`` keeping a leading sign first, ``center`` putting the odd fill character where
CPython does, and ``TypeError`` for a fill character that is not exactly one character.
"""

import ast
from typing import TYPE_CHECKING, Dict, List

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.arguments import MethodHandler, arity, int_argument
from mapwithstate.pyfunc.pytypes import INT, STR, tuple_field, tuple_of
from mapwithstate.pyfunc.values import Value, let

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["SEARCH_AND_PAD_METHODS"]


def _str_argument(it: "Interpreter", node: ast.Call, value: Value, name: str) -> Column:
    if value.type.kind != "str":
        raise it.ctx.refuse(
            node,
            f"{name}() of a {value.type}",
            f"Python raises TypeError: {name}() takes a str",
        )
    return value.column


def _length(column: Column) -> Column:
    return F.length(column).cast("bigint")


def _count(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 1, 1, "count")
    sub = _str_argument(it, node, args[0], "count")
    # Spark's replace, as Python's, replaces non-overlapping occurrences left to right.
    removed = _length(base.column) - _length(F.replace(base.column, sub, F.lit("")))
    column = F.when(_length(sub) == 0, _length(base.column) + 1).otherwise(
        F.floor(removed / F.greatest(_length(sub), F.lit(1))).cast("bigint")
    )
    return Value(column, INT, False)


def _last_position(text: Column, sub: Column) -> Column:
    """Python's ``text.rfind(sub)``: the last occurrence's index, ``len(text)`` for ``""``,
    -1 where there is none."""
    found = F.instr(F.reverse(text), F.reverse(sub)).cast("bigint")
    return (
        F.when(_length(sub) == 0, _length(text))
        .when(found == 0, F.lit(-1).cast("bigint"))
        .otherwise(_length(text) - (found - 1) - _length(sub))
    )


def _searcher(last: bool, raises: bool) -> MethodHandler:
    name = ("rindex" if raises else "rfind") if last else "index"

    def handler(
        it: "Interpreter",
        node: ast.Call,
        base: Value,
        args: List[Value],
        kwargs: Dict[str, Value],
    ) -> Value:
        arity(it, node, args, kwargs, 1, 1, name)
        sub = _str_argument(it, node, args[0], name)
        if last:
            position = _last_position(base.column, sub)
        else:
            position = F.instr(base.column, sub).cast("bigint") - F.lit(1)
        if raises:
            it.ctx.check(node, position == -1, "ValueError", "substring not found")
        return Value(position, INT, False)

    return handler


def _partition(last: bool) -> MethodHandler:
    name = "rpartition" if last else "partition"

    def handler(
        it: "Interpreter",
        node: ast.Call,
        base: Value,
        args: List[Value],
        kwargs: Dict[str, Value],
    ) -> Value:
        """``s.partition(sep)``: ``(head, sep, tail)`` around the first occurrence, ``(s, "",
        "")`` without one (``rpartition``: the last, ``("", "", s)``); ``ValueError: empty
        separator``."""
        arity(it, node, args, kwargs, 1, 1, name)
        if args[0].type.kind == "none":
            raise it.ctx.refuse(
                node, f"{name}(None)", "Python raises TypeError: must be str, not None"
            )
        sep = operators.none_check(it.ctx, node, args[0], "must be str, not None")
        sub = _str_argument(it, node, sep, name)
        it.ctx.check(node, _length(sub) == 0, "ValueError", "empty separator")

        def parts(text: Column, sub: Column) -> Column:
            if last:
                position = _last_position(text, sub)
            else:
                position = F.instr(text, sub).cast("bigint") - F.lit(1)
            found = position >= F.lit(0)
            head = F.substring(text, 1, F.greatest(position, F.lit(0)).cast("int"))
            start = (position + _length(sub) + 1).cast("int")
            tail = F.substring(text, start, F.greatest(_length(text), F.lit(1)).cast("int"))
            missing = (F.lit(""), F.lit(""), text) if last else (text, F.lit(""), F.lit(""))
            return F.struct(
                *(
                    F.when(found, part).otherwise(fallback).alias(tuple_field(i))
                    for i, (part, fallback) in enumerate(
                        zip((head, sub, tail), missing, strict=True)
                    )
                )
            )

        return Value(let([base.column, sub], parts), tuple_of((STR, STR, STR)), False)

    return handler


def _remove_affix(prefix: bool) -> MethodHandler:
    name = "removeprefix" if prefix else "removesuffix"

    def handler(
        it: "Interpreter",
        node: ast.Call,
        base: Value,
        args: List[Value],
        kwargs: Dict[str, Value],
    ) -> Value:
        arity(it, node, args, kwargs, 1, 1, name)
        affix = _str_argument(it, node, args[0], name)
        text, size = base.column, _length(affix)
        rest = (_length(text) - size).cast("int")
        if prefix:
            matches = F.substring(text, 1, size.cast("int")) == affix
            cut = F.substring(text, (size + 1).cast("int"), F.greatest(rest, F.lit(0)))
        else:
            matches = F.right(text, size.cast("int")) == affix
            cut = F.substring(text, 1, F.greatest(rest, F.lit(0)))
        column = F.when((size > 0) & (_length(text) >= size) & matches, cut).otherwise(text)
        return Value(column, STR, False)

    return handler


def _fill(it: "Interpreter", node: ast.Call, args: List[Value], name: str) -> Column:
    """The fill character (a space unless given), which must be one character."""
    if len(args) < 2:
        return F.lit(" ")
    fill = args[1]
    if fill.type.kind != "str":
        raise it.ctx.refuse(
            node,
            f"{name}() with a fill character of type {fill.type}",
            f"Python raises TypeError: {name}() argument 2 must be str",
        )
    it.ctx.check(
        node,
        F.length(fill.column) != 1,
        "TypeError",
        "The fill character must be exactly one character long",
    )
    return fill.column


def _padder(side: str) -> MethodHandler:
    name = {"right": "ljust", "left": "rjust", "both": "center"}[side]

    def handler(
        it: "Interpreter",
        node: ast.Call,
        base: Value,
        args: List[Value],
        kwargs: Dict[str, Value],
    ) -> Value:
        arity(it, node, args, kwargs, 1, 2, name)
        width = int_argument(it, node, args[0], "a width")
        fill = _fill(it, node, args, name)
        text = base.column
        margin = width - _length(text)
        if side == "right":
            padded = F.concat(text, F.repeat(fill, margin.cast("int")))
        elif side == "left":
            padded = F.concat(F.repeat(fill, margin.cast("int")), text)
        else:
            # CPython's pad(): the odd character goes left where the margin and the width
            # are both odd.
            left = F.floor(margin / 2).cast("bigint") + F.when(
                (margin % 2 == 1) & (width % 2 == 1), F.lit(1)
            ).otherwise(F.lit(0))
            padded = F.concat(
                F.repeat(fill, left.cast("int")), text, F.repeat(fill, (margin - left).cast("int"))
            )
        return Value(F.when(margin > 0, padded).otherwise(text), STR, False)

    return handler


def _zfill(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 1, 1, "zfill")
    width = int_argument(it, node, args[0], "a width")
    text = base.column
    margin = width - _length(text)
    signed = F.substring(text, 1, 1).isin("+", "-")
    zeros = F.repeat(F.lit("0"), margin.cast("int"))
    padded = F.when(
        signed,
        F.concat(F.substring(text, 1, 1), zeros, F.substring(text, 2, F.length(text))),
    ).otherwise(F.concat(zeros, text))
    return Value(F.when(margin > 0, padded).otherwise(text), STR, False)


SEARCH_AND_PAD_METHODS: Dict[str, MethodHandler] = {
    "count": _count,
    "rfind": _searcher(last=True, raises=False),
    "index": _searcher(last=False, raises=True),
    "rindex": _searcher(last=True, raises=True),
    "partition": _partition(last=False),
    "rpartition": _partition(last=True),
    "removeprefix": _remove_affix(prefix=True),
    "removesuffix": _remove_affix(prefix=False),
    "ljust": _padder("right"),
    "rjust": _padder("left"),
    "center": _padder("both"),
    "zfill": _zfill,
}
