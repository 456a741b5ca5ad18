from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RepartitionState(_message.Message):
    __slots__ = ("checkpoint", "num_partitions")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    checkpoint: str
    num_partitions: int
    def __init__(self, checkpoint: _Optional[str] = ..., num_partitions: _Optional[int] = ...) -> None: ...
