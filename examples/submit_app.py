"""A PySpark application that uses mapwithstate, run with ``spark-submit``.

It is an ordinary application: ``SparkSession.builder.getOrCreate()`` gives whichever session
spark-submit set up, and ``map_with_state`` works on either kind. Classic (the default)::

    spark-submit --master local[2] --jars mapwithstate-assembly-0.1.0.jar \\
      --conf spark.sql.extensions=io.mapwithstate.MapWithStateExtensions \\
      --py-files mapwithstate.zip examples/submit_app.py

Spark Connect, as a client of a Connect server that has the plugin (see the README)::

    spark-submit --remote sc://localhost:15002 --conf spark.api.mode=connect \\
      --py-files mapwithstate.zip examples/submit_app.py

It prints a running count per word (``emitted <word> <n>``, one line per record) and the final
state (``state <word> <n>``), sorted, then the kind of session it ran on.
"""
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from mapwithstate import StateSpec, map_with_state
from mapwithstate import functions as S


def main() -> None:
    spark = SparkSession.builder.appName("mapwithstate-example").getOrCreate()
    words = spark.createDataFrame(
        [(1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, "a")], "seq INT, word STRING")
    spec = StateSpec.function(
        "n BIGINT",
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col("word"), S.new_state("n").alias("n")))
    counts = map_with_state(words, key="word", value="seq", order_by="seq", spec=spec)
    for row in counts.orderBy("word", "n").collect():
        print(f"emitted {row.word} {row.n}")
    states = map_with_state(words, key="word", value="seq", spec=spec, output="snapshots")
    for row in states.orderBy("word").collect():
        print(f"state {row.word} {row.n}")
    kind = "connect" if type(spark).__module__.startswith("pyspark.sql.connect") else "classic"
    print(f"session {kind}")
    spark.stop()


if __name__ == "__main__":
    main()
