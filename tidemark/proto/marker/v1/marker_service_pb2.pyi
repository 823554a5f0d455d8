from tidemark.proto.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IOType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IO_TYPE_UNSPECIFIED: _ClassVar[IOType]
    IO_TYPE_CREATE: _ClassVar[IOType]
    IO_TYPE_MERGE: _ClassVar[IOType]
    IO_TYPE_APPEND: _ClassVar[IOType]

class MarkerFilter(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MARKER_FILTER_UNSPECIFIED: _ClassVar[MarkerFilter]
    MARKER_FILTER_ALL: _ClassVar[MarkerFilter]
    MARKER_FILTER_CREATE_AND_MERGE: _ClassVar[MarkerFilter]
    MARKER_FILTER_APPEND: _ClassVar[MarkerFilter]
IO_TYPE_UNSPECIFIED: IOType
IO_TYPE_CREATE: IOType
IO_TYPE_MERGE: IOType
IO_TYPE_APPEND: IOType
MARKER_FILTER_UNSPECIFIED: MarkerFilter
MARKER_FILTER_ALL: MarkerFilter
MARKER_FILTER_CREATE_AND_MERGE: MarkerFilter
MARKER_FILTER_APPEND: MarkerFilter

class Marker(_message.Message):
    __slots__ = ("partition_path", "data_file_name", "io_type")
    PARTITION_PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    IO_TYPE_FIELD_NUMBER: _ClassVar[int]
    partition_path: str
    data_file_name: str
    io_type: IOType
    def __init__(self, partition_path: _Optional[str] = ..., data_file_name: _Optional[str] = ..., io_type: _Optional[_Union[IOType, str]] = ...) -> None: ...

class CreateMarkerRequest(_message.Message):
    __slots__ = ("table", "instant_time", "marker")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    MARKER_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    marker: Marker
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ..., marker: _Optional[_Union[Marker, _Mapping]] = ...) -> None: ...

class CreateMarkerResponse(_message.Message):
    __slots__ = ("created",)
    CREATED_FIELD_NUMBER: _ClassVar[int]
    created: bool
    def __init__(self, created: _Optional[bool] = ...) -> None: ...

class CreateMarkersRequest(_message.Message):
    __slots__ = ("table", "instant_time", "markers")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    markers: _containers.RepeatedCompositeFieldContainer[Marker]
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ..., markers: _Optional[_Iterable[_Union[Marker, _Mapping]]] = ...) -> None: ...

class CreateMarkersResponse(_message.Message):
    __slots__ = ("created",)
    CREATED_FIELD_NUMBER: _ClassVar[int]
    created: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, created: _Optional[_Iterable[bool]] = ...) -> None: ...

class ListMarkersRequest(_message.Message):
    __slots__ = ("table", "instant_time", "filter")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    filter: MarkerFilter
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ..., filter: _Optional[_Union[MarkerFilter, str]] = ...) -> None: ...

class ListMarkersResponse(_message.Message):
    __slots__ = ("marker_names",)
    MARKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    marker_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, marker_names: _Optional[_Iterable[str]] = ...) -> None: ...

class MarkerDirExistsRequest(_message.Message):
    __slots__ = ("table", "instant_time")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ...) -> None: ...

class MarkerDirExistsResponse(_message.Message):
    __slots__ = ("exists",)
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    exists: bool
    def __init__(self, exists: _Optional[bool] = ...) -> None: ...

class DeleteMarkerDirRequest(_message.Message):
    __slots__ = ("table", "instant_time", "table_lock")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    TABLE_LOCK_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    table_lock: TableLockHolder
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ..., table_lock: _Optional[_Union[TableLockHolder, _Mapping]] = ...) -> None: ...

class TableLockHolder(_message.Message):
    __slots__ = ("generation", "token")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    generation: int
    token: str
    def __init__(self, generation: _Optional[int] = ..., token: _Optional[str] = ...) -> None: ...

class DeleteMarkerDirResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...
