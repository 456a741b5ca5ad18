"""State functions the tests share."""
from pyspark.sql import functions as F

from mapwithstate import StateSpec
from mapwithstate import functions as S


def running_count(state_schema: str = "n BIGINT", key: str = "word") -> StateSpec:
    """Counts each key's records; emits (key, count so far) for every record."""
    return StateSpec.function(
        state_schema,
        update=F.struct((F.coalesce(S.state("n"), F.lit(0)) + 1).alias("n")),
        emit=F.struct(F.col(key), S.new_state("n").alias("n")),
    )
