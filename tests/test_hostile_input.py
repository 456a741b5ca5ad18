"""What any Connect client can send the plugin: deep plans and expressions (parsed with Spark's
own nesting limit), fields the server does not know, malformed bytes, and values above the
request limits, each refused with an error that says what to change."""
import pytest
from pyspark.errors import IllegalArgumentException, PySparkException
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S
from raw_relation import dataframe, message_of, varint

def count_spec() -> StateSpec:
    """A running count per word (built per test: Columns need a Connect session)."""
    return StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")))


@pytest.fixture
def words(spark):
    return spark.createDataFrame([("a",), ("b",), ("a",)], "word STRING")


def counts(df, spec=None, **kwargs):
    spec = spec or count_spec()
    return sorted(tuple(r) for r in map_with_state(df, key="word", spec=spec, **kwargs).collect())


def test_a_deep_input_plan_works(words):
    deep = words
    for i in range(70):
        deep = deep.withColumn(f"c{i}", F.lit(i))
    assert counts(deep, value="c69") == [("a", 1), ("a", 2), ("b", 1)]


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, serialized by hand."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _function(name: str, *arguments: bytes) -> bytes:
    """An Expression calling `name` (Expression.unresolved_function is field 3)."""
    return _field(3, _field(1, name.encode()) + b"".join(_field(2, a) for a in arguments))


def test_a_deep_expression_works(spark, words):
    # pyspark's own protobuf refuses to build an expression this deep (its limit is 100), so it
    # is serialized by hand: update = struct((coalesce(state.n, 0) + 0 + 0 ... + 1) AS n).
    client = spark.client
    n = (F.coalesce(S.state("n"), F.lit(0))).to_plan(client).SerializeToString()
    zero, one = F.lit(0).to_plan(client).SerializeToString(), F.lit(1).to_plan(client).SerializeToString()
    for _ in range(60):  # 120 levels of nesting; deeper ones exhaust Spark's analyzer first
        n = _function("+", n, zero)
    alias = _field(6, _field(1, _function("+", n, one)) + _field(2, b"n"))  # Expression.alias
    update = _function("struct", alias)
    message = message_of(map_with_state(words, key="word", spec=count_spec()))
    message.spec.ClearField("update")
    spec = message.spec.SerializeToString() + _field(3, update)  # StateSpec.update
    message.ClearField("spec")
    payload = message.SerializeToString() + _field(4, spec)  # MapWithState.spec
    rows = dataframe(spark, payload).collect()
    assert sorted(map(tuple, rows)) == [("a", 1), ("a", 2), ("b", 1)]


def _unknown_field(number: int) -> bytes:
    return varint(number << 3) + varint(1)  # a varint field holding 1


def test_unknown_fields_are_refused(spark, words):
    message = message_of(map_with_state(words, key="word", spec=count_spec()))
    with pytest.raises(IllegalArgumentException, match=r"MapWithState has fields this server "
                                                       r"does not know \(numbers 99\)"):
        dataframe(spark, message.SerializeToString() + _unknown_field(99)).collect()
    spec = message.spec.SerializeToString() + _unknown_field(1234)
    message.ClearField("spec")
    payload = message.SerializeToString() + _field(4, spec)
    with pytest.raises(IllegalArgumentException, match=r"StateSpec\) has fields this server "
                                                       r"does not know \(numbers 1234\)"):
        dataframe(spark, payload).collect()


def test_malformed_bytes_are_refused(spark, words):
    payload = message_of(map_with_state(words, key="word", spec=count_spec())).SerializeToString()
    with pytest.raises(IllegalArgumentException, match="MapWithState message is malformed"):
        dataframe(spark, payload[:-3]).collect()


@pytest.mark.parametrize("argument, setting, value", [
    ("num_partitions", "spark.mapwithstate.maxNumPartitions", 3),
    ("checkpoint_interval", "spark.mapwithstate.maxCheckpointInterval", 3),
])
def test_limits_name_the_argument_and_the_setting(spark, words, argument, setting, value):
    spec = getattr(count_spec(), argument)(value)
    try:
        spark.conf.set(setting, str(value - 1))
        with pytest.raises(IllegalArgumentException,
                           match=f"{argument} is {value}, above the limit of {value - 1}; "
                                 f"set {setting} to allow more"):
            counts(words, spec)
        spark.conf.set(setting, str(value))
        assert counts(words, spec) == [("a", 1), ("a", 2), ("b", 1)]
    finally:
        spark.conf.unset(setting)


def test_the_default_limits_refuse_absurd_values(words):
    with pytest.raises(IllegalArgumentException,
                       match="num_partitions is 2147483647, above the limit of 10000; "
                             "set spark.mapwithstate.maxNumPartitions"):
        counts(words, count_spec().num_partitions(2**31 - 1))
    wide = ", ".join(f"f{i} INT" for i in range(1001))
    with pytest.raises(IllegalArgumentException,
                       match=r"the number of fields in state_schema \(nested ones included\) is "
                             r"1001, above the limit of 1000; "
                             r"set spark.mapwithstate.maxStateSchemaFields"):
        counts(words, StateSpec.function(wide, emit=F.struct(F.col("word"))))


def test_the_state_width_limit_counts_nested_fields(spark, words):
    spec = StateSpec.function("n BIGINT, last STRUCT<a: INT, b: ARRAY<STRUCT<c: INT>>>",
                              update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n"),
                                              S.state("last").alias("last")),
                              emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    setting = "spark.mapwithstate.maxStateSchemaFields"
    try:
        spark.conf.set(setting, "4")
        with pytest.raises(IllegalArgumentException, match="is 5, above the limit of 4"):
            counts(words, spec)
        spark.conf.set(setting, "5")
        assert counts(words, spec) == [("a", 1), ("a", 2), ("b", 1)]
        spark.conf.set(setting, "lots")
        with pytest.raises(IllegalArgumentException,
                           match=f"{setting} must be a positive whole number, got 'lots'"):
            counts(words, spec)
    finally:
        spark.conf.unset(setting)


@pytest.mark.parametrize("length", [1000, 3000])
def test_an_error_quoting_wide_characters_reaches_the_client_whole(spark, length):
    # Spark Connect quotes the failing value in the error's gRPC trailers; in multi-byte
    # characters that was more than a default gRPC client reads (RESOURCE_EXHAUSTED and a
    # ValueError, or a reset stream). The trailers are bounded; the error arrives whole.
    value = "\ufffd" * length + "x"
    df = spark.createDataFrame([(value,)], "word STRING").withColumn("v", F.col("word").cast("int"))
    with pytest.raises(PySparkException) as caught:
        counts(df, value="v")
    assert "CAST_INVALID_INPUT" in str(caught.value)
    assert value in str(caught.value)


def arrow_streams(table):
    """``table`` as an Arrow IPC stream, and that stream with the offsets (0, 3, 7) of its one
    pair of strings "abc", "defg" damaged: the last one far past its buffer."""
    import struct

    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    good = sink.getvalue().to_pybytes()
    offsets = struct.pack("<3i", 0, 3, 7)
    assert good.count(offsets) == 1
    return good, good.replace(offsets, struct.pack("<3i", 0, 3, 1 << 30))


def test_damaged_local_data_is_refused_before_spark_reads_it(spark, words):
    """Spark reads a local relation's strings straight from the Arrow buffers' memory at the
    offsets the data gives; an offset far past its buffer made the server read outside it
    (the fuzz test once took the server down with a SIGSEGV that way). The plugin validates
    the data first and names where it is."""
    import pyarrow as pa

    good, damaged = arrow_streams(pa.table({"word": pa.array(["abc", "defg"], pa.string())}))

    message = message_of(map_with_state(words, key="word", spec=count_spec()))
    assert message.input.HasField("local_relation")
    message.input.local_relation.data = good
    assert sorted(tuple(r) for r in dataframe(spark, message.SerializeToString()).collect()) == \
        [("abc", 1), ("defg", 1)]
    message.input.local_relation.data = damaged
    with pytest.raises(IllegalArgumentException,
                       match=r"MapWithState\.input\.local_relation: a LocalRelation's Arrow data "
                             r"is damaged"):
        dataframe(spark, message.SerializeToString()).collect()
    assert spark.range(3).count() == 3


def test_local_data_with_maps_passes_the_check(spark):
    """Arrow's own type check takes every MAP column for a damaged list; the plugin's check
    knows maps, nested ones included, and still refuses damaged data inside them."""
    df = spark.createDataFrame(
        [("a", {"x": 1}, [{"y": 2}]), ("b", {}, []), ("a", {"x": 5, "z": None}, None)],
        "word STRING, m MAP<STRING,BIGINT>, nested ARRAY<MAP<STRING,BIGINT>>")
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.coalesce(F.col("m")["x"], F.lit(0))
                         + F.coalesce(F.get("nested", 0)["y"], F.lit(0))).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n"), F.size("m").alias("size")))
    assert counts(df, spec) == [("a", 3, 1), ("a", 8, 2), ("b", 0, 0)]

    import pyarrow as pa

    # The same map's key strings with an offset far past their buffer: still refused.
    good, damaged = arrow_streams(pa.table({
        "word": pa.array(["a"]),
        "m": pa.array([[("abc", 1), ("defg", 2)]], pa.map_(pa.string(), pa.int64())),
        "nested": pa.array([None], pa.list_(pa.map_(pa.string(), pa.int64())))}))
    message = message_of(map_with_state(df, key="word", spec=spec))
    message.input.local_relation.data = good
    assert sorted(tuple(r) for r in dataframe(spark, message.SerializeToString()).collect()) == \
        [("a", 0, 2)]
    message.input.local_relation.data = damaged
    with pytest.raises(IllegalArgumentException, match="Arrow data is damaged"):
        dataframe(spark, message.SerializeToString()).collect()
