"""The workloads: which Parquet batches each scenario feeds every system, and which of those
batches are measured. Sizes live here and nowhere else, so ``--quick`` and ``--keys`` change
one table, not the harness."""
from dataclasses import dataclass, replace
from typing import List, Optional, Tuple

from bench.systems import (BIG_STATE, FLOOR, FMGWS_HDFS, FMGWS_ROCKSDB, FMGWS_SUM_HDFS,
                           FMGWS_TIMERS_HDFS, GROUPED, GROUPS, OURS, OURS_PYTHON, OURS_ROCKSDB,
                           PANDAS, PER_RECORD, PYTHON_PEERS, STREAMING, TIMERS, TIMERS_OURS, TWS,
                           TWS_TIMERS, WITH_PYTHON, System)

#: The batches excluded from every measurement: the first (it loads the state or starts cold)
#: and two warm-up batches after it (JIT, caches).
WARMUP = 2


@dataclass(frozen=True)
class BatchSpec:
    """One micro-batch's records. ``kind`` is how its keys are drawn:
    ``"new"``: keys ``start .. start+records-1``, each once (state grows);
    ``"existing"``: ``records`` keys drawn at random from ``0 .. key_space-1``;
    ``"all"``: every key of ``0 .. records-1`` once, in random order (full churn)."""

    kind: str
    records: int
    start: int = 0
    key_space: int = 0


@dataclass(frozen=True)
class Phase:
    """A measured stretch of a scenario: the batch indexes whose latency is reported together."""

    label: str
    batches: Tuple[int, ...]


@dataclass(frozen=True)
class Target:
    """A goal a scenario's table checks, on this run's figures: ``figure`` of ``system`` in
    phase ``phase`` divided by the same figure (or ``over_figure``) of ``over`` in phase
    ``over_phase``, at most
    (or ``at_least``) ``limit``. Phases are indexes into the scenario's phases (-1: the last);
    ``figure`` is "median_s" (median batch latency) or "records_per_s"."""

    label: str
    system: str
    over: str
    limit: float
    at_least: bool = False
    phase: int = 0
    over_phase: int = 0
    figure: str = "median_s"
    #: The figure of ``over`` when it differs (``p90_s`` over ``median_s``: the spread).
    over_figure: str = ""


@dataclass(frozen=True)
class TimerLoad:
    """S4's timers, the same in every system: a key's timer is ``(key % 100 + 1) × step_ms``
    after its batch for keys below ``timed_keys`` (a day for the others, so that growing the
    state adds no expirations), and a full cycle (100 × step) after its timing-out call.
    Batches run on a processing-time trigger of ``step_ms`` (not AvailableNow): processing
    time is the batch's start, so back-to-back batches would give a slower system more timers
    due per batch, and a slow batch more due in the next one."""

    step_ms: int
    timed_keys: int

    def conf(self) -> str:
        """As BenchMain reads it (spark.mapwithstate.bench.timers)."""
        return f"{self.step_ms},{self.timed_keys}"


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    batches: Tuple[BatchSpec, ...]
    phases: Tuple[Phase, ...]
    #: How many interleaved rounds every system runs (batches of all rounds are pooled).
    rounds: int = 1
    targets: Tuple[Target, ...] = ()
    #: The systems it runs, in table order; ``reference`` is the one the "× ours" column divides by.
    systems: Tuple[System, ...] = STREAMING
    reference: str = OURS.name
    #: S4's timer settings; None for scenarios without timers.
    timers: Optional[TimerLoad] = None
    #: The heap of the Connect server and of spark-submit ("": the suite's driver memory).
    memory: str = ""
    #: Spark settings of its own, over the suite's, for every system.
    conf: Tuple[Tuple[str, str], ...] = ()

    @property
    def records(self) -> int:
        return sum(b.records for b in self.batches)

    def data_name(self) -> str:
        """The data directory's name: changes whenever the batches do, so data is regenerated."""
        shape = "-".join(f"{b.kind[0]}{b.records}.{b.start}.{b.key_space}" for b in self.batches)
        return f"{self.name}-{_digest(shape)}"


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _spread() -> Target:
    """Ours' batches are steady: the p90 batch is close to the median one."""
    return Target("ours: p90 batch ÷ median batch", OURS.name, OURS.name, 1.3,
                  figure="p90_s", over_figure="median_s")


def _python_function(pandas_scale: float) -> Tuple[Target, ...]:
    """The Python state function's targets: its median batch as the Column spec's (it compiles
    to Columns), and per record at least 100× the same source run by each Python peer (on the
    input scaled down by ``pandas_scale``)."""
    return ((Target("Python state function median ÷ Column spec's", OURS_PYTHON.name,
                    OURS.name, 1.05),)
            + tuple(Target(f"Python state function records/s ÷ {peer.label.split(',')[0]}'s, "
                           f"the same source (at {pandas_scale:g}× size)", OURS_PYTHON.name,
                           peer.name, 100, at_least=True, figure="records_per_s")
                    for peer in PYTHON_PEERS))


def _transform_with_state(system: str = TWS.name, over: str = OURS.name,
                          phase: int = 0, at: str = "") -> Target:
    """Ours at least 5× faster than Spark 4's transformWithState (Scala, RocksDB): median
    batch latency, in ``phase`` (``at``: its words in the label)."""
    return Target(f"transformWithState (RocksDB) median ÷ ours{at}", system, over, 5.0,
                  at_least=True, phase=phase, over_phase=phase)


def _measured(first: int, last: int) -> Tuple[int, ...]:
    return tuple(range(first + WARMUP, last + 1))


def large_state(keys: int, churn: int, batches: int, rounds: int = 1,
                pandas_scale: float = 0.01) -> Scenario:
    """S1: batch 0 loads ``keys`` distinct keys, then ``batches`` of ``churn`` records on random
    existing keys."""
    specs = [BatchSpec("new", keys)] + [BatchSpec("existing", churn, key_space=keys)] * batches
    return Scenario("S1", f"large state, small churn ({_n(keys)} keys, batches of {_n(churn)})",
                    tuple(specs), (Phase(f"{_n(keys)} keys", _measured(1, batches)),), rounds,
                    (Target("median batch ÷ stateless floor", OURS.name, FLOOR.name, 1.3),
                     Target("flatMapGroupsWithState (HDFS) median ÷ ours", FMGWS_HDFS.name,
                            OURS.name, 2.5, at_least=True),
                     _transform_with_state(), _spread()) + _python_function(pandas_scale),
                    systems=WITH_PYTHON)


def full_churn(keys: int, batches: int, pandas_scale: float, rounds: int = 1) -> Scenario:
    """S2: every batch updates every one of ``keys`` keys once."""
    return Scenario("S2", f"full churn ({batches} batches of {_n(keys)} records over {_n(keys)} keys)",
                    tuple([BatchSpec("all", keys)] * batches),
                    (Phase(f"{_n(keys)} keys", _measured(1, batches - 1)),), rounds,
                    (Target("median batch ÷ stateless floor", OURS.name, FLOOR.name, 1.2),
                     _transform_with_state(), _spread(),
                     Target(f"records/s ÷ applyInPandasWithState's (at {pandas_scale:g}× size)",
                            OURS.name, PANDAS.name, 100, at_least=True, figure="records_per_s"))
                    + _python_function(pandas_scale), systems=WITH_PYTHON)


def state_growth(small: int, large: int, churn: int, batches: int, growth_batches: int) -> Scenario:
    """S3: batches of ``churn`` records on existing keys at ``small`` keys of state, then the state
    is grown to ``large`` keys by ``growth_batches`` of new keys, then the same batches at
    ``large`` keys. Growing 10k keys at a time would take hundreds of batches; the two measured
    phases answer the same question (does batch cost follow state size?) in minutes."""
    specs: List[BatchSpec] = [BatchSpec("new", small)]
    specs += [BatchSpec("existing", churn, key_space=small)] * batches
    step = -(-(large - small) // growth_batches)
    for start in range(small, large, step):
        specs.append(BatchSpec("new", min(step, large - start), start=start))
    first_large = len(specs)
    specs += [BatchSpec("existing", churn, key_space=large)] * batches
    phases = (Phase(f"{_n(small)} keys", _measured(1, batches)),
              Phase(f"{_n(large)} keys", tuple(range(first_large + WARMUP, len(specs)))))
    return Scenario("S3", f"state growth (batches of {_n(churn)}, state {_n(small)} -> {_n(large)} keys)",
                    tuple(specs), phases,
                    targets=(Target(f"median batch at {_n(large)} keys ÷ at {_n(small)} keys",
                                    OURS.name, OURS.name, 1.3, phase=-1),))


def grouped(records: int, keys: int, batches: int, rounds: int = 1) -> Scenario:
    """S5: every batch has ``records`` records over ``keys`` keys (about records/keys per key),
    aggregated per key per batch (count, sum) into the state: the case map_groups_with_state's
    one state read and write per key is for."""
    return Scenario(
        "S5", f"per-key aggregation ({batches} batches of {_n(records)} records over {_n(keys)} keys)",
        tuple([BatchSpec("existing", records, key_space=keys)] * batches),
        (Phase(f"{_n(keys)} keys", _measured(1, batches - 1)),), rounds,
        (Target("flatMapGroupsWithState (HDFS) median ÷ map_groups_with_state", FMGWS_SUM_HDFS.name,
                GROUPS.name, 2.0, at_least=True),
         Target("map_groups_with_state median ÷ stateless floor", GROUPS.name, FLOOR.name, 1.3),
         Target("map_with_state (per record) median ÷ map_groups_with_state", PER_RECORD.name,
                GROUPS.name, 1.0, at_least=True)),
        systems=GROUPED, reference=GROUPS.name)


def timers(small: int, timed: int, large: int, churn: int, batches: int, growth_batches: int,
           step_ms: int, scale: float = 1.0) -> Scenario:
    """S4: every key carries a timer, about 1% of the ``timed`` keys expiring per ``step_ms``
    (see :class:`TimerLoad`). Batches of ``churn`` records on existing keys at ``small`` keys of
    state, then (grown in one batch) at ``timed`` keys — the comparison with
    flatMapGroupsWithState — then, grown by ``growth_batches``, at ``large`` keys, the keys
    added last with far timers, so that batch cost at ``large`` vs ``small`` keys shows
    whether it follows the state size. ``scale`` multiplies every key count and batch size (the
    scaled-down systems' S4: the same batches, phases and step, about 1% of the timed keys
    still due per step)."""
    small, timed, large, churn = (int(n * scale) for n in (small, timed, large, churn))
    specs: List[BatchSpec] = [BatchSpec("new", small)]
    specs += [BatchSpec("existing", churn, key_space=small)] * batches
    phases = [Phase(f"{_n(small)} keys", _measured(1, batches))]
    for start, end, grow in ((small, timed, 1), (timed, large, growth_batches)):
        step = -(-(end - start) // grow)
        for first in range(start, end, step):
            specs.append(BatchSpec("new", min(step, end - first), start=first))
        first_measured = len(specs)
        specs += [BatchSpec("existing", churn, key_space=end)] * batches
        phases.append(Phase(f"{_n(end)} keys", tuple(range(first_measured + WARMUP, len(specs)))))
    return Scenario(
        "S4", f"timers ({_n(churn)} records per batch; every key with a timer, about 1% of "
              f"{_n(timed)} expiring per {step_ms} ms; state {_n(small)} -> {_n(large)} keys)",
        tuple(specs), tuple(phases),
        targets=(Target(f"flatMapGroupsWithState (HDFS) median ÷ ours at {_n(timed)} keys",
                        FMGWS_TIMERS_HDFS.name, TIMERS_OURS.name, 5.0, at_least=True,
                        phase=1, over_phase=1),
                 _transform_with_state(TWS_TIMERS.name, TIMERS_OURS.name, phase=1,
                                       at=f" at {_n(timed)} keys"),
                 Target(f"median batch ÷ stateless floor at {_n(timed)} keys", TIMERS_OURS.name,
                        FLOOR.name, 1.3, phase=1, over_phase=1),
                 Target(f"median batch at {_n(large)} keys ÷ at {_n(small)} keys",
                        TIMERS_OURS.name, TIMERS_OURS.name, 1.3, phase=2, over_phase=0),
                 Target(f"median batch at {_n(large)} keys ÷ at {_n(timed)} keys (the same "
                        "timers expiring)", TIMERS_OURS.name, TIMERS_OURS.name, 1.3, phase=2,
                        over_phase=1)),
        systems=TIMERS, reference=TIMERS_OURS.name, timers=TimerLoad(step_ms, timed))


#: Spark's RocksDB store with the memory settings the RocksDB backend runs it with by default
#: (StateBackend.RocksDB: changelog checkpointing, Spark's default per-instance memory), so that
#: flatMapGroupsWithState's store has the same. Row counting is each system's own default:
#: Spark's store counts for flatMapGroupsWithState (its numTotalStateRows needs it), ours counts
#: its keys itself.
ROCKSDB_CONF = (("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true"),
                ("spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage", "false"))


def big_state(small: int, large: int, churn: int, batches: int, growth_batches: int,
              heap: str, heap_budget: Optional[str] = None) -> Scenario:
    """S6: S3's shape (batches of ``churn`` records at ``small`` keys, growth to ``large`` keys,
    the same batches at ``large`` keys) with every system's heap at ``heap``: the heap backend
    must stop with its budget error (``heap_budget``, when set, instead of the default budget:
    for a small run), RocksDB must finish."""
    grown = state_growth(small, large, churn, batches, growth_batches)
    budget = (("spark.mapwithstate.stateStore.maxPartitionBytes", heap_budget),) if heap_budget else ()
    return replace(
        grown, name="S6",
        title=f"state larger than the heap ({_n(small)} -> {_n(large)} keys, batches of "
              f"{_n(churn)}, {heap} heap)",
        targets=tuple(Target(f"flatMapGroupsWithState (RocksDB) median ÷ ours on RocksDB "
                             f"({p.label})", FMGWS_ROCKSDB.name, OURS_ROCKSDB.name, 1.5,
                             at_least=True, phase=i, over_phase=i)
                      for i, p in enumerate(grown.phases)),
        systems=BIG_STATE, reference=OURS_ROCKSDB.name, memory=heap,
        conf=ROCKSDB_CONF + budget)


@dataclass(frozen=True)
class BatchJob:
    """B1: one batch of ``rows`` records over ``keys`` keys, through the batch path."""

    name: str
    rows: int
    keys: int
    files: int = 4
    #: Ours' median time ÷ groupBy().agg()'s, at most.
    target: float = 1.2

    @property
    def title(self) -> str:
        return f"batch path ({_n(self.rows)} rows, {_n(self.keys)} keys, one batch)"

    def data_name(self) -> str:
        return f"{self.name}-{self.rows}-{self.keys}-{self.files}"


@dataclass(frozen=True)
class Suite:
    """Everything one run measures: the streaming scenarios at full size, the same scenarios
    scaled down for applyInPandasWithState (far too slow for full size), and B1 with how often
    each of its two systems runs (interleaved, after one unmeasured run each)."""

    streaming: Tuple[Scenario, ...]
    pandas: Tuple[Scenario, ...]
    pandas_scale: float
    batch: BatchJob
    batch_rounds: int
    #: S6, run only when named (``--only S6``): it takes its own servers and far longer.
    big_state: Optional[Scenario] = None
    #: The small input every process runs each of its systems over once, unmeasured, before
    #: its first measured query (see :func:`warm_up`).
    warm_up: Optional[Scenario] = None


def warm_up(keys: int, churn: int, batches: int) -> Scenario:
    """The warm-up input: S1's shape at a small size. The Connect server serves every round of
    every scenario from one JVM, while each spark-submit is a fresh JVM: without a warm-up the
    server's first query would pay for compiling the plugin's and Spark's code paths (its
    batches about 1.5× slower than the same query's later rounds), and each spark-submit's first
    system would pay for its JVM. So every process first runs each of its systems over this
    input, unmeasured, and every measured query runs on a warm JVM."""
    return replace(large_state(keys, churn, batches), name="W",
                   title=f"S1's shape at {_n(keys)} keys, batches of {_n(churn)}", targets=())


def suite(quick: bool, keys: int, rounds: Optional[int] = None) -> Suite:
    """The default suite (``keys`` is S1's state size, 1M by default) or the ``--quick`` one;
    ``rounds``, when given, is every streaming scenario's number of rounds (more batches to
    pool at a small size on a busy machine)."""
    plan = _suite(quick, keys)
    if rounds is None:
        return plan
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    return replace(plan, streaming=tuple(replace(s, rounds=rounds) for s in plan.streaming))


def _suite(quick: bool, keys: int) -> Suite:
    if quick:
        s1, churn, s2, s3 = keys, 2_000, 20_000, (10_000, 200_000, 2_000)
        batches, pandas_scale, b1 = 6, 0.01, BatchJob("B1", 500_000, 100_000)
        return Suite((large_state(s1, churn, batches, pandas_scale=pandas_scale),
                      full_churn(s2, batches, pandas_scale),
                      state_growth(*s3, batches=5, growth_batches=2),
                      timers(10_000, 100_000, 200_000, 2_000, batches, 1, step_ms=500),
                      grouped(100_000, 10_000, batches)),
                     (large_state(int(s1 * pandas_scale), int(churn * pandas_scale), batches),
                      full_churn(int(s2 * pandas_scale), batches, pandas_scale),
                      timers(10_000, 100_000, 200_000, 2_000, batches, 1, step_ms=500,
                             scale=pandas_scale),
                      grouped(int(100_000 * pandas_scale), int(10_000 * pandas_scale), batches)),
                     pandas_scale, b1, batch_rounds=2,
                     big_state=big_state(50_000, 500_000, 5_000, batches=5, growth_batches=3,
                                         heap="2g", heap_budget="4m"),
                     warm_up=warm_up(5_000, 500, 6))
    # Two rounds where a round is cheap (S5 too: one round left its systems minutes apart under
    # different load); S3 once: loading 5M keys into every system dominates it.
    pandas_scale = 0.01
    return Suite((large_state(keys, 10_000, 20, rounds=2, pandas_scale=pandas_scale),
                  full_churn(200_000, 20, pandas_scale, rounds=2),
                  state_growth(100_000, 5_000_000, 10_000, batches=10, growth_batches=5),
                  timers(100_000, 1_000_000, 5_000_000, 10_000, batches=10, growth_batches=4,
                         step_ms=1000),
                  grouped(1_000_000, 100_000, 10, rounds=2)),
                 (large_state(int(keys * pandas_scale), int(10_000 * pandas_scale), 20),
                  full_churn(int(200_000 * pandas_scale), 20, pandas_scale),
                  timers(100_000, 1_000_000, 5_000_000, 10_000, batches=10, growth_batches=4,
                         step_ms=1000, scale=pandas_scale),
                  grouped(int(1_000_000 * pandas_scale), int(100_000 * pandas_scale), 10)),
                 pandas_scale, BatchJob("B1", 5_000_000, 1_000_000), batch_rounds=3,
                 big_state=big_state(1_000_000, 20_000_000, 100_000, batches=8,
                                     growth_batches=19, heap="2g"),
                 warm_up=warm_up(50_000, 5_000, 12))


def _n(n: int) -> str:
    """1000000 -> 1M, 200000 -> 200k."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size and n % (size // 10) == 0:
            value = n / size
            return f"{value:g}{unit}"
    return f"{n:,}"
