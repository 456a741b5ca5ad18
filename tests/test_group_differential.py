"""map_groups_with_state against a Python model of Spark's group-function semantics, on
seeded random inputs, batch by batch: in a batch replay and in a stream.

The function keeps a count and a total per key (count(*) and sum(v) of each batch added to
the state), removes the key once its count reaches LIMIT, and emits, per key with records in
the batch, the batch's aggregates and the new state (null fields when removed).
"""
import json
import os
import random
from collections import defaultdict

import pytest
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_groups_with_state
from mapwithstate import functions as S
from replay import batch_time
from streams import Stream

LIMIT = 9
SEEDS = [7, 42]


def spec():
    count = F.coalesce(S.state("n"), F.lit(0)) + F.count("*")
    total = F.coalesce(S.state("total"), F.lit(0)) + F.coalesce(F.sum("v"), F.lit(0))
    return StateSpec.function(
        "n BIGINT, total BIGINT",
        update=F.struct(count.alias("n"), total.alias("total")),
        remove=count >= LIMIT,
        emit=F.struct(S.batch_time().alias("t"), F.col("k"), F.count("*").alias("c"),
                      F.sum("v").alias("s"), S.new_state("n").alias("n"),
                      S.new_state("total").alias("total")))


def random_batches(seed, batches=6, keys=8):
    rnd = random.Random(seed)
    return [[(f"k{rnd.randrange(keys)}", rnd.randrange(-5, 20)) for _ in range(rnd.randrange(1, 30))]
            for _ in range(batches)]


def model(batches):
    """Per batch, the sorted (k, c, s, n, total) rows Spark's semantics give."""
    state, out = {}, []
    for records in batches:
        groups = defaultdict(list)
        for k, v in records:
            groups[k].append(v)
        rows = []
        for k, vs in groups.items():
            n0, t0 = state.get(k, (0, 0))
            n, total = n0 + len(vs), t0 + sum(vs)
            if n >= LIMIT:
                state.pop(k, None)
                rows.append((k, len(vs), sum(vs), None, None))
            else:
                state[k] = (n, total)
                rows.append((k, len(vs), sum(vs), n, total))
        out.append(sorted(rows))
    return out


def per_batch(rows):
    grouped = defaultdict(list)
    for r in rows:
        grouped[r.t].append((r.k, r.c, r.s, r.n, r.total))
    return [sorted(grouped[t]) for t in sorted(grouped)]


@pytest.mark.parametrize("seed", SEEDS)
def test_batch_replay_equals_the_model(spark, seed):
    batches = random_batches(seed)
    df = spark.createDataFrame(
        [(k, v, batch_time(i)) for i, b in enumerate(batches) for k, v in b],
        "k STRING, v INT, ts TIMESTAMP")
    out = map_groups_with_state(df, "k", spec(), batch_time="ts").collect()
    assert per_batch(out) == model(batches)


@pytest.mark.parametrize("seed", SEEDS[:1])
def test_stream_equals_the_model(spark, tmp_path, seed):
    batches = random_batches(seed)
    stream = Stream(str(tmp_path))
    for i, records in enumerate(batches):
        path = os.path.join(stream.input, f"part-{i:05d}.json")
        with open(path, "w") as f:
            f.writelines(json.dumps({"k": k, "v": v}) + "\n" for k, v in records)
        # The file source takes files in modification-time order.
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    source = spark.readStream.schema("k STRING, v INT").option("maxFilesPerTrigger", 1) \
        .json(stream.input)
    stream.run_available_now(map_groups_with_state(source, "k", spec()))
    out = spark.read.schema("t TIMESTAMP, k STRING, c BIGINT, s BIGINT, n BIGINT, total BIGINT") \
        .json(stream.output).collect()
    assert per_batch(out) == model(batches)
