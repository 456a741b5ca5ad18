"""Spark's DDL schema strings (``"n BIGINT, last STRUCT<at: TIMESTAMP, v: DOUBLE>"``), parsed in
the client.

A Spark Connect client has no parser of its own for DDL: a schema string that does not parse
would be refused only when the server plans the query, far from the line that wrote it. This
module parses the grammar Spark's ``StructType.fromDDL`` accepts (its ``singleTableSchema``
rule: ``name type [NOT NULL] [COMMENT 'text']`` fields separated by commas) into the
``StructType`` Spark makes of it, and refuses what Spark refuses with an error naming the
position, the offending word and what was expected::

    >>> from mapwithstate.ddl import parse_struct
    >>> parse_struct("n BIGINT, tags ARRAY<STRING> NOT NULL").simpleString()
    'struct<n:bigint,tags:array<string>>'
    >>> parse_struct("n BIGNT")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 'n BIGNT' is not a valid schema: at position 2, 'BIGNT' is not a data type; ...

What it does not decide, it leaves to the server: whether an ICU collation's locale exists
(``STRING COLLATE en_CI``; its form is checked here) and a spatial type's SRID is checked by
pyspark's own tables. ``TIMESTAMP`` means ``TIMESTAMP_LTZ``, Spark's default for
``spark.sql.timestampType``.
"""

import re
from dataclasses import dataclass
from typing import Callable, Dict, List, NoReturn, Optional

from pyspark.sql import types as T

__all__ = ["parse_struct", "check_struct"]


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "int", "quoted" (a backquoted name), "string", "punct", "number", "end"
    text: str  # the token as written
    value: str  # a word or quoted name as meant; a string literal's content
    position: int


# The lexer's pieces, as Spark's SqlBaseLexer has them (whitespace and both comment forms are
# skipped; a word is letters, digits and underscores; ``<>`` is one token).
_SKIP = re.compile(r"(?:\s+|--[^\n]*|/\*(?:.|\n)*?\*/)+")
_NUMBER = re.compile(
    r"(?:\d+(?:\.\d*)?|\.\d+)(?:E[+-]?\d+)?(?:BD|[LSYDF])?(?![A-Za-z0-9_])", re.IGNORECASE
)
_WORD = re.compile(r"[A-Za-z0-9_]+")
_BACKQUOTED = re.compile(r"`((?:[^`]|``)*)`")
_STRING = re.compile(
    r"""(R?)('(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")""", re.IGNORECASE | re.DOTALL
)
_PUNCT = ("<>", "!=", "<", ">", ",", ":", "(", ")", "-", "!", ";", ".", "=")
_ESCAPES = {
    "0": "\0",
    "b": "\b",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "Z": "\x1a",
    "%": "\\%",
    "_": "\\_",
}

# The simple types, by each name Spark accepts for them.
_SIMPLE: Dict[str, Callable[[], T.DataType]] = {
    "BOOLEAN": T.BooleanType,
    "TINYINT": T.ByteType,
    "BYTE": T.ByteType,
    "SMALLINT": T.ShortType,
    "SHORT": T.ShortType,
    "INT": T.IntegerType,
    "INTEGER": T.IntegerType,
    "BIGINT": T.LongType,
    "LONG": T.LongType,
    "FLOAT": T.FloatType,
    "REAL": T.FloatType,
    "DOUBLE": T.DoubleType,
    "DATE": T.DateType,
    "TIMESTAMP_NTZ": T.TimestampNTZType,
    "TIMESTAMP_LTZ": T.TimestampType,
    "BINARY": T.BinaryType,
    "VOID": T.NullType,
    "INTERVAL": T.CalendarIntervalType,
    "VARIANT": T.VariantType,
}
_DECIMAL = ("DECIMAL", "DEC", "NUMERIC")
_YEAR_MONTH = ("YEAR", "MONTH")
_DAY_TIME = ("DAY", "HOUR", "MINUTE", "SECOND")
_TYPE_NAMES = sorted(
    set(_SIMPLE)
    | set(_DECIMAL)
    | {
        "STRING",
        "CHAR",
        "CHARACTER",
        "VARCHAR",
        "TIMESTAMP",
        "TIME",
        "ARRAY",
        "MAP",
        "STRUCT",
        "GEOMETRY",
        "GEOGRAPHY",
    }
)
# A collation's form: Spark's own (UTF8_BINARY, UTF8_LCASE), UNICODE, or an ICU locale
# (language, optional script and country), with optional case, accent and trim modifiers.
_COLLATION = re.compile(
    r"(?:(UTF8_BINARY|UTF8_LCASE)(_RTRIM)?"
    r"|(UNICODE|[A-Z]{2,3}(?:_[A-Z]{4})?(?:_[A-Z]{2,3})?)((?:_(?:CI|CS|AI|AS|RTRIM))*))",
    re.IGNORECASE,
)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize(text)
        self.at = 0

    # -- tokens -------------------------------------------------------------------------------

    def _tokenize(self, text: str) -> List[_Token]:
        tokens: List[_Token] = []
        i = 0
        while True:
            skip = _SKIP.match(text, i)
            if skip:
                i = skip.end()
            if text.startswith("/*", i):
                self._fail_at(i, "'/*'", "the end of the comment ('*/')")
            if i >= len(text):
                tokens.append(_Token("end", "", "", i))
                return tokens
            string = _STRING.match(text, i)
            if string:
                body = string.group(2)[1:-1]
                value = body if string.group(1) else _unescape(body)
                tokens.append(_Token("string", string.group(0), value, i))
                i = string.end()
                continue
            if text[i] in "'\"":
                self._fail_at(i, repr(text[i : i + 12]), f"the closing {text[i]} of the string")
            if text[i] == "`":
                quoted = _BACKQUOTED.match(text, i)
                if quoted is None:
                    self._fail_at(i, "`", "the closing ` of the name")
                tokens.append(
                    _Token("quoted", quoted.group(0), quoted.group(1).replace("``", "`"), i)
                )
                i = quoted.end()
                continue
            number = _NUMBER.match(text, i)
            if number and not number.group(0).isdigit():
                tokens.append(_Token("number", number.group(0), number.group(0), i))
                i = number.end()
                continue
            word = _WORD.match(text, i)
            if word:
                kind = "int" if word.group(0).isdigit() else "word"
                tokens.append(_Token(kind, word.group(0), word.group(0), i))
                i = word.end()
                continue
            punct = next((p for p in _PUNCT if text.startswith(p, i)), None)
            if punct is None:
                self._fail_at(i, repr(text[i]), "a name, a type or punctuation of a schema")
            tokens.append(_Token("punct", punct, punct, i))
            i += len(punct)

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def _advance(self) -> _Token:
        token = self.token
        self.at += 1
        return token

    def _is_word(self, *words: str) -> bool:
        return self.token.kind == "word" and self.token.value.upper() in words

    def _is_punct(self, *puncts: str) -> bool:
        return self.token.kind == "punct" and self.token.value in puncts

    def _punct(self, punct: str, expected: str) -> None:
        if not self._is_punct(punct):
            self._fail(expected)
        self._advance()

    def _word(self, expected: str, *words: str) -> str:
        if not self._is_word(*words):
            self._fail(expected)
        return self._advance().value.upper()

    def _int(self, expected: str) -> int:
        if self.token.kind != "int":
            self._fail(expected)
        return int(self._advance().value)

    def _fail(self, expected: str) -> NoReturn:
        token = self.token
        found = "the end of the schema" if token.kind == "end" else repr(token.text)
        self._fail_at(token.position, found, expected)

    def _fail_at(self, position: int, found: str, expected: str) -> NoReturn:
        raise ValueError(
            f"{self.text!r} is not a valid schema: at position {position}, found {found}; "
            f"expected {expected}"
        )

    def _refuse(self, token: _Token, problem: str) -> NoReturn:
        raise ValueError(
            f"{self.text!r} is not a valid schema: at position {token.position}, {problem}"
        )

    # -- grammar ------------------------------------------------------------------------------

    def schema(self) -> T.StructType:
        """``field (',' field)*`` and the end: Spark's ``singleTableSchema``."""
        fields = [self._field(colon=False)]
        while self._is_punct(","):
            self._advance()
            fields.append(self._field(colon=False))
        if self.token.kind != "end":
            self._fail("',' and another field, NOT NULL, COMMENT or the end of the schema")
        return T.StructType(fields)

    def _field(self, colon: bool) -> T.StructField:
        """``name [':'] type [NOT NULL] [COMMENT 'text']``; the colon only inside STRUCT<>."""
        token = self.token
        if token.kind not in ("word", "quoted"):
            self._fail("a field name")
        name = self._advance().value
        if self._is_punct("-") and token.kind == "word":
            self._refuse(token, f"the name '{name}-…' needs backquotes (`{name}-…`)")
        if self._is_punct(":"):
            if not colon:
                self._fail("a data type (a top-level field is 'name TYPE', without a colon)")
            self._advance()
        data_type = self._data_type()
        nullable = True
        if self._is_word("NOT") or self._is_punct("!"):
            self._advance()
            self._word("NULL after NOT", "NULL")
            nullable = False
        metadata = {}
        if self._is_word("COMMENT"):
            self._advance()
            metadata["comment"] = self._comment()
        return T.StructField(name, data_type, nullable, metadata)

    def _comment(self) -> str:
        if self.token.kind != "string":
            self._fail("a quoted comment after COMMENT")
        parts = []
        while self.token.kind == "string":
            parts.append(self._advance().value)
        return "".join(parts)

    def _data_type(self) -> T.DataType:
        token = self.token
        if token.kind != "word":
            self._fail("a data type")
        name = token.value.upper()
        self._advance()
        if name == "ARRAY" and self._is_punct("<"):
            self._advance()
            element = self._data_type()
            self._punct(">", "'>' closing ARRAY<")
            return T.ArrayType(element, True)
        if name == "MAP" and self._is_punct("<"):
            self._advance()
            key = self._data_type()
            self._punct(",", "',' and the value type of MAP<key, value>")
            value = self._data_type()
            self._punct(">", "'>' closing MAP<")
            return T.MapType(key, value, True)
        if name == "STRUCT" and self._is_punct("<", "<>"):
            if self._advance().value == "<>":
                return T.StructType([])
            fields = []
            if not self._is_punct(">"):
                fields.append(self._field(colon=True))
                while self._is_punct(","):
                    self._advance()
                    fields.append(self._field(colon=True))
            self._punct(">", "',' and another field, or '>' closing STRUCT<")
            return T.StructType(fields)
        if name == "INTERVAL" and self._is_word(*_YEAR_MONTH, *_DAY_TIME):
            return self._interval()
        if name == "TIMESTAMP" and self._is_word("WITH", "WITHOUT"):
            local = self._advance().value.upper() == "WITH"
            if local:
                self._word("LOCAL after TIMESTAMP WITH", "LOCAL")
            self._word("TIME ZONE", "TIME")
            self._word("ZONE after TIME", "ZONE")
            return T.TimestampType() if local else T.TimestampNTZType()
        if name == "STRING" and self._is_word("COLLATE"):
            self._advance()
            return T.StringType(self._collation())
        params = self._params() if self._is_punct("(") else None
        if name == "TIME" and len(params or [None]) == 1 and self._is_word("WITHOUT"):
            self._advance()
            self._word("TIME ZONE after WITHOUT", "TIME")
            self._word("ZONE after TIME", "ZONE")
        return self._simple(token, name, params)

    def _params(self) -> List[_Token]:
        self._advance()
        if self.token.kind not in ("int", "word"):
            self._fail("a number")
        params = [self._advance()]
        while self._is_punct(","):
            self._advance()
            if self.token.kind != "int":
                self._fail("a number")
            params.append(self._advance())
        self._punct(")", "',' and a number, or ')'")
        return params

    def _simple(self, token: _Token, name: str, params: Optional[List[_Token]]) -> T.DataType:
        """A type named by one word, with its parameters in parentheses if it takes any."""
        numbers = [int(p.value) for p in params or [] if p.kind == "int"]
        words = [p for p in params or [] if p.kind == "word"]
        written = token.text + (f"({', '.join(p.text for p in params)})" if params else "")
        if words and name not in ("GEOMETRY", "GEOGRAPHY"):
            self._refuse(words[0], f"found {words[0].text!r}; expected a number")
        if params is None and name in _SIMPLE:
            return _SIMPLE[name]()
        if params is None and name in ("STRING", "TIMESTAMP", "TIME"):
            return {"STRING": T.StringType, "TIMESTAMP": T.TimestampType, "TIME": T.TimeType}[
                name
            ]()
        if name == "TIME" and len(numbers) == 1:
            return T.TimeType(numbers[0])
        if name in _DECIMAL and params is None:
            return T.DecimalType(10, 0)
        if name in _DECIMAL and len(numbers) in (1, 2):
            precision, scale = numbers[0], numbers[1] if len(numbers) == 2 else 0
            if precision > 38:
                self._refuse(token, f"{written}: a decimal's precision is at most 38")
            if scale > precision:
                self._refuse(token, f"{written}: a decimal's scale cannot exceed its precision")
            return T.DecimalType(precision, scale)
        if name in ("CHAR", "CHARACTER", "VARCHAR"):
            if params is None:
                self._refuse(token, f"{token.text} needs a length: {token.text}(n)")
            if len(numbers) == 1:
                return T.VarcharType(numbers[0]) if name == "VARCHAR" else T.CharType(numbers[0])
        if name in ("GEOMETRY", "GEOGRAPHY") and params is not None and len(params) == 1:
            return self._spatial(token, name, params[0])
        if name in ("ARRAY", "MAP", "STRUCT") and params is None:
            shape = {
                "ARRAY": "ARRAY<type>",
                "MAP": "MAP<key, value>",
                "STRUCT": "STRUCT<name: type, ...>",
            }[name]
            self._refuse(token, f"{token.text} needs its element types: {shape}")
        if name in _TYPE_NAMES or name in ("GEOMETRY", "GEOGRAPHY"):
            self._refuse(token, f"{written} is not a data type (wrong parameters)")
        self._refuse(
            token,
            f"{token.text!r} is not a data type; expected one of {', '.join(_TYPE_NAMES)}",
        )

    def _spatial(self, token: _Token, name: str, param: _Token) -> T.DataType:
        srid = param.value.upper() if param.kind == "word" else int(param.value)
        if param.kind == "word" and srid != "ANY":
            self._refuse(param, f"found {param.text!r}; expected an SRID number or ANY")
        try:
            return T.GeometryType(srid) if name == "GEOMETRY" else T.GeographyType(srid)
        except Exception:  # pyspark's own check of the SRID, by its error class
            self._refuse(param, f"{srid} is not an SRID {token.text} supports")

    def _interval(self) -> T.DataType:
        start = self._advance().value.upper()
        fields = _YEAR_MONTH if start in _YEAR_MONTH else _DAY_TIME
        end = start
        if self._is_word("TO"):
            self._advance()
            end_token = self.token
            end = self._word(f"one of {', '.join(fields[1:])} after TO", *fields[1:])
            if fields.index(end) <= fields.index(start):
                self._refuse(
                    end_token,
                    f"INTERVAL {start} TO {end}: {end} must come after "
                    f"{start} in {', '.join(fields)}",
                )
        if fields is _YEAR_MONTH:
            return T.YearMonthIntervalType(fields.index(start), fields.index(end))
        return T.DayTimeIntervalType(fields.index(start), fields.index(end))

    def _collation(self) -> str:
        token = self.token
        if token.kind not in ("word", "quoted"):
            self._fail("a collation name after COLLATE")
        name = self._advance().value
        match = _COLLATION.fullmatch(name)
        if match is None:
            self._refuse(
                token,
                f"{name!r} is not a collation name (such as UTF8_LCASE, UNICODE_CI or en_CI_AI)",
            )
        spark, spark_trim, icu, modifiers = match.groups()
        if spark:
            return spark.upper() + (spark_trim or "").upper()
        parts = icu.split("_")
        if icu.upper() == "UNICODE":
            locale = "UNICODE"
        else:
            locale = "_".join(
                [parts[0].lower()]
                + [p.capitalize() if len(p) == 4 else p.upper() for p in parts[1:]]
            )
        return locale + (modifiers or "").upper()


def _unescape(body: str) -> str:
    """A string literal's content as Spark's ``unescapeSQLString`` reads it."""
    out: List[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", body[i + 2 : i + 6]):
                out.append(chr(int(body[i + 2 : i + 6], 16)))
                i += 6
                continue
            if re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(chr(int(body[i + 1 : i + 4], 8)))
                i += 4
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        if c in "'\"" and body[i + 1 : i + 2] == c:
            out.append(c)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_struct(ddl: str) -> T.StructType:
    """The ``StructType`` Spark's ``StructType.fromDDL`` makes of ``ddl``.

    :raises ValueError: ``ddl`` is not a schema Spark accepts; the message names the position,
        the offending word and what was expected there.
    """
    if not isinstance(ddl, str):
        raise TypeError(f"a DDL schema must be a string, got {type(ddl).__name__}")
    return _Parser(ddl).schema()


def check_struct(ddl: str, what: str) -> None:
    """Refuses ``ddl`` unless it parses as a schema, the error naming ``what`` it is for."""
    try:
        parse_struct(ddl)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
