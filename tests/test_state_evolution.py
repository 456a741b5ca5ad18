"""A streaming query restarted with a changed state schema: the refusal at start() names each
field the schema-evolution rules cannot carry over, with its old and new type and why, for both
operators and both backends; the checkpoint stays usable by the unchanged query.
"""
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from specs import group_count, running_count
from streams import Stream, counts

pytestmark = [pytest.mark.sessions("connect", "classic"), pytest.mark.backends("rocksdb")]


def group_running_count(state_schema="count BIGINT"):
    """A group function counting each key's records, emitting (word, count)."""
    return StateSpec.function(
        state_schema,
        update=F.struct(group_count().alias("count")),
        emit=F.struct(F.col("word"), S.new_state("count").cast("string").alias("n")))


def nested_count(n_type):
    """Counts into the state's struct field s.n, of type `n_type` (and keeps a tag beside it)."""
    n = (F.coalesce(S.state("s").getField("n"), F.lit(0)) + 1).cast(n_type)
    return StateSpec.function(
        f"s STRUCT<n: {n_type}, tag: STRING>",
        update=F.struct(F.struct(n.alias("n"), F.lit("t").alias("tag")).alias("s")),
        emit=F.struct(F.col("word"), S.new_state("s").getField("n").cast("bigint").alias("n")))


def refused_restart(spark, tmp_path, operator, before, after, restarted=lambda df: df):
    """Runs `operator` with spec `before` over one micro-batch, then restarts it with spec
    `after` (over the input as `restarted` changes it); returns the stream and the message of
    the error the restart fails with."""
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(operator(stream.read(spark), "word", before))
    stream.add("a")
    with pytest.raises(PySparkException) as failure:
        stream.run_available_now(operator(restarted(stream.read(spark)), "word", after))
    message = str(failure.value)
    assert "[MAPWITHSTATE_STATE_SCHEMA_CHANGED]" in message, message
    assert "read_state and StateSpec.initial_state" in message, message
    return stream, message


def test_a_narrowed_field_is_named_with_both_types(spark, tmp_path):
    stream, message = refused_restart(spark, tmp_path, map_with_state, running_count(),
                                      running_count("n INT"))
    assert "the checkpoint's state is struct<n:bigint>" in message, message
    assert "n: BIGINT -> INT (not a widening" in message, message
    # The unchanged query continues from the untouched checkpoint.
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    assert stream.results(spark) == counts(("a", 1), ("b", 1), ("a", 2))


def test_a_likely_rename_names_both_fields(spark, tmp_path):
    renamed = StateSpec.function(
        "total BIGINT",
        update=F.struct((F.coalesce(S.state("total"), F.lit(0)) + F.count("*")).alias("total")),
        emit=F.struct(F.col("word"), S.new_state("total").cast("string").alias("n")))
    _, message = refused_restart(spark, tmp_path, map_groups_with_state,
                                 group_running_count(), renamed)
    assert ("total: (absent) -> BIGINT (added while count of the same type is dropped: a "
            "likely rename") in message, message
    assert "sets total from the old state's count" in message, message


def test_a_group_functions_type_change_is_refused(spark, tmp_path):
    _, message = refused_restart(spark, tmp_path, map_groups_with_state,
                                 group_running_count(), group_running_count("count STRING"))
    assert "count: BIGINT -> STRING (not a widening" in message, message


def test_a_nested_change_names_its_path(spark, tmp_path):
    _, message = refused_restart(spark, tmp_path, map_with_state, nested_count("BIGINT"),
                                 nested_count("SMALLINT"))
    assert "s.n: BIGINT -> SMALLINT (not a widening" in message, message


def test_a_changed_key_is_named(spark, tmp_path):
    _, message = refused_restart(spark, tmp_path, map_with_state, running_count(),
                                 running_count(),
                                 lambda df: df.withColumn("word", F.length("word")))
    assert "the key columns were struct<word:string> (keys cannot change)" in message, message


def pair_count(*order):
    """Counts each key's records in `a` and keeps `b` at ten times that: two BIGINT fields, in
    the state in `order`."""
    n = F.coalesce(S.state("a"), F.lit(0)) + 1
    fields = {"a": n, "b": n * 10}
    return StateSpec.function(
        ", ".join(f"{name} BIGINT" for name in order),
        update=F.struct(*[fields[name].alias(name) for name in order]),
        emit=F.struct(F.col("word"), S.new_state("a").alias("n")))


def test_fields_reordered_in_place_are_not_read_by_position(spark, tmp_path):
    # Spark's own check matches fields by position: a swap of two BIGINTs passes it, and the
    # restarted query would read b's values as a. It is refused instead.
    stream, message = refused_restart(spark, tmp_path, map_with_state, pair_count("a", "b"),
                                      pair_count("b", "a"))
    assert ("the checkpoint's state is struct<a:bigint,b:bigint>, and a restart does not "
            "convert the state to a changed schema") in message, message
    stream.run_available_now(map_with_state(stream.read(spark), "word", pair_count("a", "b")))
    assert stream.results(spark) == counts(("a", 1), ("b", 1), ("a", 2))


def test_with_sparks_schema_check_off_a_swap_is_read_by_position_as_spark_reads_it(
        spark, tmp_path):
    # The session's opt-out of Spark's schema check (spark.sql.streaming.stateStore.
    # stateSchemaCheck) turns this check off too: the swapped fields are read by position.
    stream = Stream(str(tmp_path))
    stream.add("a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", pair_count("a", "b")))
    stream.add("a")
    spark.conf.set("spark.sql.streaming.stateStore.stateSchemaCheck", "false")
    try:
        stream.run_available_now(map_with_state(stream.read(spark), "word",
                                                pair_count("b", "a")))
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.stateSchemaCheck")
    # a was stored as (a=1, b=10); read as (b, a), a is 10, and the record makes it 11.
    assert stream.results(spark) == counts(("a", 1), ("a", 11))
