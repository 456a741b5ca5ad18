"""A fraud rule over each card's last five amounts: an amount more than three times the
card's recent average is flagged (once the card has three amounts). The history is a capped
list in the state.
"""
import mapwithstate as mws

HISTORY = 5
FACTOR = 3


@mws.state_function("amounts ARRAY<DOUBLE>")
def fraud(card, amount, state):
    history = state.amounts or []
    state.update(amounts=(history + [amount])[-HISTORY:])
    if len(history) >= 3:
        average = sum(history) / len(history)
        if amount > FACTOR * average:
            return {"card": card, "amount": amount, "average": average}


def run(spark):
    payments = spark.createDataFrame(
        [(1, "c1", 20.0), (2, "c1", 25.0), (3, "c1", 15.0), (4, "c1", 200.0),
         (5, "c2", 500.0), (6, "c1", 30.0)],
        "seq BIGINT, card STRING, amount DOUBLE")
    alerts = mws.map_with_state(payments, key="card", value="amount", spec=fraud, order_by="seq")
    alerts.show()
    assert [tuple(r) for r in alerts.collect()] == [("c1", 200.0, 20.0)]


if __name__ == "__main__":
    run(mws.local_session())
