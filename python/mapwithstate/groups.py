"""``map_groups_with_state``: Spark's ``flatMapGroupsWithState`` over a Spark Connect or classic
DataFrame."""

from typing import TYPE_CHECKING, Optional

from mapwithstate import _request
from mapwithstate._request import ColumnOrName, ColumnsOrNames
from mapwithstate.spec import Duration, StateSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["map_groups_with_state"]


def map_groups_with_state(
    df: "DataFrame",
    key: ColumnsOrNames,
    spec: StateSpec,
    *,
    batch_time: Optional[ColumnOrName] = None,
    batch_interval: Optional[Duration] = None,
    output: str = "emitted",
) -> "DataFrame":
    return _request.run(
        df,
        groups=True,
        key=key,
        spec=spec,
        batch_time=batch_time,
        batch_interval=batch_interval,
        output=output,
    )
