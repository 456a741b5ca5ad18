"""The systems a Python user runs through Spark Connect: ours (``map_with_state``),
``applyInPandasWithState`` with ``ProcessingTimeTimeout``, ``transformWithState`` and
``transformWithStateInPandas`` (the Python state function per record in S1 and S2, vectorized
processors in S4 and S5), and for B1 Spark's own ``groupBy().agg()``. All share one local Connect server that loads the plugin, configured
like the JVM systems (bench/jvm_systems.py)."""
import glob
import os
import time
from typing import Callable, Iterator, List, Optional, Tuple

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from mapwithstate import StateSpec, map_groups_with_state, map_with_state
from mapwithstate import functions as S

from bench import pandas_processors, python_function
from bench.measure import Batch
from bench.outcome import Outcome

SCHEMA = "key BIGINT, value BIGINT"
#: Long enough that nothing expires while measuring; set so that timeout support is on.
IDLE_TIMEOUT = "1 hour"
IDLE_TIMEOUT_MS = 3_600_000
#: A query that runs longer is stopped and reported as failed, so one runaway system does not
#: hold up the suite.
MAX_QUERY_SECONDS = 600



def running_count() -> StateSpec:
    """The workload: each record increments its key's count and emits (key, count). Built on
    use: pyspark's functions make Connect Columns only once a Connect session exists."""
    return StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("key"), S.new_state("n").alias("count")),
    ).timeout(IDLE_TIMEOUT)


def ours(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    return _ours_with(running_count(), spark, directory, checkpoint)


def ours_python(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    """Ours with the running count written as a Python state function (compiled to Columns by
    map_with_state; bench/python_function.py)."""
    return _ours_with(python_function.running_count.timeout(IDLE_TIMEOUT), spark, directory,
                      checkpoint)


def ours_ordered(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    """Ours with ``order_by``: each key's records of a micro-batch reach the function sorted by
    value (a partition-local sort after the state's shuffle); what order_by costs."""
    return _ours_with(running_count(), spark, directory, checkpoint, order_by="value")


def _ours_with(spec: StateSpec, spark: SparkSession, directory: str, checkpoint: str,
               order_by: Optional[str] = None) -> Outcome:
    try:
        # map_with_state only appends: emitted records are never retracted.
        return Outcome(_stream(spark, directory, checkpoint, "append",
                               lambda source: map_with_state(source, key="key", spec=spec,
                                                             order_by=order_by)))
    except Exception as e:  # noqa: BLE001 - reported in the table
        return Outcome.failed(e)


#: The Connect floor's query name: its jobs' descriptions start with it (see bench/tasktime.py).
FLOOR_QUERY = "bench-stateless-floor"


def floor(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    """bench/jvm's StatelessFloor on the Connect server: the same files shuffled by key and
    projected, with no state, in the process ours runs in."""
    try:
        return Outcome(_stream(spark, directory, checkpoint, "append",
                               lambda source: source.repartition("key").select(
                                   "key", (F.col("value") + 1).alias("count")),
                               query_name=FLOOR_QUERY))
    except Exception as e:  # noqa: BLE001 - reported in the table
        return Outcome.failed(e)


def timer_spec(step_ms: int, timed_keys: int) -> StateSpec:
    """S4's workload, as bench/jvm's TimerCount: a record adds to its key's count and sets its
    timer ``(key % 100 + 1) × step_ms`` after the batch (a day for keys from ``timed_keys``
    on); a timing-out key emits (key, count) and re-arms its timer a cycle (100 × step) later,
    keeping its state. Only timing-out calls emit, so output rows are expired keys."""
    key = F.col("key")
    duration_ms = F.when(key < timed_keys, (key % 100 + 1) * step_ms).otherwise(F.lit(86_400_000))
    after = lambda ms: F.timestamp_micros(F.unix_micros(S.batch_time()) + ms * 1000)  # noqa: E731
    return StateSpec.function(
        "n BIGINT",
        update=F.when(~S.is_timing_out(),
                      F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n"))),
        emit=F.when(S.is_timing_out(), F.struct(key, S.state("n").alias("count"))),
        timeout_at=F.when(S.is_timing_out(), after(F.lit(100 * step_ms))).otherwise(after(duration_ms)))


def ours_timers(spark: SparkSession, directory: str, checkpoint: str, step_ms: int,
                timed_keys: int) -> Outcome:
    """S4: map_with_state with a timeout_at timer on every key (processing time)."""
    spec = timer_spec(step_ms, timed_keys)
    try:
        return Outcome(_stream(spark, directory, checkpoint, "append",
                               lambda source: map_with_state(source, key="key", spec=spec),
                               trigger_ms=step_ms))
    except Exception as e:  # noqa: BLE001 - reported in the table
        return Outcome.failed(e)


def ours_on(backend: str, max_seconds: int = MAX_QUERY_SECONDS) -> Callable[..., Outcome]:
    """S6: ours with the state in ``backend``; a failed run's note says where it stopped (the
    last batch committed and the state's keys then) and the error (the heap budget's)."""
    def run(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
        progress: list = []
        try:
            return Outcome(_stream(spark, directory, checkpoint, "append",
                                   lambda source: map_with_state(
                                       source, key="key", spec=running_count().backend(backend)),
                                   progress=progress, max_seconds=max_seconds))
        except Exception as e:  # noqa: BLE001 - reported in the table
            return Outcome(note=_stopped(e, progress))
    return run


def _stopped(error: Exception, progress: list) -> str:
    """Where a run stopped and why: the plugin's own sentence of the error when it has one."""
    text = str(error)
    start = text.find("map_with_state: ")
    reason = text[start:].splitlines()[0] if start >= 0 else text.strip().splitlines()[0][:300]
    if not progress:
        return f"failed before its first batch ended: {reason}"
    last = progress[-1]
    keys = sum(o.numRowsTotal for o in last.stateOperators or [])
    return (f"failed in micro-batch {last.batchId + 1} (input file {last.batchId + 1} from 0), "
            f"{keys:,} keys of state before it: {reason}")


def _count_and_sum():
    """S5's output row, the same for both of ours: (key, count, sum) from the new state."""
    return F.struct(F.col("key"), S.new_state("n").alias("count"), S.new_state("total").alias("sum"))


def groups(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    """S5: map_groups_with_state adding each batch's count and sum per key to the state and
    emitting (key, count, sum) once per key per batch, as flatMapGroupsWithState does."""
    count = F.coalesce(S.state("n"), F.lit(0)) + F.count("*")
    total = F.coalesce(S.state("total"), F.lit(0)) + F.sum("value")
    spec = StateSpec.function(
        "n BIGINT, total BIGINT",
        update=F.struct(count.alias("n"), total.alias("total")),
        emit=_count_and_sum()).timeout(IDLE_TIMEOUT)
    try:
        return Outcome(_stream(spark, directory, checkpoint, "update",
                               lambda source: map_groups_with_state(source, key="key", spec=spec)))
    except Exception as e:  # noqa: BLE001
        return Outcome.failed(e)


def per_record_count_sum(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    """S5 per record: map_with_state keeping the same count and sum, emitting (key, count, sum)
    after every record (its state ends the same; it emits ~records/keys times more rows)."""
    spec = StateSpec.function(
        "n BIGINT, total BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n"),
                        (F.coalesce(S.state("total"), F.lit(0)) + F.col("value")).alias("total")),
        emit=_count_and_sum()).timeout(IDLE_TIMEOUT)
    try:
        return Outcome(_stream(spark, directory, checkpoint, "append",
                               lambda source: map_with_state(source, key="key", spec=spec)))
    except Exception as e:  # noqa: BLE001
        return Outcome.failed(e)


def apply_in_pandas_with_state(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    def build(source: DataFrame) -> DataFrame:
        return source.groupBy("key").applyInPandasWithState(
            _running_count_pandas, "key BIGINT, count BIGINT", "n BIGINT", "update",
            GroupStateTimeout.ProcessingTimeTimeout)
    try:
        return Outcome(_stream(spark, directory, checkpoint, "update", build))
    except Exception as e:  # noqa: BLE001
        return Outcome.failed(e)


def python_in_pandas(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    """applyInPandasWithState calling the Python state function ours compiles, per record."""
    def build(source: DataFrame) -> DataFrame:
        return source.groupBy("key").applyInPandasWithState(
            python_function.apply_in_pandas, python_function.OUTPUT_SCHEMA,
            python_function.STATE_SCHEMA, "update", GroupStateTimeout.ProcessingTimeTimeout)
    try:
        return Outcome(_stream(spark, directory, checkpoint, "update", build))
    except Exception as e:  # noqa: BLE001
        return Outcome.failed(e)


#: transformWithState and transformWithStateInPandas run only on Spark's RocksDB store.
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def python_in_transform_with_state(pandas: bool) -> Callable[..., Outcome]:
    """transformWithState (``pandas``: transformWithStateInPandas) with a StatefulProcessor
    calling the Python state function ours compiles, per record (no idle timeout:
    ``timeMode="None"``)."""
    def build(source: DataFrame) -> DataFrame:
        grouped = source.groupBy("key")
        operator = (grouped.transformWithStateInPandas if pandas
                    else grouped.transformWithState)
        processor = (python_function.PandasProcessor() if pandas
                     else python_function.RowProcessor())
        return operator(processor, python_function.OUTPUT_SCHEMA, "Update", "None")

    def run(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
        return _on_rocksdb(spark, lambda: _stream(spark, directory, checkpoint, "update", build))
    return run


def tws_pandas_count_sum(spark: SparkSession, directory: str, checkpoint: str) -> Outcome:
    """S5: transformWithStateInPandas adding each batch's count and sum per key to a
    ValueState, vectorized, with the idle timeout as a processing-time timer
    (bench/pandas_processors.py)."""
    def build(source: DataFrame) -> DataFrame:
        return source.groupBy("key").transformWithStateInPandas(
            pandas_processors.CountSumProcessor(), pandas_processors.COUNT_SUM_OUTPUT, "Update",
            "ProcessingTime")
    return _on_rocksdb(spark, lambda: _stream(spark, directory, checkpoint, "update", build))


def tws_pandas_timers(spark: SparkSession, directory: str, checkpoint: str, step_ms: int,
                      timed_keys: int) -> Outcome:
    """S4: transformWithStateInPandas with a processing-time timer per key, as ours'
    ``timer_spec`` (bench/pandas_processors.py), on the same trigger."""
    def build(source: DataFrame) -> DataFrame:
        return source.groupBy("key").transformWithStateInPandas(
            pandas_processors.TimerCountProcessor(step_ms, timed_keys),
            pandas_processors.TIMER_OUTPUT, "Update", "ProcessingTime")
    return _on_rocksdb(spark, lambda: _stream(spark, directory, checkpoint, "update", build,
                                              trigger_ms=step_ms))


def _on_rocksdb(spark: SparkSession, run: Callable[[], List[Batch]]) -> Outcome:
    """Runs a transformWithState query: the session's store is Spark's RocksDB one while it
    runs (those operators refuse any other) and is put back after."""
    provider = "spark.sql.streaming.stateStore.providerClass"
    previous = spark.conf.get(provider)
    spark.conf.set(provider, ROCKSDB_PROVIDER)
    try:
        return Outcome(run())
    except Exception as e:  # noqa: BLE001 - reported in the table
        return Outcome.failed(e)
    finally:
        spark.conf.set(provider, previous)


def _running_count_pandas(key: Tuple[int], pdfs: Iterator[pd.DataFrame],
                          state: GroupState) -> Iterator[pd.DataFrame]:
    """The running count as a pandas user writes it: vectorized per chunk of a key's records."""
    if state.hasTimedOut:
        state.remove()
        return
    n = state.get[0] if state.exists else 0
    for pdf in pdfs:
        counts = pd.RangeIndex(n + 1, n + 1 + len(pdf)).to_numpy()
        n += len(pdf)
        yield pd.DataFrame({"key": key[0], "count": counts})
    state.update((n,))
    state.setTimeoutDuration(IDLE_TIMEOUT_MS)


def batch_ours(spark: SparkSession, directory: str) -> float:
    """B1 through the batch path: the whole input as one batch; seconds to write it to noop."""
    return _timed_noop(map_with_state(spark.read.parquet(directory), key="key", spec=running_count()))


def batch_group_by(spark: SparkSession, directory: str) -> float:
    """B1's reference: Spark's own aggregation of the same DataFrame."""
    df = spark.read.parquet(directory)
    return _timed_noop(df.groupBy("key").agg(F.count("*").alias("count"), F.sum("value").alias("sum")))


def _timed_noop(df: DataFrame) -> float:
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def _last_batch(query) -> int:
    progress = query.lastProgress
    return -1 if progress is None else int(progress.batchId)


def _stream(spark: SparkSession, directory: str, checkpoint: str, output_mode: str,
            build: Callable[[DataFrame], DataFrame], trigger_ms: Optional[int] = None,
            progress: Optional[list] = None, max_seconds: int = MAX_QUERY_SECONDS,
            query_name: Optional[str] = None) -> List[Batch]:
    """As bench/jvm/.../StreamingRun.scala: one file per batch, AvailableNow (or, with
    ``trigger_ms``, a processing-time trigger until every file has had its batch), the noop
    sink, per-batch numbers from StreamingQueryProgress (also appended to ``progress``, failed
    or not)."""
    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(directory)
    writer = (build(source).writeStream.format("noop").outputMode(output_mode)
              .option("checkpointLocation", checkpoint))
    if query_name:
        writer = writer.queryName(query_name)
    writer = (writer.trigger(processingTime=f"{trigger_ms} milliseconds") if trigger_ms
              else writer.trigger(availableNow=True))
    query = writer.start()
    try:
        if trigger_ms:
            # Batches without data are off (bench/__main__.py), so batch n has file n. Polled
            # through the last progress only: the Connect server answers while it runs batches.
            files = len(glob.glob(os.path.join(directory, "*.parquet")))
            deadline = time.monotonic() + max_seconds
            while _last_batch(query) < files - 1:
                if not query.isActive:
                    raise RuntimeError(f"the query stopped: {query.exception()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the query did not finish within {max_seconds} s")
                time.sleep(1)
        elif not query.awaitTermination(max_seconds):
            raise TimeoutError(f"the query did not finish within {max_seconds} s")
    finally:
        query.stop()
        if progress is not None:
            progress.extend(query.recentProgress)
    batches: List[Batch] = []
    for p in query.recentProgress:
        operators = p.stateOperators or []
        memory = sum(o.memoryUsedBytes for o in operators) if operators else -1
        rows = p.sink.numOutputRows if p.sink is not None else -1
        batches.append((int(p.numInputRows), int(p.durationMs.get("triggerExecution", 0)), int(memory),
                        int(rows)))
    return batches
