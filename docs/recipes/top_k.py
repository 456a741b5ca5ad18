"""The top k scores of each player, with ``map_groups_with_state``: the function is called
once per player and batch, and ``rows`` (the player's records of the batch) becomes Spark
aggregates — here ``[r.score for r in rows]``, a ``collect_list`` computed before the state is
touched.
"""
from datetime import datetime, timedelta

import mapwithstate as mws

K = 3


@mws.state_function("top ARRAY<BIGINT>")
def top_scores(player, rows, state):
    scores = [r.score for r in rows if r.score is not None]
    top = sorted((state.top or []) + scores)[-K:]
    state.update(top=top)
    return {"player": player, "top": top, "best": top[-1] if top else None}


def run(spark):
    t0 = datetime(2026, 1, 1)
    t1 = t0 + timedelta(hours=1)
    scores = spark.createDataFrame(
        [("ann", 10, t0), ("ann", 30, t0), ("bob", 7, t0), ("ann", 20, t1), ("ann", 25, t1),
         ("bob", None, t1)],
        "player STRING, score BIGINT, at TIMESTAMP")
    boards = mws.map_groups_with_state(scores, key="player", spec=top_scores, batch_time="at",
                                       output="snapshots")
    boards.orderBy("batch_time", "player").show()
    after = {(r.batch_time, r.player): list(r.top) for r in boards.collect()}
    assert after == {(t0, "ann"): [10, 30], (t0, "bob"): [7],
                     (t1, "ann"): [20, 25, 30], (t1, "bob"): [7]}


if __name__ == "__main__":
    run(mws.local_session())
