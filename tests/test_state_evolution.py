"""A streaming query restarted with a changed state schema: a change the schema-evolution rules
allow carries every key's state over (converted once, in the first micro-batch after the
restart, timers and idle clocks kept), and any other is refused at start() naming each field
with its old and new type and why; both operators, both backends. The checkpoint stays usable
by the unchanged query.
"""
import json
import os

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import (StateSpec, map_groups_with_state, map_with_state, read_state,
                          read_state_changes)
from mapwithstate import functions as S
from checkpoint_fixtures import operator_metadata
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


def test_fields_reordered_in_place_are_matched_by_name(spark, tmp_path):
    # Spark's own check matches fields by position: a swap of two BIGINTs passes it, and would
    # read b's values as a. The restart converts the state by name instead.
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(map_with_state(stream.read(spark), "word", pair_count("a", "b")))
    stream.add("a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", pair_count("b", "a")))
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


# Carried over: each allowed change continues with every key's state converted.

def history(stream, operator=1000):
    """The (from_version, state type JSON) entries of the checkpoint's schema history; checks
    that the checkpoint's format says whether it has one (2 with, 1 without: a plugin that
    knows no history refuses a converted checkpoint rather than misread it)."""
    path = os.path.join(stream.checkpoint, "state", str(operator), "_schemas")
    _, metadata = operator_metadata(stream.checkpoint, operator)
    if not os.path.exists(path):
        assert metadata["formatVersion"] == "1", metadata
        return []
    assert metadata["formatVersion"] == "2", metadata
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0] == "v1" and lines[-1].startswith("crc32 "), lines
    return [(int(v), json.loads(t)) for v, t in (line.split(" ", 1) for line in lines[1:-1])]


def tagged_count(state_schema):
    """Counts each key's records in n, with the field `tag` (when the schema has it) set on a
    key's first call in the new schema: "old" for a key whose state came from before the
    change (n set, tag null), "new" for a key that had none."""
    n = F.coalesce(S.state("n"), F.lit(0)) + 1
    fields = [n.cast(state_schema.split("n ")[1].split(",")[0]).alias("n")]
    if "tag" in state_schema:
        fields.append(F.coalesce(S.state("tag"), F.when(S.state("n").isNotNull(), "old")
                                 .otherwise("new")).alias("tag"))
    return StateSpec.function(
        state_schema, update=F.struct(*fields),
        emit=F.struct(F.col("word"), S.new_state("n").cast("bigint").alias("n")))


def state_of(spark, stream, batch_id=None):
    """read_state as {key: {field: value}} without the partition and times."""
    rows = read_state(spark, stream.checkpoint, batch_id=batch_id).collect()
    return {r["word"]: {k: v for k, v in r.asDict().items()
                        if k not in ("word", "partition", "last_updated", "timeout_at")}
            for r in rows}


def test_an_added_field_is_null_for_old_keys_and_the_counts_go_on(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(map_with_state(stream.read(spark), "word",
                                            tagged_count("n INT")))
    stream.add("a", "c")
    after = tagged_count("n BIGINT, tag STRING")  # INT widened, a field added
    stream.run_available_now(map_with_state(stream.read(spark), "word", after))
    assert stream.results(spark) == counts(("a", 1), ("b", 1), ("a", 2), ("c", 1))
    # The history names the new schema from the state version the restart's batch made.
    assert [v for v, _ in history(stream)] == [2]
    # Each batch read in its own schema: before the change, and after it.
    assert state_of(spark, stream, batch_id=0) == {"a": {"n": 1}, "b": {"n": 1}}
    assert state_of(spark, stream) == {"a": {"n": 2, "tag": "old"},
                                       "b": {"n": 1, "tag": None},
                                       "c": {"n": 1, "tag": "new"}}
    # Restarted again in the same schema: nothing to convert, the counts go on.
    stream.add("a", "b")
    stream.run_available_now(map_with_state(stream.read(spark), "word", after))
    assert stream.results(spark) == counts(("a", 1), ("b", 1), ("a", 2), ("c", 1), ("a", 3),
                                           ("b", 2))
    assert [v for v, _ in history(stream)] == [2]
    # The converting batch (1) wrote the whole state: a change feed starts after it.
    with pytest.raises(Exception, match="the oldest batch whose changes are readable is 2"):
        read_state_changes(spark, stream.checkpoint, start_batch=0).collect()
    changes = read_state_changes(spark, stream.checkpoint, start_batch=2).collect()
    assert sorted((r["word"], r["n"], r["tag"]) for r in changes) == [
        ("a", 3, "old"), ("b", 2, "old")]


def collections_count(n_type, order):
    """A group function counting each key's records into four places of the state (n, a
    struct's field, an array's element and a map's value), all of type `n_type`, the state's
    fields in `order`; emits (word, count)."""
    n = (F.coalesce(S.state("n"), F.lit(0)) + F.count("*")).cast(n_type)
    fields = {
        "n": (f"n {n_type}", n),
        "s": (f"s STRUCT<tag: STRING, c: {n_type}>",
              F.struct(F.lit("t").alias("tag"), n.alias("c"))),
        "xs": (f"xs ARRAY<{n_type}>", F.array(n)),
        "m": (f"m MAP<STRING, {n_type}>", F.create_map(F.lit("k"), n)),
    }
    return StateSpec.function(
        ", ".join(fields[f][0] for f in order),
        update=F.struct(*[fields[f][1].alias(f) for f in order]),
        emit=F.struct(F.col("word"), (S.new_state("s").getField("c") + S.new_state("xs")[0]
                                      + S.new_state("m")["k"] - 2 * S.new_state("n"))
                      .cast("bigint").alias("n")))


@pytest.mark.connect_only  # classic plans through the same JVM code
def test_a_group_function_widens_nested_fields_and_reorders(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "a", "b")
    stream.run_available_now(map_groups_with_state(
        stream.read(spark), "word", collections_count("INT", ["n", "s", "xs", "m"])))
    stream.add("a", "b")
    # Every count widened: a struct's field, an array's elements, a map's values; reordered.
    stream.run_available_now(map_groups_with_state(
        stream.read(spark), "word", collections_count("BIGINT", ["m", "xs", "s", "n"])))
    assert stream.results(spark) == counts(("a", 2), ("b", 1), ("a", 3), ("b", 2))


@pytest.mark.connect_only  # classic plans through the same JVM code
def test_a_dropped_field_goes_and_the_rest_goes_on(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    noted = StateSpec.function(
        "note STRING, count BIGINT",
        update=F.struct(F.lit("x").alias("note"), group_count().alias("count")),
        emit=F.struct(F.col("word"), S.new_state("count").cast("string").alias("n")))
    stream.run_available_now(map_groups_with_state(stream.read(spark), "word", noted))
    stream.add("a")
    stream.run_available_now(map_groups_with_state(
        stream.read(spark), "word", group_running_count()))
    assert sorted(stream.results(spark, "word STRING, n STRING")) == sorted(
        [("a", "1"), ("b", "1"), ("a", "2")])


def timed_count(state_schema):
    """Counts each key's records (n, of the schema's type) with an event-time timer 10 s after
    its latest record; a key timing out emits (word, 1000 + n) and is removed."""
    timing_out = S.is_timing_out()
    n_type = "INT" if "n INT" in state_schema else "BIGINT"
    latest = F.greatest(F.coalesce(S.state("latest"), F.col("event")), F.col("event"))
    values = {"n": (F.coalesce(S.state("n"), F.lit(0)) + 1).cast(n_type), "latest": latest,
              "tag": F.lit("t")}
    order = [field.split()[0] for field in state_schema.split(", ")]
    return StateSpec.function(
        state_schema,
        update=F.when(~timing_out, F.struct(*[values[f].alias(f) for f in order])),
        remove=timing_out,
        emit=F.struct(F.col("word"), F.when(timing_out, 1000 + S.state("n"))
                      .otherwise(S.new_state("n")).cast("bigint").alias("n")),
        timeout_at=F.when(~timing_out, S.new_state("latest") + F.expr("INTERVAL 10 SECONDS")),
    ).timeout_domain("event_time")


@pytest.mark.connect_only  # classic plans through the same JVM code
def test_timers_set_before_the_change_fire_after_it(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add_events(("a", 100), ("b", 104))
    stream.run_available_now(map_with_state(stream.read_events(spark), "word",
                                            timed_count("n INT, latest TIMESTAMP")))
    timers = {r["word"]: r["timeout_at"] for r in read_state(spark, stream.checkpoint).collect()}
    # The watermark passes a's timer (110 s) but not b's (114 s): a fires after the change.
    stream.add_events(("c", 117))
    after = timed_count("latest TIMESTAMP, n BIGINT, tag STRING")
    stream.run_available_now(map_with_state(stream.read_events(spark), "word", after))
    kept = {r["word"]: r["timeout_at"] for r in read_state(spark, stream.checkpoint).collect()}
    assert kept["b"] == timers["b"]
    stream.add_events(("c", 130))
    stream.run_available_now(map_with_state(stream.read_events(spark), "word", after))
    assert stream.results(spark) == counts(("a", 1), ("b", 1), ("c", 1), ("a", 1001),
                                           ("c", 2), ("b", 1001))


@pytest.mark.connect_only  # classic plans through the same JVM code
def test_idle_clocks_are_kept(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(map_with_state(stream.read(spark), "word",
                                            tagged_count("n BIGINT").timeout("1 hour")))
    before = {r["word"]: r["last_updated"] for r in
              read_state(spark, stream.checkpoint).collect()}
    stream.add("a")
    stream.run_available_now(map_with_state(stream.read(spark), "word",
                                            tagged_count("n BIGINT, tag STRING")
                                            .timeout("1 hour")))
    after = {r["word"]: r["last_updated"] for r in
             read_state(spark, stream.checkpoint).collect()}
    assert after["b"] == before["b"] and after["a"] > before["a"]


@pytest.mark.connect_only  # classic plans through the same JVM code
def test_a_restart_that_fails_before_its_first_commit_leaves_the_old_query_going(
        spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "c", "d", "e", "f")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    stream.add("a", "b", "c", "d", "e", "boom")
    failing = StateSpec.function(
        "n BIGINT, tag STRING",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n"),
                        F.when(F.col("word") == "boom", F.raise_error(F.lit("boom")))
                        .otherwise(F.lit("x")).alias("tag")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    with pytest.raises(Exception, match="boom"):
        stream.run_available_now(map_with_state(stream.read(spark), "word", failing))
    # The old query restarts on the checkpoint and runs the batch in the old schema.
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    assert history(stream) == []
    assert sorted(stream.results(spark)) == sorted(
        [(w, 1) for w in "abcdef"] + [(w, 2) for w in "abcde"] + [("boom", 1)])


# Migrations: StateSpec.migrate makes the new state from the old, once per key.

def migrated_count():
    """The state was "n BIGINT" (running_count): renamed to total, doubled recomputed from it,
    and migrations counting how often the migration ran on the key."""
    total = F.coalesce(S.state("total"), F.lit(0)) + 1
    return StateSpec.function(
        "total BIGINT, doubled BIGINT, migrations INT",
        update=F.struct(total.alias("total"), (total * 2).alias("doubled"),
                        S.state("migrations").alias("migrations")),
        emit=F.struct(F.col("word"), S.new_state("total").alias("n")),
    ).migrate(F.struct(S.state("n").alias("total"), (S.state("n") * 2).alias("doubled"),
                       F.lit(1).alias("migrations")))


def test_a_migration_renames_and_recomputes_once_over_three_restarts(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    for words in (["a"], ["a", "b"], ["c"]):
        stream.add(*words)
        stream.run_available_now(map_with_state(stream.read(spark), "word", migrated_count()))
        state = state_of(spark, stream)
        assert {k: v["migrations"] for k, v in state.items()} == \
            {"a": 1, "b": 1, **({"c": None} if "c" in state else {})}
        assert all(v["doubled"] == 2 * v["total"] for v in state.values())
    assert stream.results(spark) == counts(("a", 1), ("b", 1), ("a", 2), ("a", 3), ("b", 2),
                                           ("c", 1))
    assert [v for v, _ in history(stream)] == [2]


@pytest.mark.connect_only  # classic plans through the same JVM code
def test_a_failing_migration_names_the_key_and_the_old_query_goes_on(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    stream.add("a")
    failing = tagged_count("n BIGINT, tag STRING").migrate(F.struct(
        F.when(F.col("word") == "b", F.raise_error(F.lit("no tag for b")))
        .otherwise(S.state("n")).alias("n"), F.lit("t").alias("tag")))
    with pytest.raises(Exception) as failure:
        stream.run_available_now(map_with_state(stream.read(spark), "word", failing))
    message = str(failure.value)
    assert "[MAPWITHSTATE_MIGRATION_FAILED] migrate failed on the key (word=b)" in message
    assert "no tag for b" in message
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    assert stream.results(spark) == counts(("a", 1), ("b", 1), ("a", 2))
    assert history(stream) == []


@pytest.mark.connect_only  # classic plans through the same JVM code
def test_a_migration_naming_a_field_the_old_state_lacks_lists_its_fields(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    stream.add("a")
    wrong = tagged_count("n BIGINT, tag STRING").migrate(F.struct(
        S.state("count").alias("n"), F.lit("t").alias("tag")))
    with pytest.raises(Exception) as failure:
        stream.run_available_now(map_with_state(stream.read(spark), "word", wrong))
    message = str(failure.value)
    assert "migrate" in message and "count" in message, message
    assert "migrate reads the state the checkpoint holds, struct<n:bigint> (its fields: n)" \
        in message, message


def profile(state_schema, fields):
    """Keeps, per key, the fields `fields` (name -> Column over the key's record) in a state of
    `state_schema`; emits (word, n) with n the key's record count, kept in the field n."""
    return StateSpec.function(
        state_schema, update=F.struct(*[c.alias(f) for f, c in fields.items()]),
        emit=F.struct(F.col("word"), S.new_state("n").cast("bigint").alias("n")))


def test_an_old_batch_reads_in_the_current_schema_when_asked(spark, tmp_path):
    """Three schemas: `old` dropped by the first change and added again (as another type) by
    the second, `n` widened twice, `s` (a struct) gaining a field. Asked in the current schema,
    a batch of the first reads as the restarts converted it: `old` null (it was dropped in
    between, not widened), the rest widened and filled."""
    count = F.coalesce(S.state("n"), F.lit(0)) + 1
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    first = profile("n TINYINT, old INT, s STRUCT<x: INT>", {
        "n": count.cast("tinyint"), "old": F.lit(7), "s": F.struct(F.lit(1).alias("x"))})
    stream.run_available_now(map_with_state(stream.read(spark), "word", first))
    stream.add("a")
    second = profile("s STRUCT<x: BIGINT, y: STRING>, n INT", {
        "s": F.struct(F.lit(2).cast("bigint").alias("x"), F.lit("y").alias("y")),
        "n": count.cast("int")})
    stream.run_available_now(map_with_state(stream.read(spark), "word", second))
    stream.add("c")
    third = profile("n BIGINT, s STRUCT<x: BIGINT, y: STRING>, old BIGINT", {
        "n": count, "s": S.state("s"), "old": F.lit(9).cast("bigint")})
    stream.run_available_now(map_with_state(stream.read(spark), "word", third))
    assert [v for v, _ in history(stream)] == [2, 3]

    def read(batch_id, **kw):
        df = read_state(spark, stream.checkpoint, batch_id=batch_id, **kw)
        return df.columns, {r["word"]: r.asDict(recursive=True) for r in df.collect()}

    columns, own = read(0)
    assert columns[:4] == ["word", "n", "old", "s"]
    assert own["a"]["n"] == 1 and own["a"]["old"] == 7 and own["a"]["s"] == {"x": 1}
    columns, current = read(0, in_current_schema=True)
    assert columns == ["word", "n", "s", "old", "last_updated", "timeout_at", "partition"]
    schema = read_state(spark, stream.checkpoint, batch_id=0, in_current_schema=True).schema
    assert schema["n"].dataType.simpleString() == "bigint"
    assert schema["s"].dataType.simpleString() == "struct<x:bigint,y:string>"
    assert {w: (r["n"], r["s"], r["old"]) for w, r in current.items()} == {
        "a": (1, {"x": 1, "y": None}, None), "b": (1, {"x": 1, "y": None}, None)}
    # The times and partitions are the batch's own.
    assert {w: (r["last_updated"], r["partition"]) for w, r in current.items()} == \
        {w: (r["last_updated"], r["partition"]) for w, r in own.items()}
    # A batch already in the current schema reads the same either way.
    assert read(2, in_current_schema=True) == read(2)
    # The change feed too (batch 0's changes are in the first schema).
    changes = read_state_changes(spark, stream.checkpoint, start_batch=0, end_batch=0,
                                 in_current_schema=True).collect()
    assert sorted((r["word"], r["change"], r["n"], r["s"].asDict(), r["old"])
                  for r in changes) == [("a", "update", 1, {"x": 1, "y": None}, None),
                                        ("b", "update", 1, {"x": 1, "y": None}, None)]
    with pytest.raises(TypeError, match="in_current_schema must be a bool"):
        read_state(spark, stream.checkpoint, in_current_schema="yes")


def test_a_migrated_batch_is_refused_in_the_current_schema(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b")
    stream.run_available_now(map_with_state(stream.read(spark), "word", running_count()))
    stream.add("a")
    stream.run_available_now(map_with_state(stream.read(spark), "word", migrated_count()))
    with pytest.raises(PySparkException) as refused:
        read_state(spark, stream.checkpoint, batch_id=0, in_current_schema=True).collect()
    message = str(refused.value)
    assert "[MAPWITHSTATE_STATE_SCHEMA_CHANGED]" in message, message
    assert "batch 0 of" in message and "StateSpec.migrate" in message, message
    assert "n: BIGINT -> (absent)" in message or "total" in message, message
    assert read_state(spark, stream.checkpoint, batch_id=0).count() == 2
