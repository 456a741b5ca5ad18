"""The client's DDL parser (mapwithstate.ddl) against Spark's own: every schema string below is
parsed by both — Spark's by the real StructType.fromDDL on a classic session, the function the
plugin parses a state_schema with — and both must give the same StructType or both refuse it.
A state_schema that does not parse is refused by StateSpec.function itself, naming the
position, the offending word and what was expected there."""
import json

import pytest
from pyspark.sql.types import StructType

from mapwithstate import StateSpec
from mapwithstate.ddl import parse_struct

ACCEPTED_OR_REFUSED = [
    # Names: plain, keywords, backquoted (with a doubled backquote), starting with a digit.
    "n BIGINT", "n bigint, s string", "select INT, from INT, table INT, int INT",
    "`a b` INT, `x``y` INT", "1a INT", "123 INT", "1e5 INT", "a-b INT", "über INT",
    "n: INT", "  n   INT  ", "n INT;", "n INT,", "n INT,, m INT", "", "   ",
    # Every simple type and its aliases.
    "n TINYINT, b BYTE, s SMALLINT, h SHORT, i INTEGER, l LONG, f REAL, f2 FLOAT, d DOUBLE",
    "b BOOLEAN, d DATE, t TIMESTAMP, tn TIMESTAMP_NTZ, tl TIMESTAMP_LTZ",
    "t TIMESTAMP WITHOUT TIME ZONE, u TIMESTAMP WITH LOCAL TIME ZONE",
    "b BINARY, v VOID, i INTERVAL, vv VARIANT, s STRING",
    "t TIME, t3 TIME(3), t0 TIME(0) WITHOUT TIME ZONE, tw TIME WITHOUT TIME ZONE",
    "c CHAR(5), v VARCHAR(10), cc CHARACTER(3), c0 CHAR(0)", "c CHAR", "v VARCHAR",
    "d DECIMAL, d2 DECIMAL(10), d3 DECIMAL(10,2), d4 DEC(5,1), d5 NUMERIC(38, 38)",
    "d DECIMAL( 10 , 2 ), z DECIMAL(0)", "d DECIMAL(39)", "d DECIMAL(5,6)", "d DECIMAL(1,2,3)",
    "d DECIMAL(2147483648)", "n INT(3)", "n BIGNT", "n INTEGER_", "n Array<Int>",
    # Intervals.
    "i INTERVAL YEAR, j INTERVAL YEAR TO MONTH, k INTERVAL MONTH",
    "i INTERVAL DAY, j INTERVAL DAY TO SECOND, k INTERVAL HOUR TO MINUTE, l INTERVAL SECOND",
    "i INTERVAL MONTH TO MONTH", "i INTERVAL MINUTE TO HOUR", "i INTERVAL YEAR TO DAY",
    # Nested types.
    "a STRUCT<x: INT, y STRING>", "a STRUCT<>", "a STRUCT< >", "a ARRAY<STRUCT<x:INT>>",
    "a MAP<STRING,ARRAY<INT>>", "a MAP<STRING, MAP<STRING, INT>>", "a ARRAY<ARRAY<INT>>",
    "a STRUCT<a:STRUCT<b:INT>>", "a STRUCT<`x y`: INT>", "a STRUCT<x INT, x INT>",
    "ARRAY<INT>", "a ARRAY", "a ARRAY<>", "a MAP<INT>", "a STRUCT", "a ARRAY<INT NOT NULL>",
    "a STRUCT<x: INT NOT NULL COMMENT 'y'>",
    # NOT NULL and COMMENT.
    "n INT NOT NULL", "n INT NOT NULL COMMENT 'hi'", "n INT COMMENT \"dq\"",
    "n INT COMMENT 'it''s'", "n INT COMMENT 'a\\nb\\'c'", "n INT COMMENT 'a' 'b'",
    "n LONG COMMENT R'a\\nb'", "n int comment 'x'", "n INT COMMENT NULL", "n INT NULL",
    "n INT !NULL", "n INT NOT", "n INT NOT NULL NOT NULL", "n INT COMMENT 'a' NOT NULL",
    "n INT COMMENT 'open",
    # SQL comments are whitespace.
    "n INT -- comment", "n INT /* c */, m INT", "n INT /* open",
    # Collations and spatial types.
    "s STRING COLLATE UTF8_LCASE", "s STRING COLLATE utf8_lcase", "s STRING COLLATE UNICODE_CI",
    "s STRING COLLATE EN_CI_AI", "s STRING COLLATE UTF8_LCASE_RTRIM", "s STRING COLLATE nope",
    "n STRING COLLATE", "n STRING COLLATE `UTF8_LCASE`",
    "g GEOMETRY(4326), h GEOMETRY(ANY), i GEOMETRY(0)", "g GEOGRAPHY(4326), h GEOGRAPHY(ANY)",
    "g GEOMETRY", "g GEOGRAPHY(3857)", "g GEOMETRY(nope)",
    # Not here: a collation of an ICU locale that does not exist ("en_US": Spark knows en_USA).
    # The client checks a collation's form only and leaves the locale to the server.
]


def spark_parse(spark, ddl):
    """Spark's StructType of ``ddl``, or None when Spark refuses it."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        parsed = spark.sparkContext._jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl)
    except (PySparkException, Py4JJavaError):  # pyspark converts Spark's own errors
        return None
    return StructType.fromJson(json.loads(parsed.json()))


def client_parse(ddl):
    try:
        return parse_struct(ddl)
    except ValueError:
        return None


@pytest.mark.parametrize("ddl", ACCEPTED_OR_REFUSED)
def test_the_client_parses_as_spark_does(classic_spark, ddl):
    expected = spark_parse(classic_spark, ddl)
    assert client_parse(ddl) == expected, (
        f"Spark {'refuses' if expected is None else 'gives ' + expected.json()}")


def test_the_list_has_both_kinds(classic_spark):
    parsed = [spark_parse(classic_spark, ddl) for ddl in ACCEPTED_OR_REFUSED]
    assert sum(p is None for p in parsed) >= 30 and sum(p is not None for p in parsed) >= 30


@pytest.mark.parametrize("ddl, position, found, expected", [
    ("n BIGNT", 2, "'BIGNT' is not a data type", "expected one of ARRAY, BIGINT"),
    ("n INT, m", 8, "found the end of the schema", "expected a data type"),
    ("n INT NOT NUL", 10, "found 'NUL'", "expected NULL after NOT"),
    ("a MAP<STRING INT>", 13, "found 'INT'", "expected ',' and the value type of MAP"),
    ("a STRUCT<x: INT y: INT>", 16, "found 'y'", "expected ',' and another field, or '>'"),
    ("n: INT", 1, "found ':'", "without a colon"),
    ("d DECIMAL(40, 2)", 2, "DECIMAL(40, 2): a decimal's precision is at most 38", ""),
    ("i INTERVAL SECOND TO DAY", 21, "found 'DAY'", "expected one of HOUR, MINUTE, SECOND"),
    ("c VARCHAR", 2, "VARCHAR needs a length: VARCHAR(n)", ""),
    ("n INT COMMENT 'x", 14, "found \"'x\"", "the closing ' of the string"),
])
def test_a_refusal_names_the_position_the_word_and_what_was_expected(
        ddl, position, found, expected):
    with pytest.raises(ValueError) as refused:
        parse_struct(ddl)
    message = str(refused.value)
    assert message.startswith(f"{ddl!r} is not a valid schema: at position {position}, ")
    assert found in message and expected in message


def test_state_spec_function_refuses_a_bad_schema_without_a_session():
    with pytest.raises(ValueError, match=r"^state_schema: 'n BIGNT' is not a valid schema: at "
                                         r"position 2, 'BIGNT' is not a data type"):
        StateSpec.function("n BIGNT")
    assert StateSpec.function("n BIGINT, seen ARRAY<STRING>").state_schema == \
        "n BIGINT, seen ARRAY<STRING>"
