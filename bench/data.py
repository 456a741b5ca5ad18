"""The suite's input: Parquet files under bench/data (git-ignored), one file per micro-batch,
generated once per scenario shape and reused by every system and every run."""
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.scenarios import BatchJob, BatchSpec, Scenario

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# Written last: a directory without it was interrupted while being written and is rebuilt.
# Spark's file listing skips names starting with "_".
_COMPLETE = "_COMPLETE"
# A fixed epoch for the files' modification times: file streams take files in modification-time
# order, so batch i gets time EPOCH + i seconds and the order never depends on the clock.
_EPOCH = 1_700_000_000


def batch_file(directory: str, index: int) -> str:
    return os.path.join(directory, f"batch-{index:05d}.parquet")


def scenario_data(scenario: Scenario, seed: int = 1) -> str:
    """The directory of ``scenario``'s batches, generated if missing."""
    directory = os.path.join(DATA_DIR, scenario.data_name())
    if not os.path.exists(os.path.join(directory, _COMPLETE)):
        rng = np.random.default_rng(seed)
        _fresh(directory)
        for i, spec in enumerate(scenario.batches):
            keys = _keys(spec, rng)
            _write(batch_file(directory, i), keys, rng.integers(0, 1000, len(keys)), _EPOCH + i)
        _complete(directory)
    return directory


def batch_job_data(job: BatchJob, seed: int = 2) -> str:
    """The directory of B1's single batch (a few files, so the read is parallel), generated if
    missing."""
    directory = os.path.join(DATA_DIR, job.data_name())
    if not os.path.exists(os.path.join(directory, _COMPLETE)):
        rng = np.random.default_rng(seed)
        _fresh(directory)
        per_file = -(-job.rows // job.files)
        for i in range(job.files):
            n = min(per_file, job.rows - i * per_file)
            _write(batch_file(directory, i), rng.integers(0, job.keys, n), rng.integers(0, 1000, n),
                   _EPOCH + i)
        _complete(directory)
    return directory


def _keys(spec: BatchSpec, rng: np.random.Generator) -> np.ndarray:
    if spec.kind == "new":
        return rng.permutation(np.arange(spec.start, spec.start + spec.records, dtype=np.int64))
    if spec.kind == "existing":
        return rng.integers(0, spec.key_space, spec.records, dtype=np.int64)
    if spec.kind == "all":
        return rng.permutation(spec.records).astype(np.int64)
    raise ValueError(f"unknown batch kind {spec.kind}")


def _write(path: str, keys: np.ndarray, values: np.ndarray, mtime: int) -> None:
    schema = pa.schema([pa.field("key", pa.int64(), nullable=False),
                        pa.field("value", pa.int64(), nullable=False)])
    table = pa.Table.from_arrays([pa.array(keys, pa.int64()), pa.array(values, pa.int64())],
                                 schema=schema)
    pq.write_table(table, path)
    os.utime(path, (mtime, mtime))


def _fresh(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)


def _complete(directory: str) -> None:
    open(os.path.join(directory, _COMPLETE), "w").close()
