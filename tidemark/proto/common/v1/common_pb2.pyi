from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class TableRef(_message.Message):
    __slots__ = ("base_path",)
    BASE_PATH_FIELD_NUMBER: _ClassVar[int]
    base_path: str
    def __init__(self, base_path: _Optional[str] = ...) -> None: ...

class Instant(_message.Message):
    __slots__ = ("time", "action")
    TIME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    time: str
    action: str
    def __init__(self, time: _Optional[str] = ..., action: _Optional[str] = ...) -> None: ...

class FileLocation(_message.Message):
    __slots__ = ("partition_path", "file_id", "instant_time")
    PARTITION_PATH_FIELD_NUMBER: _ClassVar[int]
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    partition_path: str
    file_id: str
    instant_time: str
    def __init__(self, partition_path: _Optional[str] = ..., file_id: _Optional[str] = ..., instant_time: _Optional[str] = ...) -> None: ...
