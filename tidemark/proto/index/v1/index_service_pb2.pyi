from tidemark.proto.common.v1 import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LookupRequest(_message.Message):
    __slots__ = ("table", "keys", "as_of_instant")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    AS_OF_INSTANT_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    keys: bytes
    as_of_instant: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., keys: _Optional[bytes] = ..., as_of_instant: _Optional[str] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ("locations", "found")
    LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    locations: bytes
    found: int
    def __init__(self, locations: _Optional[bytes] = ..., found: _Optional[int] = ...) -> None: ...

class StreamLookupRequest(_message.Message):
    __slots__ = ("table", "keys", "as_of_instant")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    AS_OF_INSTANT_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    keys: bytes
    as_of_instant: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., keys: _Optional[bytes] = ..., as_of_instant: _Optional[str] = ...) -> None: ...

class StreamLookupResponse(_message.Message):
    __slots__ = ("locations", "found")
    LOCATIONS_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    locations: bytes
    found: int
    def __init__(self, locations: _Optional[bytes] = ..., found: _Optional[int] = ...) -> None: ...

class StageChangesRequest(_message.Message):
    __slots__ = ("table", "instant_time", "changes")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    changes: bytes
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ..., changes: _Optional[bytes] = ...) -> None: ...

class StageChangesResponse(_message.Message):
    __slots__ = ("staged",)
    STAGED_FIELD_NUMBER: _ClassVar[int]
    staged: int
    def __init__(self, staged: _Optional[int] = ...) -> None: ...

class DiscardInstantRequest(_message.Message):
    __slots__ = ("table", "instant_time")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    INSTANT_TIME_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    instant_time: str
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., instant_time: _Optional[str] = ...) -> None: ...

class DiscardInstantResponse(_message.Message):
    __slots__ = ("discarded",)
    DISCARDED_FIELD_NUMBER: _ClassVar[int]
    discarded: bool
    def __init__(self, discarded: _Optional[bool] = ...) -> None: ...

class BuildStatusRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ...) -> None: ...

class BuildStatusResponse(_message.Message):
    __slots__ = ("exists", "shards", "as_of_instant", "build_in_progress", "format_version")
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    AS_OF_INSTANT_FIELD_NUMBER: _ClassVar[int]
    BUILD_IN_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    exists: bool
    shards: int
    as_of_instant: str
    build_in_progress: bool
    format_version: int
    def __init__(self, exists: _Optional[bool] = ..., shards: _Optional[int] = ..., as_of_instant: _Optional[str] = ..., build_in_progress: _Optional[bool] = ..., format_version: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("entries", "shards", "bytes", "block_cache", "delta_files", "max_shard_deltas")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    BLOCK_CACHE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FILES_FIELD_NUMBER: _ClassVar[int]
    MAX_SHARD_DELTAS_FIELD_NUMBER: _ClassVar[int]
    entries: int
    shards: int
    bytes: int
    block_cache: BlockCacheStats
    delta_files: int
    max_shard_deltas: int
    def __init__(self, entries: _Optional[int] = ..., shards: _Optional[int] = ..., bytes: _Optional[int] = ..., block_cache: _Optional[_Union[BlockCacheStats, _Mapping]] = ..., delta_files: _Optional[int] = ..., max_shard_deltas: _Optional[int] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ("table", "min_deltas")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    MIN_DELTAS_FIELD_NUMBER: _ClassVar[int]
    table: _common_pb2.TableRef
    min_deltas: int
    def __init__(self, table: _Optional[_Union[_common_pb2.TableRef, _Mapping]] = ..., min_deltas: _Optional[int] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ("shards_compacted", "deltas_folded", "manifests_deleted")
    SHARDS_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    DELTAS_FOLDED_FIELD_NUMBER: _ClassVar[int]
    MANIFESTS_DELETED_FIELD_NUMBER: _ClassVar[int]
    shards_compacted: int
    deltas_folded: int
    manifests_deleted: int
    def __init__(self, shards_compacted: _Optional[int] = ..., deltas_folded: _Optional[int] = ..., manifests_deleted: _Optional[int] = ...) -> None: ...

class BlockCacheStats(_message.Message):
    __slots__ = ("hits", "misses", "hit_rate", "bytes", "capacity_bytes")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    HIT_RATE_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_BYTES_FIELD_NUMBER: _ClassVar[int]
    hits: int
    misses: int
    hit_rate: float
    bytes: int
    capacity_bytes: int
    def __init__(self, hits: _Optional[int] = ..., misses: _Optional[int] = ..., hit_rate: _Optional[float] = ..., bytes: _Optional[int] = ..., capacity_bytes: _Optional[int] = ...) -> None: ...
