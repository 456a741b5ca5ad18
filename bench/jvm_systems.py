"""The systems a Scala user runs: flatMapGroupsWithState on the HDFS-backed and the RocksDB
state store, transformWithState on the RocksDB store, DStream mapWithState, and the stateless
floor — compiled in the sbt ``bench``
project (bench/jvm, not the plugin jar) and run by pyspark's own spark-submit, so they use the
same Spark jars as the Connect server."""
import glob
import json
import os
import subprocess
from typing import Dict, Optional, Sequence

from bench.outcome import Outcome
from bench.rss import PeakRss

_JAR_GLOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm", "target", "scala-2.13",
                         "mapwithstate-bench_2.13-*.jar")


def jar() -> str:
    jars = sorted(glob.glob(_JAR_GLOB), key=os.path.getmtime)
    if not jars:
        raise FileNotFoundError(f"no bench jar ({_JAR_GLOB}); bench/run builds it (dev/sbt bench/package)")
    return jars[-1]


def run(directory: str, systems: Sequence[str], work: str, spark_conf: Dict[str, str],
        memory: str, peak_rss: Optional[Dict[str, int]] = None) -> Dict[str, Outcome]:
    """Runs ``systems`` one after the other in one spark-submit over ``directory``'s batches;
    with ``peak_rss``, records the JVM's peak resident memory there (under "bytes")."""
    import pyspark

    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    directory, work = os.path.abspath(directory), os.path.abspath(work)
    os.makedirs(work, exist_ok=True)
    results = os.path.join(work, "results.jsonl")
    command = [os.path.join(home, "bin", "spark-submit"), "--master", "local[2]",
               "--driver-memory", memory, "--class", "io.mapwithstate.bench.BenchMain"]
    for key, value in spark_conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [jar(), directory, work, results, *systems]
    env = {**os.environ, "SPARK_HOME": home}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    log = os.path.join(work, "spark-submit.log")
    with open(log, "wb") as out:
        # Run in `work`: what the JVM leaves in its working directory (a crash's hs_err log:
        # Spark's RocksDB logger callback crashed one at exit) stays with the run, not the repo.
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, cwd=work)
        sampler = PeakRss(process.pid).start()
        code = process.wait()
        peak = sampler.stop()
    if peak_rss is not None and peak is not None:
        peak_rss["bytes"] = peak
    outcomes: Dict[str, Outcome] = {s: Outcome.failed(f"spark-submit exited {code}, see {log}")
                                    for s in systems}
    if os.path.exists(results):
        with open(results) as f:
            for line in f:
                r = json.loads(line)
                outcomes[r["system"]] = (Outcome([tuple(b) for b in r["batches"]]) if "batches" in r
                                         else Outcome.failed(r["error"]))
    return outcomes
