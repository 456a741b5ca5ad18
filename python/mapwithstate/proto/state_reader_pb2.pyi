from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ReadState(_message.Message):
    __slots__ = ("checkpoint", "batch_id", "operator_id", "in_current_schema", "include_timer_only_keys")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    IN_CURRENT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TIMER_ONLY_KEYS_FIELD_NUMBER: _ClassVar[int]
    checkpoint: str
    batch_id: int
    operator_id: int
    in_current_schema: bool
    include_timer_only_keys: bool
    def __init__(self, checkpoint: _Optional[str] = ..., batch_id: _Optional[int] = ..., operator_id: _Optional[int] = ..., in_current_schema: _Optional[bool] = ..., include_timer_only_keys: _Optional[bool] = ...) -> None: ...

class ReadStateChanges(_message.Message):
    __slots__ = ("checkpoint", "start_batch", "end_batch", "operator_id", "in_current_schema")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    START_BATCH_FIELD_NUMBER: _ClassVar[int]
    END_BATCH_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    IN_CURRENT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    checkpoint: str
    start_batch: int
    end_batch: int
    operator_id: int
    in_current_schema: bool
    def __init__(self, checkpoint: _Optional[str] = ..., start_batch: _Optional[int] = ..., end_batch: _Optional[int] = ..., operator_id: _Optional[int] = ..., in_current_schema: _Optional[bool] = ...) -> None: ...
