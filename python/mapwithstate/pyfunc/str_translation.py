"""``str`` methods that rewrite a string character by character: ``expandtabs(tabsize=8)``,
``translate(table)`` and the tables ``str.maketrans(...)`` makes.

``expandtabs`` replaces each tab by the spaces up to the next multiple of ``tabsize`` columns,
counting columns from the last ``\\n`` or ``\\r`` (in code points, as Python does); a
``tabsize`` of 0 or less drops the tabs. ``str.maketrans`` of constants (literals, module
constants, ``ord``/``chr`` of them) is made when compiling, by Python's own ``str.maketrans``,
so its errors are Python's; ``translate`` takes a dict of code points (a constant, a table in a
variable or a MAP field) to a str, a code point or ``None`` (delete).
"""

import ast
import builtins as py
from typing import TYPE_CHECKING, Any, Dict, List

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.arguments import MethodHandler, arity, int_argument
from mapwithstate.pyfunc.iteration import characters
from mapwithstate.pyfunc.pytypes import STR
from mapwithstate.pyfunc.values import Value, let, literal

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = ["TRANSLATION_METHODS", "maketrans"]


def _expandtabs(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 0, 1, "expandtabs", ("tabsize",))
    given = args[0] if args else kwargs.get("tabsize", literal(8))
    size = int_argument(it, node, given, "expandtabs() tabsize")

    def expanded(text: Column, size: Column) -> Column:
        # Lines end after each \n or \r (kept), where the column starts again at 0.
        lines = F.split(text, "(?<=[\\n\\r])", -1)

        def line(text: Column) -> Column:
            parts = F.split(text, "\\t", -1)

            def tab(done: Column, part: Column) -> Column:
                column = F.length(done).cast("bigint") + F.length(part).cast("bigint")
                pad = (size - column % size).cast("int")
                return F.concat(done, part, F.repeat(F.lit(" "), pad))

            before_tabs = F.slice(parts, 1, F.size(parts) - 1)
            return F.concat(F.aggregate(before_tabs, F.lit(""), tab), F.element_at(parts, -1))

        tabbed = F.array_join(F.transform(lines, line), "")
        return F.when(size > F.lit(0), tabbed).otherwise(F.replace(text, F.lit("\t"), F.lit("")))

    return Value(let([base.column, size], expanded), STR, False)


#: Python's message for a table's code point that is no character.
_OUT_OF_RANGE = "character mapping must be in range(0x110000)"


def _translate(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    arity(it, node, args, kwargs, 1, 1, "translate")
    table = args[0]
    if table.type.kind not in ("dict", "none"):
        raise it.ctx.refuse(
            node,
            f"translate() of a {table.type}",
            "translate(table) with a dict of code points, as str.maketrans(...) makes",
        )
    table = operators.none_check(it.ctx, node, table, "'NoneType' object is not subscriptable")
    key, value = table.type.args
    if key.kind == "none":  # an empty table
        return base
    if key.kind not in ("int", "bool") or value.kind not in ("str", "int", "none"):
        raise it.ctx.refuse(
            node,
            f"translate() of a dict of {key} to {value}",
            "translate looks each character's code point up (ord(c)) and takes a str, a code "
            "point or None: build the table with str.maketrans(...)",
        )
    if value.kind == "int":
        codes = F.map_values(table.column)
        it.ctx.check(
            node,
            F.exists(codes, lambda c: (c < F.lit(0)) | (c >= F.lit(0x110000))),
            "ValueError",
            _OUT_OF_RANGE,
        )
        it.ctx.check(
            node,
            F.exists(codes, lambda c: (c >= F.lit(0xD800)) & (c <= F.lit(0xDFFF))),
            "ValueError",
            "translate() to a surrogate code point: Python makes a str with a lone surrogate, "
            "which no Spark string holds",
        )

    def translated(text: Column, mapping: Column) -> Column:
        def one(c: Column) -> Column:
            code = F.ascii(c).cast("bigint")
            found = F.try_element_at(mapping, code)
            if value.kind == "int":
                found = F.decode(F.unhex(F.lpad(F.hex(found), 8, "0")), "UTF-32")
            replacement = F.coalesce(found, F.lit("")) if value.kind != "none" else F.lit("")
            present = F.coalesce(F.map_contains_key(mapping, code), F.lit(False))
            return F.when(present, replacement).otherwise(c)

        return F.array_join(F.transform(characters(text).column, one), "")

    return Value(let([base.column, table.column], translated), STR, False)


def _constant(it: "Interpreter", node: ast.expr) -> Any:
    """The value of ``node`` where it is known when compiling: a literal, a dict display of
    them, ``ord``/``chr`` of one, or a module constant; anything else is refused."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        table = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise it.ctx.refuse(
                    value, "** in a str.maketrans() table", "write the table's items out"
                )
            table[_constant(it, key)] = _constant(it, value)
        return table
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and it.ctx.source.lookup(node.func.id) in (py.ord, py.chr)
        and len(node.args) == 1
        and not node.keywords
    ):
        function = it.ctx.source.lookup(node.func.id)
        try:
            return function(_constant(it, node.args[0]))
        except (TypeError, ValueError) as e:
            raise it.ctx.refuse(
                node, f"{node.func.id}() of this constant", f"Python raises {type(e).__name__}: {e}"
            ) from None
    if isinstance(node, ast.Name) and node.id not in _local_names(it):
        found = it.ctx.source.lookup(node.id)
        if isinstance(found, (str, int, dict)) or found is None:
            return found
    raise it.ctx.refuse(
        node,
        "str.maketrans() of a value known only at run time",
        "build the table from constants (literals, module constants, ord('c'))",
    )


def _local_names(it: "Interpreter") -> set[str]:
    """The function's parameters and the names it assigns: not module constants."""
    tree = it.ctx.source.tree
    names = {a.arg for a in tree.args.args + tree.args.kwonlyargs}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def maketrans(it: "Interpreter", node: ast.Call) -> Value:
    """``str.maketrans(x[, y[, z]])`` of constants: Python's own table, made now, as a dict
    of code points to a str or ``None`` (a code point is written as its character)."""
    if node.keywords:
        raise it.ctx.refuse(
            node, "str.maketrans() with keyword arguments", "Python takes them by position"
        )
    args = [_constant(it, a) for a in node.args]
    try:
        table = str.maketrans(*args)
    except (TypeError, ValueError) as e:
        raise it.ctx.refuse(
            node, "str.maketrans() of these arguments", f"Python raises {type(e).__name__}: {e}"
        ) from None
    written: Dict[int, Any] = {}
    for code, to in table.items():
        if isinstance(to, int) and not isinstance(to, bool):
            if not 0 <= to < 0x110000:
                raise it.ctx.refuse(
                    node, f"str.maketrans() mapping to code point {to}", _OUT_OF_RANGE
                )
            if 0xD800 <= to <= 0xDFFF:
                raise it.ctx.refuse(
                    node,
                    f"str.maketrans() mapping to the surrogate {to:#x}",
                    "Python's translate() would make a str with a lone surrogate, which no "
                    "Spark string holds",
                )
            to = chr(to)
        written[code] = to
    from mapwithstate.pyfunc.dict_displays import captured_dict

    return captured_dict(it.ctx, node, written)


TRANSLATION_METHODS: Dict[str, MethodHandler] = {
    "expandtabs": _expandtabs,
    "translate": _translate,
}
