from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetRoutesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetRoutesResponse(_message.Message):
    __slots__ = ("method_ports",)
    class MethodPortsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    METHOD_PORTS_FIELD_NUMBER: _ClassVar[int]
    method_ports: _containers.ScalarMap[str, int]
    def __init__(self, method_ports: _Optional[_Mapping[str, int]] = ...) -> None: ...
