"""Error messages in the caller's words: Spark's "Did you mean" lists name what the caller can
write (``S.state("f")``, key and value columns), never the state function's internal columns;
a restart with a changed state schema gives no advice to turn the schema check off; a local
server's errors come without the JVM stack trace unless asked for."""
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from errors import assert_still_serving, words
from specs import running_count
from streams import Stream

pytestmark = pytest.mark.sessions("connect", "classic")


def message_of(build) -> str:
    with pytest.raises(PySparkException) as info:
        build().collect()
    return str(info.value)


def totals(**functions) -> StateSpec:
    functions.setdefault(
        "update", F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n"),
                           F.coalesce(S.state("total"), F.lit(0)).alias("total")))
    functions.setdefault("emit", F.struct(F.col("word"), S.new_state("n").alias("n")))
    return StateSpec.function("n BIGINT, total BIGINT", **functions)


def suggestions(message: str) -> str:
    assert "Did you mean one of the following?" in message, message
    return message.split("Did you mean one of the following?", 1)[1]


@pytest.mark.parametrize("name, first", [("n", 'S.state("n")'), ("totl", 'S.state("total")')])
def test_a_state_field_named_as_a_column_is_suggested_as_the_caller_writes_it(spark, name,
                                                                                first):
    spec = totals(update=F.struct(F.col(name).alias("n"), F.lit(0).alias("total")))
    message = message_of(lambda: map_with_state(words(spark), key="word", spec=spec))
    proposed = suggestions(message)
    assert proposed.lstrip().startswith(f"[{first}, "), message
    assert "S.new_state(" not in proposed  # not in scope in update
    assert "__mws_" not in message
    assert_still_serving(spark)


def test_emit_suggests_new_state_and_the_input_columns(spark):
    spec = totals(emit=F.struct(F.col("wrd"), F.col("total")))
    message = message_of(lambda: map_with_state(words(spark), key="word", spec=spec))
    proposed = suggestions(message)
    assert "`word`" in proposed and 'S.new_state("n")' in proposed and "__mws_" not in message


def test_a_group_function_suggests_in_the_callers_words(spark):
    spec = totals(update=F.struct(F.count("*").alias("n"), F.sum("xx").alias("total")))
    message = message_of(lambda: map_groups_with_state(words(spark), key="word", spec=spec))
    assert "`x`" in suggestions(message) and "__mws_" not in message


def test_a_changed_state_schema_gives_no_advice_to_skip_the_check(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    stream.add("a")
    with pytest.raises(PySparkException) as info:
        stream.run_available_now(
            map_with_state(stream.read(spark), "word", running_count("n INT")))
    message = str(info.value)
    assert "[MAPWITHSTATE_STATE_SCHEMA_CHANGED]" in message, message
    assert "now keys struct<word:string> and state struct<n:int>" in message
    assert "stateSchemaCheck" not in message and "schema validation" not in message
    assert stream.results(spark) == [("a", 1)]


@pytest.mark.connect_only
def test_errors_come_without_the_jvm_stack_trace_unless_asked_for(spark):
    def error():
        return message_of(lambda: map_with_state(words(spark), key="word",
                                                 spec=running_count().num_partitions(0)))

    concise = error()
    assert concise == ("[MAPWITHSTATE_INVALID_ARGUMENT] num_partitions must be a positive "
                       "number, got 0"), concise
    spark.conf.set("spark.sql.connect.serverStacktrace.enabled", "true")
    try:
        verbose = error()
    finally:
        spark.conf.set("spark.sql.connect.serverStacktrace.enabled", "false")
    assert "JVM stacktrace" in verbose and "io.mapwithstate" in verbose
