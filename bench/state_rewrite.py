"""How long rewriting a large state takes: repartitioning a checkpoint, and the restarts that
convert or migrate its state, against a plain restart.

Run by hand, apart from ``bench/run`` (it starts its own local servers with the built jar):

    .venv/bin/python -m bench.state_rewrite [--keys 10000000] [--backends memory,rocksdb]

For each backend it builds one checkpoint of ``--keys`` keys — a running count and sum per key
(``n INT, total BIGINT``, an idle timeout of a day, so every key has an idle clock) over
Parquet generated on the server, two micro-batches of half the keys each — then times, each on
a copy of that checkpoint and each in a server of its own (a restart is a new driver):

- ``restart``: the same spec restarted on one more micro-batch of 1000 records (the baseline:
  the query's start, the state's load and one small batch);
- ``convert``: restarted with ``n BIGINT, total BIGINT, seen TIMESTAMP`` (a field widened, one
  added): the first batch converts every key's state (docs/evolving-state.md);
- ``migrate``: restarted with ``count BIGINT, sum BIGINT`` and ``StateSpec.migrate``;
- ``repartition 4->8`` then ``8->4``: ``mws.repartition_state`` twice on one copy, then a
  restart on the 4 partitions it ends with.

Each line gives the wall time, the state's key count where the case reports one (checked
against ``--keys``) and the server's peak resident memory (``VmHWM``: heap and RocksDB's native
memory). Nothing is asserted in tests; the figures are in bench/README.md.
"""

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import mapwithstate as mws
from bench.rss import PeakRss
from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S

__all__ = ["Case", "main", "run_cases"]

INPUT_SCHEMA = "k BIGINT, v BIGINT"
LIVE_RECORDS = 1000
IDLE = "1 day"


def _nothing() -> "F.Column":
    """Emits nothing (a null struct): the cases measure the state's work, not a sink's."""
    return F.when(F.lit(False), F.struct(F.col("k")))


def _count(field: str, cast: Optional[str] = None) -> "F.Column":
    old = S.state(field) if cast is None else S.state(field).cast(cast)
    return (F.coalesce(old, F.lit(0)) + 1).alias(field)


def _sum(field: str) -> "F.Column":
    return (F.coalesce(S.state(field), F.lit(0)) + F.col("v")).alias(field)


def original_spec() -> StateSpec:
    """The spec the checkpoint is built with: a count (INT) and a sum per key."""
    return StateSpec.function("n INT, total BIGINT",
                              update=F.struct(_count("n").cast("int").alias("n"),
                                              _sum("total")),
                              emit=_nothing()).timeout(IDLE)


def converted_spec() -> StateSpec:
    """``n`` widened to BIGINT and ``seen`` added: converted on restart by the rules."""
    return StateSpec.function("n BIGINT, total BIGINT, seen TIMESTAMP",
                              update=F.struct(_count("n"), _sum("total"),
                                              S.batch_time().alias("seen")),
                              emit=_nothing()).timeout(IDLE)


def migrated_spec() -> StateSpec:
    """Fields renamed (``n`` to ``count``, widened; ``total`` to ``sum``) by a migration."""
    return StateSpec.function("count BIGINT, sum BIGINT",
                              update=F.struct(_count("count"), _sum("sum")), emit=_nothing()) \
        .timeout(IDLE) \
        .migrate(F.struct(S.state("n").cast("bigint").alias("count"),
                          S.state("total").alias("sum")))


@dataclass
class Case:
    """One measured step: its name, wall seconds, the keys it reported, the server's peak RSS."""

    backend: str
    name: str
    seconds: float
    keys: Optional[int]
    peak_rss: Optional[int]

    def line(self) -> str:
        rss = f"{self.peak_rss / 2**30:6.2f} GiB" if self.peak_rss else "      n/a"
        keys = f"{self.keys:>10}" if self.keys is not None else f"{'':>10}"
        return f"{self.backend:<8} {self.name:<22} {self.seconds:8.1f} s {keys} keys  {rss}"


class Servers:
    """Starts each step's own local server (``conf`` as given) and samples its peak RSS."""

    def __init__(self, conf: Dict[str, str]):
        self.conf = conf

    def measure(self, backend: str, name: str,
                step: Callable[[SparkSession], Optional[int]]) -> Case:
        server = mws.LocalConnectServer(conf=self.conf)
        try:
            assert server.pid is not None
            rss = PeakRss(server.pid).start()
            spark = server.session()
            started = time.monotonic()
            keys = step(spark)
            seconds = time.monotonic() - started
            case = Case(backend, name, seconds, keys, rss.stop())
        finally:
            server.stop()
        print(case.line(), flush=True)
        return case


def _stream(spark: SparkSession, source: str, spec: StateSpec, checkpoint: str,
            files_per_batch: int) -> Optional[int]:
    """Runs the query on what ``source`` has that the checkpoint has not read (AvailableNow);
    returns the state's key count after its last batch."""
    records = spark.readStream.schema(INPUT_SCHEMA) \
        .option("maxFilesPerTrigger", files_per_batch).parquet(source)
    query = map_with_state(records, key="k", spec=spec).writeStream.format("noop") \
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    progress = query.lastProgress
    return progress["stateOperators"][0]["numRowsTotal"] if progress else None


def _checked(keys: Optional[int], expected: int, what: str) -> Optional[int]:
    if keys is not None and keys != expected:
        raise AssertionError(f"{what}: the state holds {keys} keys, expected {expected}")
    return keys


def run_cases(servers: Servers, root: str, keys: int, backend: str,
              files: int = 4) -> List[Case]:
    """Builds a checkpoint of ``keys`` keys on ``backend`` under ``root`` and measures every
    case on a copy of it; returns the cases in order, the build first."""
    source = os.path.join(root, f"{backend}-input")
    built = os.path.join(root, f"{backend}-built")

    def spec(s: StateSpec) -> StateSpec:
        return s.backend(backend)

    def generate(spark: SparkSession) -> None:
        spark.range(keys).select(F.col("id").alias("k"), (F.col("id") % 7).alias("v")) \
            .repartition(files).write.parquet(source)

    def build(spark: SparkSession) -> Optional[int]:
        return _checked(_stream(spark, source, spec(original_spec()), built, files // 2),
                        keys, "build")

    cases = [servers.measure(backend, "generate input", generate)]
    cases.append(servers.measure(backend, f"build ({keys} keys)", build))
    _add_live_batch(servers, source)

    def copy(name: str) -> str:
        target = os.path.join(root, f"{backend}-{name}")
        shutil.copytree(built, target)
        return target

    def restart(new_spec: StateSpec, checkpoint: str) -> Callable[[SparkSession], Optional[int]]:
        return lambda spark: _checked(
            _stream(spark, source, spec(new_spec), checkpoint, files), keys, "restart")

    cases.append(servers.measure(backend, "restart", restart(original_spec(), copy("restart"))))
    cases.append(servers.measure(backend, "convert (widen + add)",
                                 restart(converted_spec(), copy("convert"))))
    cases.append(servers.measure(backend, "migrate (rename)",
                                 restart(migrated_spec(), copy("migrate"))))
    repartitioned = copy("repartition")
    for old, new in ((4, 8), (8, 4)):
        def rewrite(spark: SparkSession, new: int = new) -> Optional[int]:
            summary = mws.repartition_state(spark, repartitioned, new)
            return _checked(summary.keys, keys, f"repartition to {new}")

        cases.append(servers.measure(backend, f"repartition {old}->{new}", rewrite))
    cases.append(servers.measure(backend, "restart after 8->4",
                                 restart(original_spec(), repartitioned)))
    return cases


def _add_live_batch(servers: Servers, source: str) -> None:
    """Adds the restarts' micro-batch to ``source``: ``LIVE_RECORDS`` records of existing
    keys, one Parquet file written aside and moved in whole (the source must not see it half
    written)."""
    with tempfile.TemporaryDirectory(dir=os.path.dirname(source)) as scratch:
        target = os.path.join(scratch, "live")
        server = mws.LocalConnectServer(conf=servers.conf)
        try:
            server.session().range(LIVE_RECORDS) \
                .select((F.col("id") * 7).alias("k"), F.lit(1).cast("bigint").alias("v")) \
                .coalesce(1).write.parquet(target)
        finally:
            server.stop()
        (part,) = [n for n in os.listdir(target) if n.endswith(".parquet")]
        os.rename(os.path.join(target, part), os.path.join(source, f"live-{part}"))


def main(argv: Optional[List[str]] = None) -> List[Case]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--backends", default="memory,rocksdb")
    parser.add_argument("--driver-memory", default="8g",
                        help="the local server's heap (spark.driver.memory; Spark's default: 1g)")
    parser.add_argument("--dir", default=None, help="where checkpoints go (default: a temp dir, "
                                                    "removed at the end)")
    args = parser.parse_args(argv)
    conf = {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": args.driver_memory}
    root = args.dir or tempfile.mkdtemp(prefix="mws-state-rewrite-")
    print(f"{args.keys} keys, heap {args.driver_memory}, load average "
          f"{os.getloadavg()[0]:.1f}, under {root}", flush=True)
    cases: List[Case] = []
    try:
        for backend in args.backends.split(","):
            cases += run_cases(Servers(conf), root, args.keys, backend.strip())
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}", flush=True)
    return cases


if __name__ == "__main__":
    main()
