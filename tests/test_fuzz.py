"""Fuzzing the plugin through the real Connect client: seeded random mutations of valid
MapWithState messages (bit flips, truncations, inserted fields with huge numbers or the wrong
wire type, overwritten bytes). Every one must end in an error or a result — the same result as
the original when the mutation did not change the message — and the server must neither die
nor hang: a normal query answers after every batch of cases."""
import datetime
import os
import threading

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from mapwithstate.proto import relations_pb2
from raw_relation import dataframe, message_of, varint

#: About 0.2 s each on a shared 2-core machine (most fail fast in parsing or analysis);
#: MWS_FUZZ_CASES runs more.
CASES = int(os.environ.get("MWS_FUZZ_CASES", "1000"))
#: Seconds one case may take; far above the slowest legitimate case (a small job).
CASE_TIMEOUT = 120
#: After this many cases, a normal query must still answer.
CHECK_EVERY = 100

# Limits well below the defaults, so that a mutation asking for many partitions or a wide state
# fails fast instead of running a big job on a shared test machine.
LIMITS = {"spark.mapwithstate.maxNumPartitions": "8",
          "spark.mapwithstate.maxCheckpointInterval": "100",
          "spark.mapwithstate.maxStateSchemaFields": "16"}


def _bases(spark):
    """Valid messages covering the fields: emitted and snapshots, initial state, options,
    a batch-time replay and an order."""
    words = spark.createDataFrame(
        [("a", 1, "2024-01-01 00:00:00"), ("b", 2, "2024-01-01 00:00:10"),
         ("a", 3, "2024-01-01 00:00:20")], "word STRING, v INT, t STRING"
    ).withColumn("t", F.to_timestamp("t"))
    count = StateSpec.function(
        "n BIGINT, total BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n"),
                        (F.coalesce(S.state("total"), F.lit(0)) + F.col("v")).alias("total")),
        remove=F.col("v") > 100,
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    initial = spark.createDataFrame([("a", 10, 0)], "word STRING, n BIGINT, total BIGINT")
    frames = [
        map_with_state(words, key="word", spec=count, value="v"),
        map_with_state(words, key="word", spec=count, value="v", output="snapshots"),
        map_with_state(words, key="word", value="v", batch_time="t",
                       spec=count.initial_state(initial).num_partitions(2)
                       .timeout("15 seconds").checkpoint_interval(2)),
        map_with_state(words, key="word", value="v", spec=count, order_by=F.col("v").desc()),
    ]
    return [(message_of(df).SerializeToString(), _result(df)) for df in frames]


def _result(df):
    # Without batch_time, snapshots are stamped with the time of the run: leave stamps out.
    rows = [tuple(v for v in row if not isinstance(v, datetime.datetime)) for row in df.collect()]
    return sorted(rows, key=repr)


_HUGE = st.sampled_from([2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1, 2**35, 0])


@st.composite
def _mutation(draw, size: int):
    """One edit of a message of `size` bytes, as (kind, position, bytes)."""
    kind = draw(st.sampled_from(["flip", "truncate", "overwrite", "huge_field", "wrong_wire_type",
                                 "huge_length"]))
    position = draw(st.integers(0, max(size - 1, 0)))
    if kind == "flip":
        return kind, position, bytes([1 << draw(st.integers(0, 7))])
    if kind == "overwrite":
        return kind, position, draw(st.binary(min_size=1, max_size=4))
    if kind == "huge_field":  # a known field number (1-9) as a varint with a huge value
        tag = draw(st.integers(1, 9)) << 3
        return kind, position, bytes([tag]) + varint(draw(_HUGE))
    if kind == "wrong_wire_type":  # a known field number with another wire type
        tag = draw(st.integers(1, 9)) << 3 | draw(st.sampled_from([0, 1, 2, 5]))
        return kind, position, bytes([tag]) + draw(st.binary(min_size=0, max_size=9))
    if kind == "huge_length":  # a length-delimited known field claiming a huge length
        tag = draw(st.integers(1, 9)) << 3 | 2
        return kind, position, bytes([tag]) + varint(draw(_HUGE))
    return kind, position, b""


def _apply(payload: bytes, mutation) -> bytes:
    kind, position, data = mutation
    # An earlier truncation may have shortened the message: keep the position inside it.
    position = min(position, len(payload))
    if kind in ("flip", "overwrite") and position == len(payload):
        return payload + data if kind == "overwrite" else payload
    if kind == "flip":
        return payload[:position] + bytes([payload[position] ^ data[0]]) + payload[position + 1:]
    if kind == "truncate":
        return payload[:position]
    if kind == "overwrite":
        return payload[:position] + data + payload[position + len(data):]
    return payload[:position] + data + payload[position:]


def _same_message(a: bytes, b: bytes) -> bool:
    """Whether `b` parses (in Python) to the message `a` is: a mutation without effect."""
    try:
        parsed = relations_pb2.MapWithState.FromString(b)
    except Exception:
        return False
    # Unknown fields do not count in ==, but they are serialized.
    original = relations_pb2.MapWithState.FromString(a)
    return parsed == original and parsed.SerializeToString() == original.SerializeToString()


class _Outcome:
    """A query run in a thread, so a hang is a test failure instead of a stuck suite."""

    def __init__(self, spark, payload: bytes) -> None:
        self.rows = self.error = None
        self._thread = threading.Thread(target=self._run, args=(spark, payload), daemon=True)
        self._thread.start()
        self._thread.join(CASE_TIMEOUT)
        self.finished = not self._thread.is_alive()

    def _run(self, spark, payload: bytes) -> None:
        try:
            self.rows = _result(dataframe(spark, payload))
        except BaseException as e:  # noqa: B036 — every outcome is recorded and judged
            self.error = e


@pytest.fixture
def fuzz_spark(server):
    session = server.session()
    for key, value in LIMITS.items():
        session.conf.set(key, value)
    yield session
    session.stop()


@pytest.mark.slow
def test_mutated_messages_get_an_error_or_a_correct_result(server, fuzz_spark):
    bases = _bases(fuzz_spark)
    seen = {"cases": 0, "errors": 0, "results": 0}

    @seed(20240611)
    # No shrinking: a failing case may be a hang or a dead server, where every shrink step
    # would wait its timeout; the failing case's mutations are in the assertion.
    @settings(max_examples=CASES, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.reuse, Phase.generate])
    @given(data=st.data())
    def case(data):
        payload, expected = bases[data.draw(st.integers(0, len(bases) - 1))]
        mutations = data.draw(st.lists(_mutation(len(payload)), min_size=1, max_size=3))
        mutated = payload
        for mutation in mutations:
            mutated = _apply(mutated, mutation)
        outcome = _Outcome(fuzz_spark, mutated)
        assert server.running(), f"the server died after {mutations} (see its log)"
        assert outcome.finished, f"the query hung for {CASE_TIMEOUT}s after {mutations}"
        seen["cases"] += 1
        if outcome.error is not None:
            seen["errors"] += 1
            assert isinstance(outcome.error, PySparkException), repr(outcome.error)
            assert "UNAVAILABLE" not in str(outcome.error), "the server went away"
        else:
            seen["results"] += 1
            if _same_message(payload, mutated):
                assert outcome.rows == expected
        if seen["cases"] % CHECK_EVERY == 0:
            assert server.running()
            assert fuzz_spark.range(5).count() == 5

    case()
    assert seen["cases"] >= CASES * 0.9, seen
    assert server.running()
    assert fuzz_spark.range(7).count() == 7
    print(f"fuzz: {seen}")
