"""Where a partition's state lives: the heap backend's memory budget, the RocksDB backend
(``StateSpec.backend("rocksdb")``), and a restart that names another backend.

The semantic suites run over both backends too (their ``backends`` marker, see conftest).
"""
import pytest
from pyspark.sql import functions as F

from mapwithstate import map_with_state
from specs import running_count
from streams import Stream, counts

pytestmark = pytest.mark.sessions("connect", "classic")

BUDGET = "spark.mapwithstate.stateStore.maxPartitionBytes"


def distinct_words(spark, n):
    return spark.range(n).select(F.concat(F.lit("w"), F.col("id").cast("string")).alias("word"))


def test_heap_state_past_its_budget_fails_clearly_and_the_server_keeps_answering(spark):
    words = distinct_words(spark, 200_000)
    spark.conf.set(BUDGET, "1m")
    try:
        with pytest.raises(Exception) as failure:
            map_with_state(words, "word", running_count()).collect()
    finally:
        spark.conf.unset(BUDGET)
    message = str(failure.value)
    assert "map_with_state: the state of partition " in message
    assert "over the limit of 1.0 MB per partition" in message and BUDGET in message
    assert "more partitions" in message and 'StateSpec.backend("rocksdb")' in message
    assert "OutOfMemoryError" not in message
    # The executor (in local mode: the server itself) is still there for the next query.
    assert len(map_with_state(words.limit(10), "word", running_count()).collect()) == 10


def test_rocksdb_state_is_not_held_to_the_heap_budget(spark):
    spark.conf.set(BUDGET, "1m")
    try:
        rows = map_with_state(distinct_words(spark, 200_000), "word",
                              running_count().backend("rocksdb")).collect()
    finally:
        spark.conf.unset(BUDGET)
    assert len(rows) == 200_000 and {r.n for r in rows} == {1}


def test_an_unknown_backend_is_refused_naming_the_choices(spark):
    with pytest.raises(Exception) as failure:
        map_with_state(distinct_words(spark, 3), "word", running_count().backend("disk")).collect()
    assert "backend must be one of 'memory', 'rocksdb', got 'disk'" in str(failure.value)


@pytest.mark.parametrize("first,second", [("memory", "rocksdb"), ("rocksdb", "memory")])
def test_a_restart_cannot_switch_backends(spark, tmp_path, first, second):
    stream = Stream(str(tmp_path))
    stream.add("a")
    stream.run_available_now(
        map_with_state(stream.read(spark), "word", running_count().backend(first)))
    stream.add("a")
    with pytest.raises(Exception) as failure:
        stream.run_available_now(
            map_with_state(stream.read(spark), "word", running_count().backend(second)))
    message = str(failure.value)
    assert f"holds state of the '{first}' backend" in message
    assert f"asks for backend '{second}'" in message
    # The checkpoint is untouched: the query goes on with its own backend.
    stream.run_available_now(
        map_with_state(stream.read(spark), "word", running_count().backend(first)))
    assert stream.results(spark) == counts(("a", 1), ("a", 2))


def test_rocksdb_stream_reports_its_state_in_the_progress(spark, tmp_path):
    stream = Stream(str(tmp_path))
    stream.add("a", "b", "a")
    query = stream.run_available_now(
        map_with_state(stream.read(spark), "word", running_count().backend("rocksdb")))
    operator = query.lastProgress["stateOperators"][0]
    assert operator["numRowsTotal"] == 2
    assert stream.results(spark) == counts(("a", 1), ("a", 2), ("b", 1))
