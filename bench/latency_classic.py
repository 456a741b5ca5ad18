"""L1's pipeline of ours (bench/latency.py's ``ours``: map_with_state's running count from the
input topic to the output topic) on a classic session, as a spark-submit application: the JVM
set up as transformWithState's (bench/jvm's ``TransformWithStateLatency``: the same
spark-submit settings, see ``bench.latency.SubmittedPipeline``), not as the Connect server. So
between ours in the Connect server and ours here, what differs is the server's; between ours
here and transformWithState, the operator's.

Arguments: ``<bootstrap servers> <input topic> <output topic> <checkpoint>
<realtime:<duration>|microbatch> <seconds>``, as TransformWithStateLatency's; the query runs
for ``seconds``, then stops. Each batch's progress is printed on a line of its own after
``bench.latency.PROGRESS_PREFIX``, as JSON. bench/latency.py starts it (mode
``classic-microbatch``); the plugin's jar, the Kafka connector and the extensions come from
spark-submit's ``--jars`` and ``--conf``, as docs/classic.md says.
"""
import sys
import time

from pyspark.sql import SparkSession

from bench.latency import PROGRESS_PREFIX, ours


def main() -> None:
    if len(sys.argv) != 7:
        raise SystemExit("usage: latency_classic.py <bootstrap servers> <input topic> "
                         "<output topic> <checkpoint> <realtime:<duration>|microbatch> <seconds>")
    bootstrap, source, sink, checkpoint, trigger_arg, seconds = sys.argv[1:]
    how, _, duration = trigger_arg.partition(":")
    if how == "realtime" and duration:
        trigger_ = {"realTime": duration}
    elif trigger_arg == "microbatch":
        trigger_ = {"processingTime": "0 seconds"}
    else:
        raise SystemExit(
            f"trigger: expected realtime:<duration> or microbatch, got {trigger_arg!r}")
    spark = SparkSession.builder.appName("mapwithstate-latency").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        query = ours(spark, bootstrap, source, sink, checkpoint, trigger_, None).query
        deadline = time.monotonic() + float(seconds)
        printed = -1
        while query.isActive and time.monotonic() < deadline:
            query.awaitTermination(1)  # raises the query's failure
            for progress in query.recentProgress:
                if progress["batchId"] > printed:
                    print(PROGRESS_PREFIX + progress.json, flush=True)
                    printed = progress["batchId"]
        query.stop()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
