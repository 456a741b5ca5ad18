from pyspark.sql.connect.proto import expressions_pb2 as _expressions_pb2
from pyspark.sql.connect.proto import relations_pb2 as _relations_pb2
from pyspark.sql.connect.proto import types_pb2 as _types_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StateSpec(_message.Message):
    __slots__ = ("state_schema_ddl", "state_schema_type", "update", "remove", "emit", "initial_state", "num_partitions", "timeout", "checkpoint_interval", "timeout_at", "timeout_domain", "initial_state_timeout_at", "backend", "initial_state_last_updated", "migrate", "initial_state_watermark", "initial_state_has_state")
    STATE_SCHEMA_DDL_FIELD_NUMBER: _ClassVar[int]
    STATE_SCHEMA_TYPE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    EMIT_FIELD_NUMBER: _ClassVar[int]
    INITIAL_STATE_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_AT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    INITIAL_STATE_TIMEOUT_AT_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    INITIAL_STATE_LAST_UPDATED_FIELD_NUMBER: _ClassVar[int]
    MIGRATE_FIELD_NUMBER: _ClassVar[int]
    INITIAL_STATE_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    INITIAL_STATE_HAS_STATE_FIELD_NUMBER: _ClassVar[int]
    state_schema_ddl: str
    state_schema_type: _types_pb2.DataType
    update: _expressions_pb2.Expression
    remove: _expressions_pb2.Expression
    emit: _expressions_pb2.Expression
    initial_state: _relations_pb2.Relation
    num_partitions: int
    timeout: str
    checkpoint_interval: int
    timeout_at: _expressions_pb2.Expression
    timeout_domain: str
    initial_state_timeout_at: str
    backend: str
    initial_state_last_updated: str
    migrate: _expressions_pb2.Expression
    initial_state_watermark: _expressions_pb2.Expression
    initial_state_has_state: str
    def __init__(self, state_schema_ddl: _Optional[str] = ..., state_schema_type: _Optional[_Union[_types_pb2.DataType, _Mapping]] = ..., update: _Optional[_Union[_expressions_pb2.Expression, _Mapping]] = ..., remove: _Optional[_Union[_expressions_pb2.Expression, _Mapping]] = ..., emit: _Optional[_Union[_expressions_pb2.Expression, _Mapping]] = ..., initial_state: _Optional[_Union[_relations_pb2.Relation, _Mapping]] = ..., num_partitions: _Optional[int] = ..., timeout: _Optional[str] = ..., checkpoint_interval: _Optional[int] = ..., timeout_at: _Optional[_Union[_expressions_pb2.Expression, _Mapping]] = ..., timeout_domain: _Optional[str] = ..., initial_state_timeout_at: _Optional[str] = ..., backend: _Optional[str] = ..., initial_state_last_updated: _Optional[str] = ..., migrate: _Optional[_Union[_expressions_pb2.Expression, _Mapping]] = ..., initial_state_watermark: _Optional[_Union[_expressions_pb2.Expression, _Mapping]] = ..., initial_state_has_state: _Optional[str] = ...) -> None: ...
