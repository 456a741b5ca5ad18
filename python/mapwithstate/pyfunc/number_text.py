"""Ints as text and back, and the methods of numbers: ``hex oct bin chr ord``, ``int(s)``,
``int(s, base)``, ``float(s)``, ``int.bit_length()``, ``float.is_integer()``.

``hex``/``oct``/``bin`` write the magnitude with a sign, as Python does (``hex(-255)`` is
``'-0xff'``), including the 64-bit minimum, whose magnitude no BIGINT holds. ``chr`` makes
the code point's character (``ValueError`` outside ``range(0x110000)``; a surrogate, which
Python makes but no Spark string holds, fails with the ``UnicodeEncodeError`` Python raises
where it is written out as UTF-8, its message saying so); ``ord`` takes exactly one
character (``TypeError`` otherwise) and counts in code points, as Spark's strings do.
``int(s)`` and ``float(s)`` read what Python's parsers read: any Unicode decimal digit, Python's
whitespace around, underscores between digits.
"""

import ast
from typing import TYPE_CHECKING, Callable, Dict, List

from pyspark.sql import Column
from pyspark.sql import functions as F

from mapwithstate.pyfunc import operators
from mapwithstate.pyfunc.arguments import Handler, MethodHandler, int_argument
from mapwithstate.pyfunc.arguments import arity as _arity
from mapwithstate.pyfunc.pytypes import BOOL, FLOAT, INT, STR
from mapwithstate.pyfunc.server_functions import ascii_digits, fail_on_error
from mapwithstate.pyfunc.values import Value, let

if TYPE_CHECKING:
    from mapwithstate.pyfunc.interpreter import Interpreter

__all__ = [
    "NUMBER_TEXT_FUNCTIONS",
    "INT_METHODS",
    "FLOAT_METHODS",
    "int_in_base",
    "float_of_str",
]

_MIN_LONG = -(1 << 63)


def _digits_of(n: int, base: int) -> str:
    """``n``'s digits in ``base`` (``n`` > 0)."""
    digits = ""
    while n:
        n, d = divmod(n, base)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    return digits


def _in_base(name: str, prefix: str, digits: Callable[[Column], Column], minimum: str) -> Handler:
    """``hex``/``oct``/``bin``: ``-`` for a negative int, the prefix, the magnitude's digits
    (``minimum``: those of 2**63)."""

    def handler(
        it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]
    ) -> Value:
        _arity(it, node, args, kwargs, 1, 1, name)
        n = int_argument(it, node, args[0], f"{name}() argument")

        def text(n: Column) -> Column:
            magnitude = F.abs(F.when(n == F.lit(_MIN_LONG), F.lit(0)).otherwise(n))
            written = F.when(n == F.lit(_MIN_LONG), F.lit(minimum)).otherwise(digits(magnitude))
            sign = F.when(n < F.lit(0), F.lit("-")).otherwise(F.lit(""))
            return F.concat(sign, F.lit(prefix), written)

        return Value(let([n], text), STR, False)

    return handler


def _chr(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 1, 1, "chr")
    i = int_argument(it, node, args[0], "chr() argument")
    c_int = (i >= F.lit(-(1 << 31))) & (i < F.lit(1 << 31))
    it.ctx.check(node, ~c_int, "OverflowError", "Python int too large to convert to C int")
    it.ctx.check(
        node,
        c_int & ((i < F.lit(0)) | (i >= F.lit(0x110000))),
        "ValueError",
        "chr() arg not in range(0x110000)",
    )
    # Python makes a lone surrogate here, and fails only where it is written out as UTF-8;
    # a Spark string is UTF-8, so the compiled function fails at once, saying why.
    it.ctx.check(
        node,
        (i >= F.lit(0xD800)) & (i <= F.lit(0xDFFF)),
        "UnicodeEncodeError",
        F.format_string(
            "'utf-8' codec can't encode character '\\u%s' in position 0: surrogates not "
            "allowed (chr(%d) is a lone surrogate: Python makes one, but a Spark string is "
            "UTF-8 and cannot hold it)",
            F.lower(F.hex(i)),
            i,
        ),
    )
    code = F.when((i >= F.lit(0)) & (i < F.lit(0x110000)), i)
    column = F.decode(F.unhex(F.lpad(F.hex(code), 8, "0")), "UTF-32")
    return Value(column, STR, False)


def _ord(it: "Interpreter", node: ast.Call, args: List[Value], kwargs: Dict[str, Value]) -> Value:
    _arity(it, node, args, kwargs, 1, 1, "ord")
    value = args[0]
    if value.type.kind not in ("str", "none"):
        raise it.ctx.refuse(
            node,
            f"ord() of a {value.type}",
            f"Python raises TypeError: ord() expected string of length 1, but {value.type} found",
        )
    value = operators.none_check(
        it.ctx, node, value, "ord() expected string of length 1, but NoneType found"
    )
    size = F.length(value.column)
    it.ctx.check(
        node,
        size != F.lit(1),
        "TypeError",
        F.format_string("ord() expected a character, but string of length %d found", size),
    )
    return Value(F.ascii(value.column).cast("bigint"), INT, False)


def _bit_length(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``n.bit_length()``: the bits of ``abs(n)`` (64 for the minimum)."""
    _arity(it, node, args, kwargs, 0, 0, "bit_length")

    def bits(n: Column) -> Column:
        magnitude = F.abs(F.when(n == F.lit(_MIN_LONG), F.lit(0)).otherwise(n))
        return (
            F.when(n == F.lit(0), F.lit(0))
            .when(n == F.lit(_MIN_LONG), F.lit(64))
            .otherwise(F.length(F.bin(magnitude)))
            .cast("bigint")
        )

    return Value(let([base.column.cast("bigint")], bits), INT, False)


def _is_integer(
    it: "Interpreter", node: ast.Call, base: Value, args: List[Value], kwargs: Dict[str, Value]
) -> Value:
    """``x.is_integer()``: finite and without a fraction."""
    _arity(it, node, args, kwargs, 0, 0, "is_integer")

    def whole(x: Column) -> Column:
        finite = ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))
        # Java's remainder of a finite double by 1.0 is exact: 0 just for whole numbers.
        return finite & ((x % F.lit(1.0)) == F.lit(0.0))

    return Value(let([base.column], whole), BOOL, False)


#: The prefix ``int(s, base)`` accepts after the sign, for the bases that have one.
_PREFIXES = {2: "0[bB]", 8: "0[oO]", 16: "0[xX]"}
#: The most digits of each base whose value is below 2**64 (``conv`` works unsigned).
_DIGITS_BELOW_2_64 = {b: len(_digits_of((1 << 64) - 1, b)) for b in range(2, 37)}


#: The whitespace Python's number parsers strip once the text is ASCII (``Py_ISSPACE``: not
#: ``\x1c``-``\x1f``, which ``str.strip()`` strips).
_ASCII_SPACE = "[ \\t\\n\\x0b\\x0c\\r]"


def _number_text(text: Column) -> Column:
    """The text ``int()`` and ``float()`` of a str parse: Unicode decimal digits and
    whitespace made ASCII (:func:`ascii_digits`), whitespace around stripped."""
    return F.regexp_replace(ascii_digits(text), f"^{_ASCII_SPACE}+|{_ASCII_SPACE}+$", "")


def _with_repr(message: str, text: Column) -> Column:
    """Python's message naming the str it could not parse: ``message`` and the str's repr."""
    return F.concat(F.lit(message), F.call_function("__mws_python_repr", text))


def int_in_base(it: "Interpreter", node: ast.AST, value: Value, base: Value) -> Value:
    """``int(s, base)`` of a str and a constant base from 2 to 36 (10: ``int(s)``): Python's
    syntax (whitespace around, a sign, the base's prefix, single underscores between digits,
    digits of either case, any Unicode decimal digit as its ASCII one), ``ValueError`` naming
    the str otherwise, ``OverflowError`` past 64 bits; base 0 or a base known only at run time
    is :func:`_int_of_any_base`'s."""
    if value.type.kind not in ("str", "none"):
        raise it.ctx.refuse(
            node,
            f"int() of a {value.type} with a base",
            "Python raises TypeError: int() can't convert non-string with explicit base",
        )
    if base.is_const and type(base.const) is int and not (base.const == 0 or 2 <= base.const <= 36):
        raise it.ctx.refuse(
            node, "int() of this base", "Python raises ValueError: the base is 0 or 2 to 36"
        )
    if not (base.is_const and type(base.const) is int and 2 <= base.const <= 36):
        return _int_of_any_base(it, node, value, base)
    b = int(base.const)
    value = operators.none_check(
        it.ctx, node, value, "int() can't convert non-string with explicit base"
    )
    digit = "[0-9" + "".join(f"{chr(97 + i)}{chr(65 + i)}" for i in range(b - 10)) + "]"
    if b < 10:
        digit = f"[0-{b - 1}]"
    prefix = f"({_PREFIXES[b]}_?)?" if b in _PREFIXES else ""
    pattern = f"^[+-]?{prefix}{digit}+(_{digit}+)*$"

    def parsed(text: Column) -> Column:
        if b == 10:
            # Spark's cast reads a sign and decimal digits, null past 64 bits.
            n = F.regexp_replace(text, "_", "").try_cast("bigint")
            return F.struct(text.rlike(pattern).alias("valid"), n.alias("n"))
        sign = F.when(F.substring(text, 1, 1) == F.lit("-"), F.lit(-1)).otherwise(F.lit(1))
        bare = F.regexp_replace(text, f"^[+-]?{prefix}", "")
        digits = F.regexp_replace(F.regexp_replace(bare, "_", ""), "^0+(?=.)", "")
        fits = F.length(digits) <= F.lit(_DIGITS_BELOW_2_64[b])
        magnitude = F.conv(digits, b, 10).cast("decimal(20,0)")
        signed = (F.when(fits, magnitude) * sign).cast("decimal(21,0)")
        return F.struct(
            text.rlike(pattern).alias("valid"),
            signed.try_cast("bigint").alias("n"),
        )

    result = let([_number_text(value.column)], parsed)
    valid, n = result.getField("valid"), result.getField("n")
    it.ctx.check(
        node,
        ~valid,
        "ValueError",
        _with_repr(f"invalid literal for int() with base {b}: ", value.column),
    )
    it.ctx.check(
        node, valid & n.isNull(), "OverflowError", "int result does not fit in 64 bits (BIGINT)"
    )
    return Value(n, INT, False)


def _int_of_any_base(it: "Interpreter", node: ast.AST, value: Value, base: Value) -> Value:
    """``int(s, 0)`` (the prefix decides; no leading zeros but for zero) or ``int(s, base)``
    of a base known only at run time: the plugin's ``__mws_python_int``, CPython's parser,
    with its ValueError for a base outside 0 and 2..36 and for what is not that base's
    literal."""
    # CPython's order: the base is read and checked before the str.
    b = int_argument(it, node, base, "int() base")
    it.ctx.check(
        node,
        ((b != F.lit(0)) & (b < F.lit(2))) | (b > F.lit(36)),
        "ValueError",
        "int() base must be >= 2 and <= 36, or 0",
    )
    value = operators.none_check(
        it.ctx, node, value, "int() can't convert non-string with explicit base"
    )
    result = F.call_function("__mws_python_int", value.column, b)
    fail_on_error(it.ctx, node, result)
    return Value(result.getField("n"), INT, False)


#: A float's literal as ``float()`` takes it (lowered, underscores between digits dropped).
_FLOAT_LITERAL = r"^[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?|inf|infinity|nan)$"


def float_of_str(it: "Interpreter", node: ast.AST, value: Value) -> Value:
    """``float(s)`` of a str (not None): Python's syntax (whitespace around, any Unicode decimal
    digit as its ASCII one, single underscores between digits, ``nan``, ``inf`` and
    ``infinity`` in any case with a sign), ``ValueError`` naming the str otherwise."""
    text = F.lower(F.regexp_replace(_number_text(value.column), "(?<=[0-9])_(?=[0-9])", ""))

    def parsed(text: Column) -> Column:
        # Java's parser reads what Python's does here, with Java's names of the specials.
        spark_text = F.regexp_replace(
            F.regexp_replace(text, "infinity|inf", "Infinity"), "^[+-]?nan$", "NaN"
        )
        valid = text.rlike(_FLOAT_LITERAL)
        return F.struct(
            valid.alias("valid"), F.when(valid, spark_text.try_cast("double")).alias("x")
        )

    result = let([text], parsed)
    it.ctx.check(
        node,
        ~result.getField("valid"),
        "ValueError",
        _with_repr("could not convert string to float: ", value.column),
    )
    return Value(result.getField("x"), FLOAT, False)


NUMBER_TEXT_FUNCTIONS: Dict[int, Handler] = {
    id(hex): _in_base("hex", "0x", lambda m: F.lower(F.hex(m)), "8000000000000000"),
    id(oct): _in_base(
        "oct", "0o", lambda m: F.conv(m.cast("string"), 10, 8), "1000000000000000000000"
    ),
    id(bin): _in_base("bin", "0b", F.bin, "1" + "0" * 63),
    id(chr): _chr,
    id(ord): _ord,
}

INT_METHODS: Dict[str, MethodHandler] = {"bit_length": _bit_length}
FLOAT_METHODS: Dict[str, MethodHandler] = {"is_integer": _is_integer}
