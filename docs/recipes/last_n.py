"""The last N values of each key: a capped list in the state, emitted with every record —
the building block of rules over a key's recent history.
"""
import mapwithstate as mws

N = 3


@mws.state_function("recent ARRAY<DOUBLE>")
def last_n(sensor, reading, state):
    recent = ((state.recent or []) + [reading])[-N:]
    state.update(recent=recent)
    return {"sensor": sensor, "recent": recent, "mean": sum(recent) / len(recent)}


def run(spark):
    readings = spark.createDataFrame(
        [("s1", 1, 10.0), ("s1", 2, 11.0), ("s2", 3, 5.0), ("s1", 4, 12.0), ("s1", 5, 20.0)],
        "sensor STRING, seq BIGINT, reading DOUBLE")
    # order_by: each key's records reach the function in this order (here the input's).
    out = mws.map_with_state(readings, key="sensor", value="reading", spec=last_n,
                             order_by="seq")
    out.show(truncate=False)
    rows = {(r.sensor, tuple(r.recent)): r.mean for r in out.collect()}
    assert rows[("s1", (11.0, 12.0, 20.0))] == 43.0 / 3
    assert rows[("s2", (5.0,))] == 5.0
    assert len(rows) == 5


if __name__ == "__main__":
    run(mws.local_session())
