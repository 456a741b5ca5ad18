"""How fast read_state reads a large state, against the stream's own output="snapshots".

Run once, by hand (it starts its own local server with the built jar):

    .venv/bin/python bench/read_state_throughput.py [--keys 1000000] [--partitions 4]

One micro-batch puts --keys distinct keys into a running count's state, a second updates a
tenth of them; then it times, each to a noop sink (every row produced, nothing stored):
the two batches with output="emitted" and with output="snapshots" (each batch's duration: the
second batch of the snapshots run emits every key, the emitted run a tenth of them),
read_state of the last batch and of the first, and read_state_changes of both batches.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))

import mapwithstate as mws  # noqa: E402
from mapwithstate import map_with_state  # noqa: E402
from specs import running_count  # noqa: E402
from streams import Stream  # noqa: E402


def timed(what, action):
    started = time.monotonic()
    action()
    seconds = time.monotonic() - started
    print(f"{what:<52} {seconds:7.2f} s", flush=True)
    return seconds


def noop(df):
    return lambda: df.write.format("noop").mode("overwrite").save()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="mws-read-state-")
    server = mws.LocalConnectServer(conf={"spark.sql.shuffle.partitions": str(args.partitions),
                                          "spark.driver.memory": "4g"})
    spark = server.session()
    try:
        def write_input(stream):
            for i, keys in enumerate((range(args.keys), range(0, args.keys, 10))):
                tmp = os.path.join(stream.input, f".part-{i}.tmp")  # hidden from the source
                with open(tmp, "w") as f:
                    f.writelines(json.dumps({"word": f"key-{k:09d}"}) + "\n" for k in keys)
                os.rename(tmp, os.path.join(stream.input, f"part-{i:05d}.json"))

        def run(stream, output):
            result = map_with_state(stream.read(spark), "word", running_count(), output=output)
            query = result.writeStream.format("noop") \
                .option("checkpointLocation", stream.checkpoint).trigger(availableNow=True).start()
            query.awaitTermination()
            return [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress]

        warm_up = Stream(os.path.join(root, "w"))
        warm_up.add(*[f"w{i}" for i in range(1000)])
        run(warm_up, "snapshots")
        emitted, snapshots = Stream(os.path.join(root, "e")), Stream(os.path.join(root, "s"))
        write_input(emitted)
        write_input(snapshots)
        for name, stream in (("emitted", emitted), ("snapshots", snapshots)):
            durations = run(stream, name)
            print(f"output={name!r}: micro-batch durations " +
                  ", ".join(f"{d:.2f} s" for d in durations), flush=True)
        ck = emitted.checkpoint
        assert mws.read_state(spark, ck).count() == args.keys
        t_read = timed(f"read_state, last batch ({args.keys} keys), noop",
                       noop(mws.read_state(spark, ck)))
        timed("read_state, batch 0, noop", noop(mws.read_state(spark, ck, batch_id=0)))
        timed("read_state, last batch, count()", lambda: mws.read_state(spark, ck).count())
        timed("read_state_changes, batches 0-1, noop",
              noop(mws.read_state_changes(spark, ck, start_batch=0)))
        print(f"read_state: {args.keys / t_read:,.0f} keys/s", flush=True)
    finally:
        spark.stop()
        server.stop()


if __name__ == "__main__":
    main()
