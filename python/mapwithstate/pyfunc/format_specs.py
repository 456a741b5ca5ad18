"""Python's string formatting of compiled values: f-string format specs and conversions
(``f"{x:,.2f}"``, ``f"{n:05d}"``, ``f"{s!r}"``), ``format(value, spec)``, ``str.format``
of a constant template, and ``%`` formatting of a constant template.

A spec is Python's format-spec mini-language; it must be a constant (a nested field,
``f"{x:{width}}"``, is refused). The compiler checks it against Python for each type the
value may have, so a spec Python refuses (``f"{s:d}"``) is a compile error, and emits the
plugin's ``__mws_python_format`` (``io.mapwithstate.pyfunc.PythonFormat``): Python's layout
of a float's exact binary value, rounded half to even, which Spark's ``format_string`` and
``format_number`` do not give. ``None`` with a spec fails with Python's ``TypeError``.
``%`` templates are translated into the same specs, conversion by conversion.
"""

import ast
import re
import string
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.formatting import to_str
from mapwithstate.pyfunc.pytypes import STR, PyType
from mapwithstate.pyfunc.values import Value, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Context, Interpreter

__all__ = ["format_value", "convert", "str_format", "percent_format"]

#: A value of each kind the spec is checked against: Python's verdict on a spec depends on
#: the value's type only (``c`` and ``n``, whose output depends on the value or the locale,
#: are refused on their own).
_SAMPLES: Dict[str, Tuple[Any, ...]] = {
    "int": (1,),
    "bool": (True,),
    "float": (1.5,),
    "num": (1, 1.5),
    "str": ("a",),
}


def _call(column: Column, spec: str) -> Column:
    return F.call_function("__mws_python_format", column, F.lit(spec))


def format_value(ctx: "Context", node: ast.AST, value: Value, spec: str) -> Value:
    """``format(value, spec)`` with a constant ``spec``."""
    if spec == "":
        return to_str(ctx, node, value)
    kind = value.type.kind
    if kind in ("datetime", "date"):
        from mapwithstate.pyfunc.datetime_methods import strftime

        value = operators.none_check(
            ctx, node, value, "unsupported format string passed to NoneType.__format__"
        )
        return strftime(ctx, node, value, spec)
    if kind not in _SAMPLES:
        raise ctx.refuse(
            node,
            f"format spec {spec!r} of a {value.type}",
            "format specs work on str, int, float and bool values; format a datetime with "
            ".strftime(...)",
        )
    if spec[-1:] in ("c", "n"):
        raise ctx.refuse(
            node,
            f"format spec {spec!r}",
            "the 'c' and 'n' types are not supported: use 'd', or chr()/locale-free types",
        )
    for sample in _SAMPLES[kind]:
        try:
            format(sample, spec)
        except (ValueError, TypeError) as e:
            raise ctx.refuse(
                node,
                f"format spec {spec!r} of a {value.type}",
                f"Python raises {type(e).__name__}: {e}",
            ) from e
    value = operators.none_check(
        ctx, node, value, "unsupported format string passed to NoneType.__format__"
    )
    if kind == "str":
        column = _call(value.column, spec)
    elif kind == "bool":
        column = _call(value.column.cast("bigint"), spec)
    elif kind == "int":
        column = _call(value.column.cast("bigint"), spec)
    elif kind == "float":
        column = _call(value.column, spec)
    else:
        column = F.coalesce(
            _call(value.column.getField("i"), spec), _call(value.column.getField("f"), spec)
        )
    return Value(column, STR, False)


def convert(ctx: "Context", node: ast.AST, value: Value, conversion: int) -> Value:
    """The value an f-string's ``!s`` or ``!r`` conversion gives (``-1``: none)."""
    if conversion in (-1,):
        return value
    if conversion == ord("s"):
        return to_str(ctx, node, value)
    if conversion == ord("r"):
        kind = value.type.kind
        if kind == "str":
            column = F.call_function("__mws_python_repr", value.column)
            if value.nullable:
                column = F.coalesce(column, F.lit("None"))
            return Value(column, STR, False)
        if kind in ("int", "bool", "float", "num", "none"):
            return to_str(ctx, node, value)
        if kind in ("datetime", "date", "timedelta"):
            from mapwithstate.pyfunc.formatting import datetime_repr, timedelta_repr

            column = (
                timedelta_repr(value.column)
                if kind == "timedelta"
                else datetime_repr(value.column, kind)
            )
            if value.nullable:
                column = F.coalesce(column, F.lit("None"))
            return Value(column, STR, False)
        if kind in ("list", "tuple", "dict"):
            column = _container_repr(ctx, node, value)
            if value.nullable:
                column = F.when(value.column.isNull(), F.lit("None")).otherwise(column)
            return Value(column, STR, False)
    raise ctx.refuse(
        node,
        f"conversion !{chr(conversion)} of a {value.type}",
        "use !s, or !r of a str, int, float, bool, datetime, date, timedelta, or a list, "
        "tuple or dict of them",
    )


def _container_repr(ctx: "Context", node: ast.AST, value: Value) -> Column:
    """``repr()`` of a list, tuple or dict, as Python writes it: each item's ``repr()``
    (``None`` for a null), ``, ``-separated, in brackets (a one-item tuple with its comma; a
    dict's items in insertion order, ``key: value``)."""
    from mapwithstate.pyfunc.tuples import elements

    def item(column: Column, py_type: PyType) -> Column:
        return convert(ctx, node, Value(column, py_type, True), ord("r")).column

    kind = value.type.kind
    if kind == "list":
        element = value.type.args[0]
        items = F.transform(value.column, lambda e: item(e, element))
        return F.concat(F.lit("["), F.array_join(items, ", "), F.lit("]"))
    if kind == "dict":
        key_type, value_type = value.type.args
        items = F.transform(
            F.map_entries(value.column),
            lambda e: F.concat(
                item(e.getField("key"), key_type),
                F.lit(": "),
                item(e.getField("value"), value_type),
            ),
        )
        return F.concat(F.lit("{"), F.array_join(items, ", "), F.lit("}"))
    parts = [convert(ctx, node, part, ord("r")).column for part in elements(value.non_null())]
    inner = F.concat_ws(", ", *parts) if parts else F.lit("")
    return F.concat(F.lit("("), inner, F.lit("," if len(parts) == 1 else ""), F.lit(")"))


def joined(ctx: "Context", parts: List[Value]) -> Value:
    """The str values of ``parts`` concatenated."""
    columns = [p.column for p in parts]
    if not columns:
        return literal("")
    return Value(F.concat(*columns) if len(columns) > 1 else columns[0], STR, False)


def str_format(
    it: "Interpreter",
    node: ast.Call,
    base: Value,
    args: List[Value],
    kwargs: Dict[str, Value],
) -> Value:
    """``template.format(*args, **kwargs)`` of a constant template."""
    if not base.is_const:
        raise it.ctx.refuse(
            node, "str.format() of a template known only at run time", "use a constant template"
        )
    template = base.const
    parts: List[Value] = []
    automatic = 0
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as e:
        raise it.ctx.refuse(node, "str.format() template", f"Python raises ValueError: {e}") from e
    for text, name, spec, conversion in fields:
        if text:
            parts.append(literal(text))
        if name is None:
            continue
        if "{" in (spec or ""):
            raise it.ctx.refuse(node, "a nested field in a format spec", "write the spec out")
        if name == "":
            index: Any = automatic
            automatic += 1
        elif name.isdigit():
            index = int(name)
        elif name.isidentifier():
            index = name
        else:
            raise it.ctx.refuse(
                node,
                f"str.format() field {name!r}",
                "name a positional or keyword argument; read attributes and items outside",
            )
        if isinstance(index, int):
            if index >= len(args):
                raise it.ctx.refuse(
                    node,
                    f"str.format() field {index}",
                    "Python raises IndexError: too few arguments",
                )
            value = args[index]
        else:
            if index not in kwargs:
                raise it.ctx.refuse(node, f"str.format() field {index!r}", "Python raises KeyError")
            value = kwargs[index]
        code = -1 if conversion is None else ord(conversion)
        parts.append(format_value(it.ctx, node, convert(it.ctx, node, value, code), spec or ""))
    return joined(it.ctx, parts)


#: One printf-style conversion: ``%[flags][width][.precision]type``.
_PERCENT = re.compile(
    r"%(?P<map>\([^)]*\))?(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?"
    r"(?:\.(?P<precision>\*|\d*))?(?P<type>.?)"
)


def percent_format(it: "Interpreter", node: ast.BinOp, template: str, right: Any) -> Value:
    """``template % values`` of a constant template: each conversion as ``format()`` with
    the spec it amounts to (``%-8s`` as ``<8``, ``%05.1f`` as ``05.1f``, ``%d`` of a float as
    of ``int(value)``); ``right`` is a tuple of values or one value."""
    ctx = it.ctx
    values = list(right) if isinstance(right, tuple) else [right]
    parts: List[Value] = []
    position = 0
    used = 0
    for match in _PERCENT.finditer(template):
        if match.start() > position:
            parts.append(literal(template[position : match.start()]))
        position = match.end()
        kind = match.group("type")
        flags = match.group("flags")
        if kind == "%" and not (flags or match.group("width") or match.group("precision")):
            parts.append(literal("%"))
            continue
        if (
            match.group("map")
            or "*" in (match.group("width") or "")
            or "*" in (match.group("precision") or "")
        ):
            raise ctx.refuse(
                node, f"% formatting with {match.group(0)!r}", "use an f-string instead"
            )
        if kind not in tuple("diueEfFgGsrxXo"):
            raise ctx.refuse(
                node, f"% formatting conversion {match.group(0)!r}", "use an f-string instead"
            )
        if used >= len(values):
            raise ctx.refuse(
                node,
                "% formatting",
                "Python raises TypeError: not enough arguments for format string",
            )
        value = values[used]
        used += 1
        parts.append(_percent_one(it, node, value, match, kind, flags))
    if position < len(template):
        parts.append(literal(template[position:]))
    if used != len(values):
        raise ctx.refuse(
            node,
            "% formatting",
            "Python raises TypeError: not all arguments converted during string formatting",
        )
    return joined(ctx, parts)


def _percent_one(
    it: "Interpreter", node: ast.BinOp, value: Value, match: "re.Match[str]", kind: str, flags: str
) -> Value:
    ctx = it.ctx
    width = match.group("width") or ""
    precision = match.group("precision")
    align = "<" if "-" in flags else ""
    sign = "+" if "+" in flags else (" " if " " in flags else "")
    if kind in ("s", "r"):
        text = to_str(ctx, node, value) if kind == "s" else convert(ctx, node, value, ord("r"))
        cut = f".{precision or 0}" if precision is not None else ""
        return format_value(ctx, node, text, f"{align or '>'}{width}{cut}" if width or cut else "")
    numeric = value.type.kind in ("int", "bool", "float", "num")
    if not numeric:
        raise ctx.refuse(
            node,
            f"%{kind} of a {value.type}",
            f"Python raises TypeError: %{kind} format: a real number is required",
        )
    zero = "0" if "0" in flags and not align else ""
    alternate = "#" if "#" in flags else ""
    if kind in ("d", "i", "u", "x", "X", "o"):
        if precision is not None:
            raise ctx.refuse(
                node, f"% formatting {match.group(0)!r}", "an int's precision: use an f-string"
            )
        if value.type.kind in ("float", "num"):
            if kind in ("x", "X", "o"):
                raise ctx.refuse(
                    node,
                    f"%{kind} of a float",
                    f"Python raises TypeError: %{kind} format: an integer is required",
                )
            from mapwithstate.pyfunc.builtins import int_of

            value = int_of(it, node, value)
        spec = f"{align}{sign}{alternate}{zero}{width}{'d' if kind in 'diu' else kind}"
        return format_value(ctx, node, value, spec)
    cut = f".{precision or 0}" if precision is not None else ""
    spec = f"{align}{sign}{alternate}{zero}{width}{cut}{kind}"
    if value.type.kind in ("int", "bool", "num"):
        value = Value(operators.as_float(value), _float_type(), value.nullable)
    return format_value(ctx, node, value, spec)


def _float_type() -> Any:
    from mapwithstate.pyfunc.pytypes import FLOAT

    return FLOAT


def f_string_spec(ctx: "Context", node: ast.FormattedValue) -> Optional[str]:
    """The constant spec of an f-string field (None without one); a nested field is
    refused."""
    if node.format_spec is None:
        return None
    assert isinstance(node.format_spec, ast.JoinedStr)
    text = ""
    for part in node.format_spec.values:
        if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
            raise ctx.refuse(
                node,
                "a nested field in a format spec",
                "write the spec out: f'{x:8.2f}', not f'{x:{width}.2f}'",
            )
        text += part.value
    return text
