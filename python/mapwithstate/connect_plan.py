"""The Spark Connect path: a request as a ``mapwithstate.MapWithState`` relation.

A Connect DataFrame's plan is sent to the server, where the plugin turns the relation into the
same plan the JVM API makes. Every Column of the request and the initial state are checked to
be Connect ones when the DataFrame is made, not when it is first sent.
``mapwithstate._request.run`` dispatches here; this module is not public API.
"""

import datetime
from typing import TYPE_CHECKING, List, TypeGuard, Union, cast

from pyspark.sql import Column
from pyspark.sql.connect import proto
from pyspark.sql.connect.plan import LogicalPlan

from mapwithstate.deep_plans import lifted_depth_limit
from mapwithstate.proto import relations_pb2, state_spec_pb2
from mapwithstate.spec import COLUMNS, SETTINGS, StateSpec

if TYPE_CHECKING:
    from pyspark.sql.connect.client import SparkConnectClient
    from pyspark.sql.connect.column import Column as ConnectColumn
    from pyspark.sql.connect.dataframe import DataFrame

    from mapwithstate._request import ColumnOrName, Request

__all__: List[str] = []

_OUTPUTS = {
    "emitted": relations_pb2.MapWithState.OUTPUT_EMITTED,
    "snapshots": relations_pb2.MapWithState.OUTPUT_SNAPSHOTS,
    "final_state": relations_pb2.MapWithState.OUTPUT_FINAL_STATE,
    "final_watermark": relations_pb2.MapWithState.OUTPUT_FINAL_WATERMARK,
}


def is_connect_dataframe(df: object) -> TypeGuard["DataFrame"]:
    """Whether ``df`` is a Spark Connect DataFrame."""
    from pyspark.sql.connect.dataframe import DataFrame

    return isinstance(df, DataFrame)


def dataframe(df: "DataFrame", request: "Request") -> "DataFrame":
    """The DataFrame of ``request`` over the Connect DataFrame ``df``."""
    from pyspark.sql.connect.dataframe import DataFrame

    for what, column in request.columns():
        connect_column(column, what)
    initial = request.spec.initial
    if initial is not None and not is_connect_dataframe(initial.df):
        raise TypeError(
            "spec.initial_state is a classic DataFrame, but the DataFrame is a Spark Connect "
            "one: both must come from the same session"
        )
    return DataFrame(MapWithStatePlan(df._plan, request), session=df.sparkSession)


def connect_column(value: "ColumnOrName", what: str) -> "ConnectColumn":
    """``value`` as a Connect Column, or a ``TypeError`` naming ``what`` when it is not one."""
    from pyspark.sql.connect import functions as F
    from pyspark.sql.connect.column import Column as ConnectColumn

    if isinstance(value, ConnectColumn):
        return value
    if isinstance(value, Column):
        raise TypeError(
            f"{what} is a classic Column, but the DataFrame is a Spark Connect one: build it "
            "with pyspark.sql.functions while the Connect session is active"
        )
    if isinstance(value, str):
        return cast("ConnectColumn", F.col(value))
    raise TypeError(f"{what} must be a column name or a Column, got {type(value).__name__}")


class MapWithStatePlan(LogicalPlan):
    """The plan node: packs a ``mapwithstate.MapWithState`` into ``Relation.extension``."""

    def __init__(self, child: LogicalPlan, request: "Request") -> None:
        super().__init__(child)
        self._request = request

    def plan(self, session: "SparkConnectClient") -> proto.Relation:
        # A compiled state function's Columns may nest deeper than protobuf's Python runtime
        # copies by default; packed, they are bytes to the relations around this one.
        with lifted_depth_limit():
            return self._plan(session)

    def _plan(self, session: "SparkConnectClient") -> proto.Relation:
        assert self._child is not None
        request = self._request

        def expression(column: "ColumnOrName", what: str) -> proto.Expression:
            return connect_column(column, what).to_plan(session)

        message = relations_pb2.MapWithState()
        message.input.CopyFrom(self._child.plan(session))
        message.keys.extend(expression(k, "key") for k in request.keys)
        message.values.extend(expression(v, "value") for v in request.values)
        message.spec.CopyFrom(spec_message(request.spec, session))
        if request.batch_time is not None:
            message.batch_time.CopyFrom(expression(request.batch_time, "batch_time"))
        if request.batch_interval is not None:
            message.batch_interval = request.batch_interval
        for column in request.order_by:
            order = expression(column, "order_by")
            if not order.HasField("sort_order"):
                ascending = cast("ConnectColumn", connect_column(column, "order_by").asc())
                order = ascending.to_plan(session)
            message.order_by.append(order.sort_order)
        message.output = _OUTPUTS[request.output]
        message.groups = request.groups
        message.include_timer_only_keys = request.include_timer_only_keys
        if request.until is not None:
            message.until.CopyFrom(timestamp_literal(request.until, session))

        relation = self._create_proto_relation()
        relation.extension.Pack(message)
        return relation


def timestamp_literal(
    value: "Union[datetime.datetime, str]", client: "SparkConnectClient"
) -> proto.Expression:
    """The literal of a timestamp argument (a replay's ``until``, a resumed watermark): a
    datetime, or a string the server casts to TIMESTAMP."""
    from pyspark.sql.connect import functions as F

    return cast("ConnectColumn", F.lit(value)).to_plan(client)


def spec_message(spec: StateSpec, client: "SparkConnectClient") -> state_spec_pb2.StateSpec:
    """The ``mapwithstate.StateSpec`` message of ``spec``: its schema, its Columns, its initial
    state and every setting of the settings table, each under the proto field of its name."""
    message = state_spec_pb2.StateSpec()
    if isinstance(spec.state_schema, str):
        message.state_schema_ddl = spec.state_schema
    else:
        from pyspark.sql.connect.types import pyspark_types_to_proto_types

        message.state_schema_type.CopyFrom(pyspark_types_to_proto_types(spec.state_schema))
    for name in COLUMNS:
        column = getattr(spec, name)
        if column is not None:
            getattr(message, name).CopyFrom(connect_column(column, f"spec.{name}").to_plan(client))
    if spec.migration is not None:
        message.migrate.CopyFrom(connect_column(spec.migration, "spec.migrate").to_plan(client))
    if spec.initial is not None:
        initial = spec.initial.df
        assert is_connect_dataframe(initial), "checked by dataframe()"
        message.initial_state.CopyFrom(initial._plan.plan(client))
        if spec.initial.timeout_at is not None:
            message.initial_state_timeout_at = spec.initial.timeout_at
        if spec.initial.last_updated is not None:
            message.initial_state_last_updated = spec.initial.last_updated
        if spec.initial.has_state is not None:
            message.initial_state_has_state = spec.initial.has_state
        if spec.initial.watermark is not None:
            message.initial_state_watermark.CopyFrom(
                timestamp_literal(spec.initial.watermark, client)
            )
    for setting in SETTINGS.values():
        if setting.name in spec.settings:
            setattr(message, setting.name, spec.settings[setting.name])
    return message
