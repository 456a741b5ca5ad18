"""An SLA timer: alert when an order placed is not shipped within two hours of event time.
The order's event-time timer fires once the watermark passes its deadline; shipping it in time
clears the timer and forgets the order.
"""
from datetime import datetime, timedelta

import mapwithstate as mws

SLA = timedelta(hours=2)


@mws.state_function("placed TIMESTAMP")
def order_sla(order_id, status, ts, state):
    if state.timing_out:
        placed = state.placed
        state.remove()
        return {"order_id": order_id, "alert": "not shipped in time", "placed": placed}
    if status == "placed" and not state.exists:
        state.update(placed=ts)
        state.set_timer(ts + SLA)
    elif status == "shipped" and state.exists:
        state.remove()
        state.clear_timer()
    return None


sla = order_sla.timeout_domain("event_time")


def run(spark):
    t0 = datetime(2026, 1, 1, 8, 0)
    events = spark.createDataFrame(
        [("o1", "placed", t0), ("o2", "placed", t0 + timedelta(minutes=10)),
         ("o1", "shipped", t0 + timedelta(minutes=90)),     # in time
         ("o3", "placed", t0 + timedelta(hours=3))],
        "order_id STRING, status STRING, ts TIMESTAMP").withWatermark("ts", "10 minutes")
    # A batch's watermark is the largest event time of the batches before it minus the delay,
    # so the data alone never passes o2's deadline (10:10). until= says the recording ends at
    # 12:00: a last batch there has the watermark 11:50, and o2's timer fires in it. o3's
    # deadline (13:00) is after that, and o1 shipped in time.
    alerts = mws.map_with_state(events, key="order_id", spec=sla, batch_time="ts",
                                until=t0 + timedelta(hours=4))
    alerts.show()
    assert [tuple(r) for r in alerts.collect()] == [
        ("o2", "not shipped in time", t0 + timedelta(minutes=10))]


if __name__ == "__main__":
    run(mws.local_session())
