"""Markers: one entry per data file a write attempt creates, under ``.hoodie/.temp/<ts>``.

Two storage layouts are read, as Hudi's rollback reads both: direct markers (one empty
object named ``<partition>/<file>.marker.<IO>``) and timeline-server style batches
(``MARKERS0..N`` holding ``\\n``-separated names, plus ``MARKERS.type``).
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from tidemark.config import ClientConfig
from tidemark.errors import InvalidArgumentError
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.files.file_names import base_file_name, join_path, write_token
from tidemark.table.timeline.instant import is_instant_time, validate_instant_time

TEMP_DIR = ".hoodie/.temp"
MARKER_LEASE_ROOT = ".hoodie/.aux/tidemark/marker-leases"
"""Where the marker service keeps each marker dir's ownership lease, outside the marker
dir so Hudi's marker readers never see it."""
MARKER_INFIX = ".marker."
MARKERS_TYPE_FILE = "MARKERS.type"
TIMELINE_SERVER_BASED = "TIMELINE_SERVER_BASED"
_MARKERS_FILE = re.compile(r"MARKERS\d+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LARGE_TASK_NUMBER = 2**31 - 1
"""Spark's task, stage and attempt numbers are Java ints."""
_LATE_INSTANT = "99991231235959999"


class IOType(enum.Enum):
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


def marker_dir(instant: str) -> str:
    return f"{TEMP_DIR}/{validate_instant_time(instant)}"


def marker_lease_dir(instant: str) -> str:
    return f"{MARKER_LEASE_ROOT}/{validate_instant_time(instant)}"


def marker_name(partition_path: str, data_file_name: str, io_type: IOType) -> str:
    name = f"{join_path(partition_path, data_file_name)}{MARKER_INFIX}{io_type.value}"
    parse_marker_name(name)
    return name


def longest_marker_path(partition_path: str) -> str:
    """The longest path a write creates for a file of ``partition_path``, relative to the
    table: the direct marker of a base file (markers sit under ``.hoodie/.temp/<instant>/``
    and repeat the data file's path), with the largest write token a task gets."""
    token = write_token(_LARGE_TASK_NUMBER, _LARGE_TASK_NUMBER, _LARGE_TASK_NUMBER)
    file_name = base_file_name(f"{uuid.UUID(int=0)}-0", token, _LATE_INSTANT)
    return f"{marker_dir(_LATE_INSTANT)}/{marker_name(partition_path, file_name, IOType.MERGE)}"


def parse_marker_name(name: str) -> tuple[str, str, IOType]:
    """Split a marker name into (partition path, data file name, IO type), validating it."""
    if not name:
        raise InvalidArgumentError("marker name is empty", field="marker")
    if any(char in name for char in "\n\r\0"):
        raise InvalidArgumentError(f"marker name {name!r} has control characters", field="marker")
    if name.startswith("/") or "\\" in name:
        raise InvalidArgumentError(f"marker name {name!r} must be relative", field="marker")
    segments = name.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        raise InvalidArgumentError(
            f"marker name {name!r} has an empty, '.' or '..' segment", field="marker"
        )
    data_path, infix, io_name = name.rpartition(MARKER_INFIX)
    if not infix or data_path.rpartition("/")[2] in ("", ".", ".."):
        raise InvalidArgumentError(
            f"marker name {name!r} is not <partition>/<file>.marker.<IO>", field="marker"
        )
    if io_name not in IOType.__members__:
        raise InvalidArgumentError(
            f"marker name {name!r} has unknown IO type {io_name!r}", field="marker"
        )
    partition_path, _, data_file_name = data_path.rpartition("/")
    return partition_path, data_file_name, IOType[io_name]


def parse_markers_file(content: bytes) -> list[str]:
    """The marker names in a ``MARKERS<i>`` file: lines as Java's readLine splits them,
    blanks dropped. Every line must be a marker name, so a torn last line (a name cut
    before its ``.marker.<IO>`` end) or bytes that are not UTF-8 raise (ValueError or
    InvalidArgumentError, which ``read_parsed`` reports naming the file)."""
    names = [line for line in _LINE_BREAK.split(content.decode()) if line]
    for name in names:
        parse_marker_name(name)
    return names


def data_file_path(marker: str) -> str:
    """The table-relative path of the data file a marker names."""
    partition_path, data_file_name, _ = parse_marker_name(marker)
    return join_path(partition_path, data_file_name)


MarkerTuple = tuple[str, str, IOType]
"""(partition path, data file name, IO type)."""


class MarkerWriter(Protocol):
    def create(self, partition_path: str, data_file_name: str, io_type: IOType) -> bool:
        """Record the marker; True if created now, False if it already existed."""
        ...

    def create_many(self, markers: Sequence[MarkerTuple]) -> list[bool]:
        """Record several markers, durable when it returns (a task's log files: one wait
        for the service's flush instead of one each); one answer per marker."""
        ...


class MarkerReader(Protocol):
    def all_markers(self, instant: str) -> set[str]: ...

    def create_and_merge_markers(self, instant: str) -> set[str]: ...

    def delete_dir(self, instant: str) -> bool: ...


@dataclass(frozen=True)
class MarkerSpec:
    """Everything an executor needs to build its MarkerWriter; plain data, so picklable."""

    kind: Literal["direct", "service"]
    table_uri: str
    instant: str
    service_address: str | None = None
    fallback_to_direct: bool = False
    client: ClientConfig | None = None
    """The driver's client settings (TLS, token), so executors dial the service as the
    driver does without the token entering Spark's configuration; None = their env's."""

    def __post_init__(self) -> None:
        if self.kind not in ("direct", "service"):
            raise InvalidArgumentError(f"unknown marker kind {self.kind!r}", field="kind")
        if self.kind == "service" and not self.service_address:
            raise InvalidArgumentError("service markers need an address", field="service_address")
        validate_instant_time(self.instant)


class DirectMarkerWriter:
    """One empty object per marker, created only if absent (idempotent on task retries)."""

    def __init__(self, storage: Storage, instant: str) -> None:
        self.storage = storage
        self.directory = marker_dir(instant)

    def create(self, partition_path: str, data_file_name: str, io_type: IOType) -> bool:
        name = marker_name(partition_path, data_file_name, io_type)
        return self.storage.create_if_absent(f"{self.directory}/{name}", b"")

    def create_many(self, markers: Sequence[MarkerTuple]) -> list[bool]:
        return [self.create(*marker) for marker in markers]


def read_markers_from_storage(storage: Storage, instant: str) -> set[str]:
    """Every marker of ``instant``: direct objects and names inside ``MARKERS<n>`` files."""
    directory = marker_dir(instant) + "/"
    markers: set[str] = set()
    for info in storage.list(directory):
        relative = info.path[len(directory) :]
        if _MARKERS_FILE.fullmatch(relative):
            markers.update(read_parsed(storage, info.path, parse_markers_file))
        elif relative != MARKERS_TYPE_FILE:
            parse_marker_name(relative)
            markers.add(relative)
    return markers


def marker_dir_instants(storage: Storage) -> list[str]:
    """Instants that have a marker dir (one listing of ``.hoodie/.temp``)."""
    names = (path.rpartition("/")[2] for path in storage.list_dir(TEMP_DIR).dirs)
    return sorted(name for name in names if is_instant_time(name))


def delete_marker_dir(storage: Storage, instant: str) -> bool:
    """Delete the marker directory, and the marker service's lease of it (left behind when
    a service that wrote the dir died), with the temporaries of writes into either that a
    killed process left; True if the marker directory held anything."""
    deleted = storage.delete_prefix(marker_dir(instant) + "/") > 0
    storage.delete_prefix(marker_lease_dir(instant) + "/")
    storage.delete_many(
        partial.path
        for directory in (marker_dir(instant), marker_lease_dir(instant))
        for partial in storage.partial_files(directory)
    )
    return deleted


class StorageMarkerReader:
    """MarkerReader straight from storage (both layouts), as Hudi's rollback does."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def all_markers(self, instant: str) -> set[str]:
        return read_markers_from_storage(self.storage, instant)

    def create_and_merge_markers(self, instant: str) -> set[str]:
        return {
            marker
            for marker in self.all_markers(instant)
            if parse_marker_name(marker)[2] is not IOType.APPEND
        }

    def delete_dir(self, instant: str) -> bool:
        return delete_marker_dir(self.storage, instant)
