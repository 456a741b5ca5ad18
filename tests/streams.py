"""A streaming test's input, checkpoint and output, under one directory.

Input is a directory of JSON files read one file per micro-batch (``maxFilesPerTrigger=1``),
so each test decides exactly what each micro-batch holds. Results go to a JSON file sink
(exactly-once across restarts).
"""
import glob
import json
import os
import time
from typing import List, NamedTuple

from pyspark.sql import functions as F

OUTPUT_SCHEMA = "word STRING, n BIGINT"
# The first bytes of the heap backend's delta files: compressed (StateFileCompression.Magic),
# or as they are (StateMapSerde.DeltaMagic).
MAPWITHSTATE_DELTA_MAGICS = (b"MWSZ", b"MWSD")


class MicroBatch(NamedTuple):
    """A micro-batch a file-stream query planned, as its checkpoint's offset log records it."""

    time_ms: int
    """The batch's time (ms since the epoch)."""
    watermark_ms: int
    """Spark's event-time watermark for the batch (ms; 0 until it first moves)."""
    files: List[int]
    """The indexes of the input files it read, in the order the source took them; none for a
    no-data batch, which Spark runs when the watermark moves and a stateful operator asks for
    one (``spark.sql.streaming.noDataMicroBatches.enabled``, on by default)."""


def write_json(directory, index, records):
    """One JSON-lines file of a stream's input, the index-th: written whole (renamed into
    place) and dated by its index, so the file source takes the files in that order."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{index:05d}.json")
    with open(path + ".tmp", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    os.rename(path + ".tmp", path)
    os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def micro_batches(checkpoint) -> List[MicroBatch]:
    """The micro-batches of a query over one file source, in order, from its offset log (the
    file source's offset is the index of the last file read)."""
    batches, previous = [], -1
    paths = glob.glob(os.path.join(checkpoint, "offsets", "[0-9]*"))
    for path in sorted(paths, key=lambda p: int(os.path.basename(p))):
        with open(path) as f:
            lines = f.read().splitlines()
        metadata, offset = json.loads(lines[1]), json.loads(lines[2])["logOffset"]
        batches.append(MicroBatch(metadata["batchTimestampMs"], metadata["batchWatermarkMs"],
                                  list(range(previous + 1, offset + 1))))
        previous = offset
    return batches


def committed_batches(checkpoint):
    """The ids of the batches a streaming query's checkpoint has committed, in order."""
    commits = os.path.join(checkpoint, "commits")
    return sorted(int(n) for n in os.listdir(commits) if n.isdigit()) \
        if os.path.isdir(commits) else []


class Stream:
    """An input directory, a checkpoint and an output directory under one temp dir."""

    def __init__(self, root):
        self.input = os.path.join(root, "in")
        self.checkpoint = os.path.join(root, "checkpoint")
        self.output = os.path.join(root, "out")
        os.makedirs(self.input)
        self._files = 0
        self._base_time = time.time() - 10_000

    def add(self, *words):
        """Adds one file: one micro-batch of these words."""
        self.add_records({"word": w} for w in words)

    def add_events(self, *events):
        """Adds one file: one micro-batch of these (word, event time in seconds) records."""
        self.add_records({"word": w, "e": e} for w, e in events)

    def add_records(self, records):
        """Adds one file of these records (dicts, one JSON line each)."""
        path = os.path.join(self.input, f"part-{self._files:05d}.json")
        with open(path + ".tmp", "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        os.rename(path + ".tmp", path)  # the file source must never see half a file
        # It takes files in modification-time order, which files written within one clock
        # tick would not have: make it the order added.
        stamp = self._base_time + self._files
        os.utime(path, (stamp, stamp))
        self._files += 1

    def read(self, spark):
        return spark.readStream.schema("word STRING").option("maxFilesPerTrigger", 1) \
            .json(self.input)

    def read_events(self, spark, delay="5 seconds"):
        """The records of :meth:`add_events` as (word, event TIMESTAMP), under a watermark of
        `delay` on `event`."""
        return spark.readStream.schema("word STRING, e BIGINT").option("maxFilesPerTrigger", 1) \
            .json(self.input).select("word", F.col("e").cast("timestamp").alias("event")) \
            .withWatermark("event", delay)

    def run_available_now(self, result):
        """Runs `result` to the end of the input on this stream's checkpoint and sink."""
        query = result.writeStream.format("json").option("path", self.output) \
            .option("checkpointLocation", self.checkpoint).trigger(availableNow=True).start()
        query.awaitTermination()
        return query

    def batch_times(self):
        """Batch id -> the batch's time (ms), from the checkpoint's offset log."""
        times = {}
        for path in glob.glob(os.path.join(self.checkpoint, "offsets", "[0-9]*")):
            with open(path) as f:
                times[int(os.path.basename(path))] = json.loads(f.readlines()[1])["batchTimestampMs"]
        return times

    def results(self, spark, schema=OUTPUT_SCHEMA):
        return sorted(tuple(r) for r in spark.read.schema(schema).json(self.output).collect())

    def run_each_batch(self, spark, batches, build, schema="word STRING, n STRING"):
        """Each batch of words in its own run of the query `build(source)`, restarted from
        its checkpoint; returns the new rows after each run, and the runs' queries."""
        seen, answers, queries = [], [], []
        for words in batches:
            self.add(*words)
            queries.append(self.run_available_now(build(self.read(spark))))
            now = self.results(spark, schema)
            for r in seen:
                now.remove(r)
            answers.append(sorted(now))
            seen += now
        return answers, queries


def run_memory(result, name, checkpoint, mode="append"):
    """Runs `result` to the end of its input into the memory table `name`."""
    query = result.writeStream.format("memory").queryName(name).outputMode(mode) \
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    return query


def windowed_counts(spark, stream):
    """Adds four micro-batches of events to `stream` and counts them per word in 10 s windows
    under a 5 s watermark: in append mode the windows come out when final, in the end a's
    [0, 10) with 2, a's and b's [30, 40) with 1 (c's [60, 70) never is)."""
    stream.add_events(("a", 1), ("a", 2))
    stream.add_events(("b", 30))   # the watermark moves to 25 s: a's [0, 10) window is final
    stream.add_events(("a", 32))
    stream.add_events(("c", 60))   # to 55 s: a's and b's [30, 40) windows are
    return stream.read_events(spark).groupBy("word", F.window("event", "10 seconds")).count()


# What summing the final windows of `windowed_counts` per word emits.
WINDOWED_SUMS = [("a", 2), ("a", 3), ("b", 1)]


def state_kept_by_sparks_provider(checkpoint, operator=0):
    """Whether the query's Spark stateful operator ``operator`` (e.g. a streaming aggregation
    beside map_with_state) wrote its state as delta files of the session's provider, Spark's
    HDFS one, and none in map_with_state's own format."""
    deltas = glob.glob(os.path.join(checkpoint, "state", str(operator), "*", "*.delta"))
    return bool(deltas) and all(open(d, "rb").read(4) not in MAPWITHSTATE_DELTA_MAGICS
                                for d in deltas)


def counts(*expected):
    return sorted(expected)


def corrupt(path, how):
    """Damages a state file in place: ``"truncate"`` cuts it in half, ``"flip"`` flips a byte
    near its end, ``"flip_middle"`` one in its middle."""
    with open(path, "r+b") as f:
        if how == "truncate":
            f.truncate(os.path.getsize(path) // 2)
        else:
            size = os.path.getsize(path)
            f.seek(size // 2 if how == "flip_middle" else size - 6)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))
    # Hadoop's own checksum would catch it first; the state format must catch it alone.
    crc = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")
    if os.path.exists(crc):
        os.remove(crc)
