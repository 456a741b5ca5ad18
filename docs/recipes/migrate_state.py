"""Migrating state to a new checkpoint: a query's state schema changes (here a count becomes a
count and a total), so the new query cannot restart from the old checkpoint. Read the old
state back with ``read_state``, reshape it with DataFrame operations, and start the new query
on a new checkpoint with it as ``initial_state``.
"""
import os
import tempfile

from pyspark.sql import functions as F

import mapwithstate as mws


@mws.state_function("n BIGINT")
def count(word, state):
    state.update(n=(state.n or 0) + 1)


@mws.state_function("n BIGINT, chars BIGINT")
def count_and_chars(word, state):
    state.update(n=(state.n or 0) + 1, chars=(state.chars or 0) + len(word))


def run_stream(spark, spec, source, checkpoint):
    words = spark.readStream.schema("word STRING").parquet(source)
    # Only the state matters here: the query writes its snapshots to no sink.
    query = (mws.map_with_state(words, key="word", spec=spec, output="snapshots").writeStream
             .format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()


def run(spark, work=None):
    work = work or tempfile.mkdtemp()
    old_input, new_input = os.path.join(work, "in-old"), os.path.join(work, "in-new")
    spark.createDataFrame([("a",), ("bb",), ("a",)], "word STRING").write.parquet(old_input)
    run_stream(spark, count, old_input, os.path.join(work, "ck-old"))

    # The old state, reshaped to the new schema: key columns and the new state's fields.
    old = mws.read_state(spark, os.path.join(work, "ck-old"))
    initial = old.select("word", "n", (F.col("n") * F.length("word")).alias("chars"))

    spark.createDataFrame([("a",), ("ccc",)], "word STRING").write.parquet(new_input)
    new_checkpoint = os.path.join(work, "ck-new")
    run_stream(spark, count_and_chars.initial_state(initial), new_input, new_checkpoint)
    state = mws.read_state(spark, new_checkpoint).select("word", "n", "chars")
    state.orderBy("word").show()
    assert sorted(tuple(r) for r in state.collect()) == [
        ("a", 3, 3), ("bb", 1, 2), ("ccc", 1, 3)]


if __name__ == "__main__":
    run(mws.local_session())
