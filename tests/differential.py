"""The differential harness: one Python state function run by ``mapwithstate.testing`` and by
the real server (compiled by ``mws.state_function``) over the same random cases, compared batch
by batch.

All cases of one function go through one query: each case's keys are prefixed with its number
(``"12/a"``), so the emitted rows (which carry the key) and the state snapshots tell the cases
apart, while the runner simulates the whole query at once (the watermark is global to a query,
as on the server). A case where Python raises is left out of the shared query, and checked on
its own: the server must fail too, naming the Python exception.
"""
import dataclasses
import glob
import math
import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mapwithstate import map_groups_with_state, map_with_state
from mapwithstate.testing import BatchResult, Tester, replay
from streams import micro_batches

EPOCH = datetime(1970, 1, 1)
# The replay's batches: one a second from here (processing-time timers count in seconds).
REPLAY_T0 = datetime(2030, 1, 1)
# A case that raises is checked on its own on the server: at most this many per function.
ERROR_CASES = 2

Rows = List[Dict[str, Any]]


@dataclass(frozen=True)
class Function:
    """What the harness needs of one state function: the function, its spec (``spec(spark,
    initial)`` returns the compiled spec with its settings and that initial-state DataFrame),
    the key column, the input's other columns (name -> type) and, for the runner, the spec's
    settings as :class:`Tester` keywords and the input's watermark."""

    name: str
    function: Callable[..., Any]
    spec: Callable[[Any, Any], Any]
    key: str
    columns: Dict[str, str]
    state_schema: str
    settings: Dict[str, Any]
    event_time: Optional[str] = None
    delay: Optional[str] = None
    initial_state: Optional[Rows] = None
    # The spec itself, when the runner should read its settings from it (the realistic ones).
    runner_spec: Any = None
    # The server's output columns (with_output_schema): the runner holds emitted values as
    # they do (an int in a DOUBLE column must be exactly a double).
    output_schema: Any = None

    def runner_arguments(self) -> Tuple[Any, Dict[str, Any]]:
        """What the runner is given: the spec, or the function and its state schema."""
        if self.runner_spec is not None:
            return self.runner_spec, {}
        return self.function, {"state_schema": self.state_schema}

    @property
    def groups(self) -> bool:
        import inspect

        return "rows" in inspect.signature(self.function).parameters

    def schema(self) -> str:
        columns = {self.key: "STRING", **self.columns}
        return ", ".join(f"{n} {t}" for n, t in columns.items())


@dataclass
class Outcome:
    """What one way of running produced: the emitted rows, the snapshots per batch time."""

    emitted: List[Tuple]
    snapshots: Dict[datetime, List[Tuple]]


def prefixed(function: Function, cases: Sequence[Tuple[int, List[Rows]]]) -> List[Rows]:
    """The batches of all cases together: batch b holds every case's batch b, each record's
    key prefixed with its case."""
    combined: List[Rows] = [[] for _ in range(max(len(c) for _, c in cases))]
    for number, case in cases:
        for b, batch in enumerate(case):
            for record in batch:
                combined[b].append({**record, function.key: f"{number}/{record[function.key]}"})
    return combined


def initial_rows(function: Function, numbers: Sequence[int]) -> Optional[Rows]:
    if function.initial_state is None:
        return None
    return [{**row, function.key: f"{n}/{row[function.key]}"}
            for n in numbers for row in function.initial_state]


def runner_settings(function: Function, numbers: Sequence[int]) -> Dict[str, Any]:
    settings = dict(function.settings)
    if function.output_schema is not None:
        settings["output_schema"] = function.output_schema
    if function.event_time is not None:
        settings.update(event_time=function.event_time, watermark_delay=function.delay)
    initial = initial_rows(function, numbers)
    if initial is not None:
        settings["initial_state"] = initial
    return settings


def draw_cases(strategy, count: int, seed_value: int) -> List[Tuple[int, List[Rows]]]:
    """``count`` cases drawn by hypothesis from a fixed seed: the examples of one seeded run,
    numbered (no shrinking: a failing case's number and inputs are in the failure message)."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    cases: List[List[Rows]] = []

    @seed(seed_value)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(case: List[Rows]) -> None:
        cases.append(case)

    collect()
    return list(enumerate(cases))


# --- the runner -------------------------------------------------------------------------

def run_replay_in_python(function: Function, cases: List[Tuple[int, List[Rows]]]
                         ) -> List[BatchResult]:
    rows = replay_rows(function, cases)
    runnable, arguments = function.runner_arguments()
    return replay(runnable, rows, key=function.key, batch_time="bt", batch_interval="1 second",
                  order_by=None if function.groups else "seq", **arguments,
                  **runner_settings(function, [n for n, _ in cases]))


def split_raising(function: Function, cases: List[Tuple[int, List[Rows]]]
                  ) -> Tuple[List[Tuple[int, List[Rows]]], List[Tuple[Tuple[int, List[Rows]],
                                                                      Exception]]]:
    """The cases the runner runs through together, and those where Python raises (alone)."""
    passing, raising = [], []
    for case in cases:
        try:
            run_replay_in_python(function, [case])
            passing.append(case)
        except Exception as error:  # noqa: BLE001 - any exception Python raises is the point
            raising.append((case, error))
    # Cases are independent except through the watermark: if together they raise, drop the
    # later half until they do not.
    while passing:
        try:
            run_replay_in_python(function, passing)
            break
        except Exception:  # noqa: BLE001
            passing = passing[:len(passing) // 2]
    return passing, raising


def errors_of_each_key_alone(function: Function, case: Tuple[int, List[Rows]]
                             ) -> List[Exception]:
    """The exceptions Python raises for a raising case's keys, each run alone. A replay runs
    each key through all its batches independently of the others, in no set order and in
    parallel, so the server's first error may be any raising key's first error."""
    number, batches = case
    keys = list(dict.fromkeys(r[function.key] for batch in batches for r in batch))
    errors = []
    for key in keys:
        alone = [[r for r in batch if r[function.key] == key] for batch in batches]
        try:
            run_replay_in_python(function, [(number, alone)])
        except Exception as error:  # noqa: BLE001 - any exception Python raises is the point
            errors.append(error)
    return errors


def replay_rows(function: Function, cases: List[Tuple[int, List[Rows]]]) -> Rows:
    rows, seq = [], 0
    for b, batch in enumerate(prefixed(function, cases)):
        for record in batch:
            rows.append({**record, "seq": seq, "bt": REPLAY_T0 + timedelta(seconds=b)})
            seq += 1
    return rows


def python_outcome(results: List[BatchResult]) -> Outcome:
    return Outcome(
        emitted=canonical([tuple(r.values()) for b in results for r in b.emitted]),
        snapshots={b.batch_time: canonical([tuple(r.values()) for r in b.snapshots])
                   for b in results if b.snapshots})


# --- the server -------------------------------------------------------------------------

def with_output_schema(spark, function: Function, cases: List[Tuple[int, List[Rows]]]
                       ) -> Function:
    """``function`` with the output columns the compiled function has (a query planned, not
    run), for the runner to hold emitted values as they do."""
    schema = server_replay(spark, function, cases[:1]).schema
    return dataclasses.replace(function, output_schema=schema)


def replay_with_output_schema(spark, function: Function, cases: List[Tuple[int, List[Rows]]]
                              ) -> Tuple[Function, List[Tuple[int, List[Rows]]],
                                         List[Tuple[Tuple[int, List[Rows]], Exception]], Any]:
    """``function`` with its output columns, its passing and raising cases (as
    :func:`split_raising` gives them with those columns), and the server's replay of the
    passing cases as a DataFrame.

    The output columns are read from that very DataFrame, so that its collect finds the plan
    its schema request analysed in the server's plan cache: the analysis of a compiled
    function is most of a replay's time. The columns can make more cases raise (an int
    emitted into a DOUBLE that no double holds exactly); the passing cases are split again
    with them, and the replay rebuilt only if that changed them."""
    passing, _ = split_raising(function, cases)
    replayed = server_replay(spark, function, passing or cases[:1])
    function = dataclasses.replace(function, output_schema=replayed.schema)
    checked, raising = split_raising(function, cases)
    if checked != passing and checked:
        replayed = server_replay(spark, function, checked)
    return function, checked, raising, replayed


def server_replay(spark, function: Function, cases: List[Tuple[int, List[Rows]]],
                  output: str = "emitted"):
    """The DataFrame of the server's replay of ``cases``."""

    rows = replay_rows(function, cases)
    columns = [function.key, *function.columns, "seq", "bt"]
    schema = function.schema() + ", seq BIGINT, bt TIMESTAMP"
    df = spark.createDataFrame([tuple(r.get(c) for c in columns) for r in rows], schema)
    if function.event_time is not None:
        df = df.withWatermark(function.event_time, function.delay)
    spec = function.spec(spark, initial_frame(spark, function, [n for n, _ in cases]))
    if function.groups:
        # One input partition keeps each key's records in order through the shuffle.
        return map_groups_with_state(df.coalesce(1), key=function.key, spec=spec,
                                     batch_time="bt", batch_interval="1 second",
                                     output=output)
    return map_with_state(df, key=function.key, spec=spec, batch_time="bt",
                          batch_interval="1 second", order_by="seq", output=output)


def initial_frame(spark, function: Function, numbers: Sequence[int]):
    rows = initial_rows(function, numbers)
    if rows is None:
        return None
    fields = [function.key] + [f.split()[0] for f in function.state_schema.split(", ")]
    schema = f"{function.key} STRING, {function.state_schema}"
    return spark.createDataFrame([tuple(r.get(f) for f in fields) for r in rows], schema)


def server_outcome(emitted_df, snapshots_df) -> Outcome:
    snapshots: Dict[datetime, List[Tuple]] = {}
    for row in snapshots_df.collect():
        snapshots.setdefault(row["batch_time"], []).append(tuple(row))
    return Outcome(emitted=canonical([tuple(r) for r in emitted_df.collect()]),
                   snapshots={t: canonical(rows) for t, rows in snapshots.items()})


# --- streams ----------------------------------------------------------------------------

class ParquetStream:
    """A stream's input as one Parquet file per micro-batch (``maxFilesPerTrigger=1``), each
    written by the server itself, so types (timestamps, doubles, nulls) arrive as they are."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.input = os.path.join(root, "in")
        os.makedirs(self.input)
        self.files = 0
        self.base_time = time.time() - 10_000

    def add(self, spark, function: Function, batch: Rows) -> None:
        columns = [function.key, *function.columns]
        staging = os.path.join(self.root, f"staging-{self.files}")
        spark.createDataFrame([tuple(r.get(c) for c in columns) for r in batch],
                              function.schema()).coalesce(1).write.parquet(staging)
        (part,) = glob.glob(os.path.join(staging, "part-*.parquet"))
        path = os.path.join(self.input, f"batch-{self.files:05d}.parquet")
        shutil.move(part, path)
        # The file source takes files in modification-time order: the order added.
        stamp = self.base_time + self.files
        os.utime(path, (stamp, stamp))
        self.files += 1

    def read(self, spark, function: Function):
        df = spark.readStream.schema(function.schema()).option("maxFilesPerTrigger", 1) \
            .parquet(self.input)
        if function.event_time is not None:
            df = df.withWatermark(function.event_time, function.delay)
        return df


def server_stream(spark, function: Function, stream: ParquetStream, numbers: Sequence[int],
                  output: str, name: str):
    """Runs the function over the stream to its end; returns (rows in order, batches), the
    batches from the checkpoint's offset log: (batch time, watermark, files read)."""
    df = stream.read(spark, function)
    spec = function.spec(spark, initial_frame(spark, function, numbers))
    result = (map_groups_with_state(df, key=function.key, spec=spec, output=output)
              if function.groups else
              map_with_state(df, key=function.key, spec=spec, output=output))
    checkpoint = os.path.join(stream.root, f"ck-{name}")
    query = result.writeStream.format("memory").queryName(name).outputMode("append") \
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    rows = [tuple(r) for r in spark.table(name).collect()]
    return rows, offset_log(checkpoint)


def offset_log(checkpoint: str) -> List[Tuple[datetime, Optional[datetime], List[int]]]:
    """Each micro-batch's (batch time, watermark, indexes of the files it read), in order."""
    return [(EPOCH + timedelta(milliseconds=b.time_ms),
             EPOCH + timedelta(milliseconds=b.watermark_ms), b.files)
            for b in micro_batches(checkpoint)]


def run_stream_in_python(function: Function, cases: List[Tuple[int, List[Rows]]],
                         batches) -> List[BatchResult]:
    """The runner over the micro-batches the server ran, checking each batch's watermark."""
    files = prefixed(function, cases)
    runnable, arguments = function.runner_arguments()
    tester = Tester(runnable, key=function.key, stream=True, **arguments,
                    **runner_settings(function, [n for n, _ in cases]))
    results = []
    for batch_id, (batch_time, watermark, read) in enumerate(batches):
        records = [r for i in read for r in files[i]]
        result = tester.batch(records, batch_time)
        if function.event_time is not None:
            assert result.watermark == watermark, \
                f"micro-batch {batch_id}: the runner's watermark {result.watermark}, the " \
                f"server's {watermark}"
        results.append(result)
    return results


# --- comparing ----------------------------------------------------------------------------

def canonical(rows: List[Tuple]) -> List[Tuple]:
    """Rows in one order, each value in a form both sides share: a whole float as an int
    (a Python function's ``max(2, 1.5)`` is an int, the column a DOUBLE), Rows as tuples."""
    normal = [tuple(_canonical(v) for v in row) for row in rows]
    return sorted(normal, key=repr)


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() \
            and abs(value) < 2 ** 63:
        return int(value)
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((_canonical(k), _canonical(v)) for k, v in value.items()))
    return value


def case_of(row: Tuple) -> str:
    """The case a row belongs to: the prefix of its key (every corpus row emits its key
    first)."""
    for value in row:
        if isinstance(value, str) and "/" in value:
            return value.split("/", 1)[0]
    return "?"


def differences(ours: List[Tuple], theirs: List[Tuple], limit: int = 8) -> str:
    """The rows only one side has, grouped by case, for the failure message."""
    only_ours, only_theirs = list(ours), list(theirs)
    for row in theirs:
        if row in only_ours:
            only_ours.remove(row)
            only_theirs.remove(row)
    lines = [f"  python only: {r}" for r in only_ours[:limit]]
    lines += [f"  server only: {r}" for r in only_theirs[:limit]]
    cases = sorted({case_of(r) for r in only_ours + only_theirs})
    return f"cases {', '.join(cases)} differ:\n" + "\n".join(lines)
