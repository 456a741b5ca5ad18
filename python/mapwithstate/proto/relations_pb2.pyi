from mapwithstate.proto import state_spec_pb2 as _state_spec_pb2
from pyspark.sql.connect.proto import expressions_pb2 as _expressions_pb2
from pyspark.sql.connect.proto import relations_pb2 as _relations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MapWithState(_message.Message):
    __slots__ = ("input", "keys", "values", "spec", "batch_time", "batch_interval", "order_by", "output", "groups", "until", "include_timer_only_keys")
    class Output(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OUTPUT_UNSPECIFIED: _ClassVar[MapWithState.Output]
        OUTPUT_EMITTED: _ClassVar[MapWithState.Output]
        OUTPUT_SNAPSHOTS: _ClassVar[MapWithState.Output]
        OUTPUT_FINAL_STATE: _ClassVar[MapWithState.Output]
        OUTPUT_FINAL_WATERMARK: _ClassVar[MapWithState.Output]
    OUTPUT_UNSPECIFIED: MapWithState.Output
    OUTPUT_EMITTED: MapWithState.Output
    OUTPUT_SNAPSHOTS: MapWithState.Output
    OUTPUT_FINAL_STATE: MapWithState.Output
    OUTPUT_FINAL_WATERMARK: MapWithState.Output
    INPUT_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    BATCH_TIME_FIELD_NUMBER: _ClassVar[int]
    BATCH_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TIMER_ONLY_KEYS_FIELD_NUMBER: _ClassVar[int]
    input: _relations_pb2.Relation
    keys: _containers.RepeatedCompositeFieldContainer[_expressions_pb2.Expression]
    values: _containers.RepeatedCompositeFieldContainer[_expressions_pb2.Expression]
    spec: _state_spec_pb2.StateSpec
    batch_time: _expressions_pb2.Expression
    batch_interval: str
    order_by: _containers.RepeatedCompositeFieldContainer[_expressions_pb2.Expression.SortOrder]
    output: MapWithState.Output
    groups: bool
    until: _expressions_pb2.Expression
    include_timer_only_keys: bool
    def __init__(self, input: _Optional[_Union[_relations_pb2.Relation, _Mapping]] = ..., keys: _Optional[_Iterable[_Union[_expressions_pb2.Expression, _Mapping]]] = ..., values: _Optional[_Iterable[_Union[_expressions_pb2.Expression, _Mapping]]] = ..., spec: _Optional[_Union[_state_spec_pb2.StateSpec, _Mapping]] = ..., batch_time: _Optional[_Union[_expressions_pb2.Expression, _Mapping]] = ..., batch_interval: _Optional[str] = ..., order_by: _Optional[_Iterable[_Union[_expressions_pb2.Expression.SortOrder, _Mapping]]] = ..., output: _Optional[_Union[MapWithState.Output, str]] = ..., groups: _Optional[bool] = ..., until: _Optional[_Union[_expressions_pb2.Expression, _Mapping]] = ..., include_timer_only_keys: _Optional[bool] = ...) -> None: ...
