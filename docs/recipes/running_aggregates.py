"""Running aggregates per key with ``map_groups_with_state``: each batch's records of a key are
aggregated first (partial aggregation before the shuffle), then folded into the key's state
with one state read and write per key and batch, however many records it had. Written in
Python (``len(rows)``, ``sum(...)``) and, the same, in Column algebra with Spark aggregates.
"""
from datetime import datetime, timedelta

from pyspark.sql import functions as F

import mapwithstate as mws
from mapwithstate import StateSpec
from mapwithstate import functions as S


@mws.state_function("n BIGINT, total BIGINT")
def totals(k, rows, state):
    state.update(n=(state.n or 0) + len(rows),
                 total=(state.total or 0) + sum(r.v for r in rows if r.v is not None))
    return {"k": k, "n": state.n, "total": state.total}


column_totals = StateSpec.function(
    "n BIGINT, total BIGINT",
    update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + F.count("*")).alias("n"),
                    (F.coalesce(S.state("total"), F.lit(0))
                     + F.coalesce(F.sum("v"), F.lit(0))).alias("total")),
    emit=F.struct(F.col("k"), S.new_state("n").alias("n"), S.new_state("total").alias("total")))


def run(spark):
    t0 = datetime(2026, 1, 1)
    t1 = t0 + timedelta(minutes=1)
    df = spark.createDataFrame(
        [("a", 1, t0), ("a", 2, t0), ("b", 5, t0), ("a", 3, t1), ("b", None, t1)],
        "k STRING, v BIGINT, t TIMESTAMP")
    python = mws.map_groups_with_state(df, key="k", spec=totals, batch_time="t")
    columns = mws.map_groups_with_state(df, key="k", spec=column_totals, batch_time="t")
    python.show()
    expected = [("a", 2, 3), ("a", 3, 6), ("b", 1, 5), ("b", 2, 5)]
    assert sorted(tuple(r) for r in python.collect()) == expected
    assert sorted(tuple(r) for r in columns.collect()) == expected


if __name__ == "__main__":
    run(mws.local_session())
