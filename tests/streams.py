"""A streaming test's input, checkpoint and output, under one directory.

Input is a directory of JSON files read one file per micro-batch (``maxFilesPerTrigger=1``),
so each test decides exactly what each micro-batch holds. Results go to a JSON file sink
(exactly-once across restarts).
"""
import glob
import json
import os

OUTPUT_SCHEMA = "word STRING, n BIGINT"
# The first bytes of the heap backend's delta files (StateMapSerde.DeltaMagic).
MAPWITHSTATE_DELTA_MAGIC = b"MWSD"


class Stream:
    """An input directory, a checkpoint and an output directory under one temp dir."""

    def __init__(self, root):
        self.input = os.path.join(root, "in")
        self.checkpoint = os.path.join(root, "checkpoint")
        self.output = os.path.join(root, "out")
        os.makedirs(self.input)
        self._files = 0

    def add(self, *words):
        """Adds one file: one micro-batch of these words."""
        path = os.path.join(self.input, f"part-{self._files:05d}.json")
        with open(path + ".tmp", "w") as f:
            for w in words:
                f.write(json.dumps({"word": w}) + "\n")
        os.rename(path + ".tmp", path)  # the file source must never see half a file
        self._files += 1

    def read(self, spark):
        return spark.readStream.schema("word STRING").option("maxFilesPerTrigger", 1) \
            .json(self.input)

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


def state_kept_by_sparks_provider(checkpoint, operator=0):
    """Whether the query's Spark stateful operator ``operator`` (e.g. a streaming aggregation
    beside map_with_state) wrote its state as delta files of the session's provider, Spark's
    HDFS one, and none in map_with_state's own format."""
    deltas = glob.glob(os.path.join(checkpoint, "state", str(operator), "*", "*.delta"))
    return bool(deltas) and all(open(d, "rb").read(4) != MAPWITHSTATE_DELTA_MAGIC
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
