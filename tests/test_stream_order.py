"""``order_by`` over a stream: within each micro-batch a key's records reach the state function
in that order, ties in arrival order, however many input files the micro-batch reads and
whatever order they hold their records in; across a restart too. Replays break ties alike.

Each micro-batch here reads several files whose records run backwards in time, so a key's
records arrive out of order: the expected results are computed by plain Python over the
micro-batches, each sorted, and each test first checks that its data would give another answer
in arrival order (so the order is really what is tested).
"""
import os
import random

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S
from streams import Stream

T0 = 1_700_000_000  # seconds since the epoch of the first minute of the events
WINDOW = 600  # de-duplication window: 10 minutes
FILES_PER_RUN = 6


def dedup_spec() -> StateSpec:
    """Keeps an event unless the same id was kept less than ten minutes (event time) before;
    the state is the time of the id's last kept event."""
    keep = S.state("last").isNull() | (
        F.col("ts") >= S.state("last") + F.expr("INTERVAL 10 MINUTES"))
    return StateSpec.function(
        "last TIMESTAMP",
        update=F.struct(F.when(keep, F.col("ts")).otherwise(S.state("last")).alias("last")),
        emit=F.when(keep, F.struct(F.col("id"), F.unix_seconds("ts").alias("ts"))),
    )


def deduplicated(batches, in_order=True):
    """The events `dedup_spec` keeps from `batches` (lists of (id, ts)), each micro-batch's
    records taken in time order (`in_order`) or in the order they are listed."""
    last, kept = {}, []
    for batch in batches:
        for id_, ts in (sorted(batch) if in_order else batch):
            if id_ not in last or ts >= last[id_] + WINDOW:
                kept.append((id_, ts))
                last[id_] = ts
    return sorted(kept)


def event_files(rng, first_minute):
    """One run's files: each of 60 ids seen 2 to 9 times in the hour from `first_minute`, at
    distinct times; the events dealt out over the files, each file's running backwards."""
    files = [[] for _ in range(FILES_PER_RUN)]
    for i in range(60):
        for minute in rng.sample(range(first_minute, first_minute + 60), rng.randint(2, 9)):
            event = (f"id{i:02d}", T0 + minute * 60 + rng.randint(0, 59))
            files[rng.randrange(FILES_PER_RUN)].append(event)
    return [sorted(f, key=lambda e: -e[1]) for f in files]


def chunks(files, size):
    """The micro-batches the file source makes of `files` (taken in order), `size` at a time
    (all at once without a size): each the concatenation of its files."""
    size = size or len(files)
    return [sum(files[i:i + size], []) for i in range(0, len(files), size)]


@pytest.mark.parametrize("files_per_trigger", [None, 3], ids=["all-files", "3-files"])
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_deduplication_in_event_time_order_across_files_and_a_restart(
        spark, tmp_path, backend, files_per_trigger):
    rng = random.Random(44)
    stream = Stream(str(tmp_path))
    runs = [event_files(rng, 0), event_files(rng, 60)]
    batches = [b for files in runs for b in chunks(files, files_per_trigger)]
    expected = deduplicated(batches)
    assert deduplicated(batches, in_order=False) != expected, "the data does not test order"

    def query():
        reader = spark.readStream.schema("id STRING, e BIGINT")
        if files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", files_per_trigger)
        events = reader.json(stream.input).select("id", F.col("e").cast("timestamp").alias("ts"))
        return map_with_state(events, "id", dedup_spec().backend(backend), order_by="ts")

    for files in runs:  # a run per hour of events: the second restarts from the checkpoint
        for f in files:
            stream.add_records({"id": id_, "e": ts} for id_, ts in f)
        stream.run_available_now(query())
    assert len(stream.batch_times()) == len(batches)
    kept = stream.results(spark, "id STRING, ts BIGINT")
    assert kept == expected
    assert len(kept) < sum(len(b) for b in batches)  # some events were duplicates


@pytest.mark.sessions("connect", "classic")
def test_group_aggregates_read_records_in_order_by_ties_in_arrival_order(spark, tmp_path):
    stream = Stream(str(tmp_path))
    # (word, t, v): in descending t, ties in arrival order (q after p, both in one file).
    runs = [
        [[("a", 1, "a1"), ("b", 7, "b7")],
         [("a", 5, "p"), ("a", 5, "q"), ("a", 9, "a9"), ("b", 2, "b2")],
         [("a", 3, "a3"), ("c", 4, "c4")]],
        [[("a", 0, "a0"), ("b", 8, "b8")],
         [("a", 6, "a6"), ("b", 9, "b9")]],
    ]
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.count("*")).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n"),
                      F.concat_ws(",", F.collect_list("v")).alias("vs"),
                      F.first("v").alias("first"), F.last("v").alias("last")))

    def query():
        records = spark.readStream.schema("word STRING, t INT, v STRING").json(stream.input)
        return map_groups_with_state(records, "word", spec, order_by=[F.col("t").desc()])

    for files in runs:
        for f in files:
            stream.add_records({"word": w, "t": t, "v": v} for w, t, v in f)
        stream.run_available_now(query())
    assert len(stream.batch_times()) == 2
    assert stream.results(spark, "word STRING, n BIGINT, vs STRING, first STRING, last STRING") \
        == sorted([
            ("a", 5, "a9,p,q,a3,a1", "a9", "a1"), ("b", 2, "b7,b2", "b7", "b2"),
            ("c", 1, "c4", "c4", "c4"),
            ("a", 7, "a6,a0", "a6", "a0"), ("b", 4, "b9,b8", "b9", "b8"),
        ])


@pytest.mark.sessions("connect", "classic")
def test_group_aggregates_without_order_by_read_records_in_arrival_order(spark):
    # Past 128 keys a task, Spark's hash aggregation falls back to sorting and merges partial
    # buffers out of order: order-sensitive aggregates must read the records themselves.
    keys, per_key = 400, 4
    records = [(f"k{i:03d}", f"k{i:03d}.{j}") for j in range(per_key) for i in range(keys)]
    df = spark.createDataFrame(records, "k STRING, v STRING").coalesce(1)
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.count("*")).alias("n")),
        emit=F.struct(F.col("k"), F.concat_ws(",", F.collect_list("v")).alias("vs"),
                      F.first("v").alias("first"), F.last("v").alias("last"),
                      F.count("*").alias("n")))
    got = sorted(tuple(r) for r in map_groups_with_state(df, "k", spec).collect())
    expected = sorted(
        (k, ",".join(f"{k}.{j}" for j in range(per_key)), f"{k}.0", f"{k}.{per_key - 1}",
         per_key) for k in sorted({k for k, _ in records}))
    assert got == expected


def test_replay_ties_keep_input_order(spark):
    # A batch replay numbers its records by arrival the same way: ties in input order.
    df = spark.createDataFrame(
        [("a", 1, "x"), ("a", 0, "y"), ("a", 1, "z"), ("a", 0, "w"), ("b", 0, "v")],
        "k STRING, t INT, v STRING")
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("k"), S.new_state("n").alias("n"), F.col("v")))
    rows = sorted(tuple(r) for r in map_with_state(df, "k", spec, order_by="t").collect())
    assert rows == [("a", 1, "y"), ("a", 2, "w"), ("a", 3, "x"), ("a", 4, "z"), ("b", 1, "v")]


def test_order_by_names_a_missing_column(spark, tmp_path):
    os.makedirs(tmp_path / "in")
    events = spark.readStream.schema("id STRING, ts TIMESTAMP").json(str(tmp_path / "in"))
    with pytest.raises(PySparkException) as failure:
        map_with_state(events, "id", dedup_spec(), order_by="nope").schema
    assert "order_by" in str(failure.value) and "nope" in str(failure.value)
