"""Validation of marker requests: every bad input is an InvalidArgumentError naming its field.

Checks run before anything is queued, so a rejected request writes nothing. Table paths
are checked by ``tidemark.rpc.requests.table_uri``.
"""

from __future__ import annotations

import re

from tidemark.errors import InvalidArgumentError
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.table.files.file_names import join_path
from tidemark.table.leases.storage_lease import LockHolder
from tidemark.table.timeline.instant import validate_instant_time
from tidemark.table.writes.markers import MARKER_INFIX, IOType, marker_name

IO_TYPES: dict[int, IOType] = {
    pb.IO_TYPE_CREATE: IOType.CREATE,
    pb.IO_TYPE_MERGE: IOType.MERGE,
    pb.IO_TYPE_APPEND: IOType.APPEND,
}
_FORBIDDEN_CHARACTERS = ("\n", "\r", "\0", "\\")
_SEGMENT = r"(?!\.\.?(?:/|\Z))[^/\n\r\0\\]+"
_VALID_PARTITION_PATH = re.compile(rf"(?:{_SEGMENT}(?:/{_SEGMENT})*)?")
_VALID_FILE_NAME = re.compile(_SEGMENT)
"""What ``_check_segments`` accepts, as one match per field: a create's fast path."""


def lock_holder(request: pb.DeleteMarkerDirRequest) -> LockHolder | None:
    """The table lock the caller claims to hold, if it sent one (checked by the engine)."""
    if not request.HasField("table_lock"):
        return None
    if request.table_lock.generation <= 0 or not request.table_lock.token:
        raise InvalidArgumentError("needs a positive generation and a token", field="table_lock")
    return LockHolder(request.table_lock.generation, request.table_lock.token)


def instant_time(value: str) -> str:
    return validate_instant_time(value, field="instant_time")


def marker(message: pb.Marker, *, field: str = "marker") -> str:
    """The Hudi marker name ``<partition>/<file>.marker.<IO>`` of a request's marker.

    Valid names (nearly all) cost two regex matches; an invalid one is checked again
    piece by piece for an error naming the field and the problem."""
    io_type = IO_TYPES.get(message.io_type)
    if io_type is None:
        raise InvalidArgumentError(
            f"io_type must be CREATE, MERGE or APPEND, got {message.io_type}",
            field=f"{field}.io_type",
        )
    partition_path, data_file_name = message.partition_path, message.data_file_name
    if _VALID_PARTITION_PATH.fullmatch(partition_path) and _VALID_FILE_NAME.fullmatch(
        data_file_name
    ):
        return f"{join_path(partition_path, data_file_name)}{MARKER_INFIX}{io_type.value}"
    _check_segments(message.partition_path, f"{field}.partition_path", allow_empty=True)
    _check_segments(message.data_file_name, f"{field}.data_file_name", allow_empty=False)
    if "/" in message.data_file_name:
        raise InvalidArgumentError(
            f"must be a file name without '/': {message.data_file_name!r}",
            field=f"{field}.data_file_name",
        )
    return marker_name(message.partition_path, message.data_file_name, io_type)


def markers(messages: list[pb.Marker], limit: int) -> list[str]:
    if len(messages) > limit:
        raise InvalidArgumentError(
            f"at most {limit} markers per call, got {len(messages)}", field="markers"
        )
    return [marker(message, field=f"markers[{index}]") for index, message in enumerate(messages)]


def _check_segments(value: str, field: str, *, allow_empty: bool) -> None:
    if not value:
        if allow_empty:
            return
        raise InvalidArgumentError("must not be empty", field=field)
    if value.startswith("/"):
        raise InvalidArgumentError(f"must be relative: {value!r}", field=field)
    if any(character in value for character in _FORBIDDEN_CHARACTERS):
        raise InvalidArgumentError(
            f"must not contain a newline, NUL or backslash: {value!r}", field=field
        )
    if any(segment in ("", ".", "..") for segment in value.split("/")):
        raise InvalidArgumentError(f"has an empty, '.' or '..' segment: {value!r}", field=field)
