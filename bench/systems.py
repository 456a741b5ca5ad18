"""Every system the benchmark runs, once: its name in tables and raw results, its label, and
where it runs (the Connect server, or spark-submit through the Scala ``bench`` project). The
harness, the report and the Scala side's names all come from here."""
from dataclasses import dataclass
from typing import Dict, Tuple


@dataclass(frozen=True)
class System:
    name: str
    label: str
    #: "connect": run through the local Connect server; "jvm": BenchMain under spark-submit.
    runs_on: str


OURS = System("ours", "**ours**: map_with_state (Connect)", "connect")
PANDAS = System("pandas", "applyInPandasWithState (Connect)", "connect")
#: The same running count written as a Python state function (compiled to Columns), and that
#: same Python source run per record by PySpark's Python stateful operators
#: (bench/python_function.py).
OURS_PYTHON = System("ours-python", "**ours**: map_with_state, Python state function (Connect)",
                     "connect")
#: Ours with order_by: each key's records of a micro-batch sorted (by value) before the calls.
OURS_ORDERED = System("ours-ordered", "**ours**: map_with_state, order_by (Connect)", "connect")
PANDAS_PYTHON = System("pandas-python", "applyInPandasWithState, the Python state function "
                       "(Connect)", "connect")
#: S1's and S2's transformWithState rows from Python: the state function called per record, no
#: idle timeout (the vectorized, timed transformWithStateInPandas is S4's and S5's).
TWS_PYTHON = System("tws-python", "transformWithState (rows), the Python state function per "
                    "record, no idle timeout (Connect)", "connect")
TWS_PANDAS_PYTHON = System("tws-pandas-python", "transformWithStateInPandas, the Python state "
                           "function per record, no idle timeout (Connect)", "connect")
FLOOR = System("floor", "stateless floor", "jvm")
#: The same floor on the Connect server that runs ours: not a target's reference (the issue's
#: floor is the spark-submit one), it tells ours' cost from the server process's own.
FLOOR_CONNECT = System("floor-connect", "stateless floor (Connect)", "connect")
FMGWS_HDFS = System("fmgws-hdfs", "flatMapGroupsWithState, HDFS store", "jvm")
FMGWS_ROCKSDB = System("fmgws-rocksdb", "flatMapGroupsWithState, RocksDB store", "jvm")
DSTREAM = System("dstream", "DStream mapWithState", "jvm")
#: Spark 4's transformWithState as a Scala user writes it (bench/jvm): a ValueState per key on
#: Spark's RocksDB store, in processing time.
TWS = System("tws", "transformWithState, RocksDB store (ValueState, idle timer)", "jvm")
TWS_SUM = System("tws-sum", "transformWithState (count, sum), RocksDB store", "jvm")
TWS_TIMERS = System("tws-timers", "transformWithState, TimerValues timers, RocksDB store", "jvm")
#: transformWithStateInPandas, vectorized (bench/pandas_processors.py), on the scaled-down input.
TWS_PANDAS_SUM = System("tws-pandas-sum", "transformWithStateInPandas (count, sum), vectorized "
                        "(Connect)", "connect")
TWS_PANDAS_TIMERS = System("tws-pandas-timers", "transformWithStateInPandas, timers, vectorized "
                           "(Connect)", "connect")
GROUP_BY = System("groupby", "groupBy().agg(count, sum)", "connect")
GROUPS = System("groups", "**ours**: map_groups_with_state (count, sum)", "connect")
PER_RECORD = System("ours-sum", "map_with_state (count, sum per record)", "connect")
FMGWS_SUM_HDFS = System("fmgws-sum-hdfs", "flatMapGroupsWithState (count, sum), HDFS store", "jvm")
FMGWS_SUM_ROCKSDB = System("fmgws-sum-rocksdb", "flatMapGroupsWithState (count, sum), RocksDB store",
                           "jvm")
TIMERS_OURS = System("ours-timers", "**ours**: map_with_state, timeout_at timers (Connect)", "connect")
FMGWS_TIMERS_HDFS = System("fmgws-timers-hdfs", "flatMapGroupsWithState, timers, HDFS store", "jvm")
FMGWS_TIMERS_ROCKSDB = System("fmgws-timers-rocksdb", "flatMapGroupsWithState, timers, RocksDB store",
                              "jvm")
OURS_ROCKSDB = System("ours-rocksdb", "**ours**: map_with_state, RocksDB backend (Connect)", "connect")
OURS_HEAP = System("ours-heap", "map_with_state, heap backend (Connect)", "connect")

#: The streaming systems, in table order.
STREAMING: Tuple[System, ...] = (OURS, FLOOR, FLOOR_CONNECT, FMGWS_HDFS, FMGWS_ROCKSDB, DSTREAM,
                                 PANDAS)
#: The Python peers: run on the scaled-down input, as applyInPandasWithState.
PYTHON_PEERS: Tuple[System, ...] = (PANDAS_PYTHON, TWS_PYTHON, TWS_PANDAS_PYTHON)
#: Every system run on the scaled-down input (their ratios are of time per record).
SCALED_DOWN: Tuple[System, ...] = (PANDAS, TWS_PANDAS_SUM, TWS_PANDAS_TIMERS) + PYTHON_PEERS
#: S1's and S2's systems: the streaming ones and transformWithState, with the Python state
#: function and order_by beside ours and, last, the same Python source run by PySpark's Python
#: operators.
WITH_PYTHON: Tuple[System, ...] = ((OURS, OURS_PYTHON, OURS_ORDERED) + STREAMING[1:5]
                                   + (TWS, DSTREAM, PANDAS) + PYTHON_PEERS)
#: S5's systems (per-key aggregation), in table order.
GROUPED: Tuple[System, ...] = (GROUPS, PER_RECORD, FLOOR, FMGWS_SUM_HDFS, FMGWS_SUM_ROCKSDB,
                               TWS_SUM, PANDAS, TWS_PANDAS_SUM)
#: S4's systems (timers), in table order.
TIMERS: Tuple[System, ...] = (TIMERS_OURS, FLOOR, FMGWS_TIMERS_HDFS, FMGWS_TIMERS_ROCKSDB,
                              TWS_TIMERS, TWS_PANDAS_TIMERS)
#: S6's systems (state larger than the heap), in table order.
BIG_STATE: Tuple[System, ...] = (OURS_ROCKSDB, OURS_HEAP, FMGWS_ROCKSDB)
#: The streaming systems BenchMain runs (its names must be these).
JVM_STREAMING: Tuple[str, ...] = tuple(dict.fromkeys(
    s.name for s in WITH_PYTHON + GROUPED + TIMERS + BIG_STATE if s.runs_on == "jvm"))

LABELS: Dict[str, str] = {s.name: s.label
                          for s in WITH_PYTHON + GROUPED + TIMERS + BIG_STATE + (GROUP_BY,)}
