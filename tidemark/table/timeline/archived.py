"""Hudi's archived timeline (table version 6): the instants Hudi's archiver moved off the
active timeline, read from its log files, so that a base file older than the active
timeline counts as committed only when the archive says its write completed.

Hudi's archiver (timeline layout 1) appends the instants it removes from ``.hoodie/`` to
log files ``<archive folder>/.commits_.archive.<N>_<writeToken>`` (the folder is
``.hoodie/<hoodie.archivelog.folder>``, ``archived`` by default). A log file is a sequence
of blocks in Hudi's log format version 1, every number big-endian:

    "#HUDI#"  magic
    int64     block size: the bytes after this field, up to and including the last one
    int32     log format version (1)
    int32     block type (3: Avro data; the archiver writes no other kind, others are skipped)
    header    int32 entry count, then per entry: int32 key (2: the schema), int32 length,
              UTF-8 value
    int64     content length, then the content
    footer    laid out like the header
    int64     the block's length including the magic (a reverse pointer)

An Avro data block's content is int32 block version, int32 record count, then per record
an int32 length and the record in Avro binary encoding under the header's schema, here
``HoodieArchivedMetaEntry``: ``commitTime``, ``actionType``, ``actionState`` (null in very
old archives, which held completed instants only, as Hudi reads them) and the action's
metadata, which is skipped.

A block that does not end where its size says, or is not followed by the next magic, is
what a crashed append leaves: it is skipped up to the next magic, as Hudi's reader does.
Anything else that cannot be read is an error naming the file: guessing would either hide
committed rows or show uncommitted ones.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.types import Schema

from tidemark.errors import FailedPreconditionError, NotFoundError
from tidemark.storage.base import FileInfo, Storage
from tidemark.table.metadata.actions import DELTA_COMMIT, WRITE_ACTIONS
from tidemark.table.timeline.archived_writes import NO_WRITES, ArchivedWrites
from tidemark.table.timeline.parsed_files import Parsed, ParsedFiles

META_FOLDER = ".hoodie"
ARCHIVE_FOLDER_PROPERTY = "hoodie.archivelog.folder"
DEFAULT_ARCHIVE_FOLDER = "archived"
ARCHIVE_FILE = re.compile(r"\.commits_\.archive\.\d+(_.*)?")
MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
AVRO_DATA_BLOCK = 3
SCHEMA_HEADER = 2
COMPLETED = "COMPLETED"
MERGE_RELISTS = 3
"""Listings tried when archive files vanish while being read (merges meanwhile)."""
ARCHIVE_CACHE_FILES = 4096
"""Archive log files whose completed writes are kept per process (``ArchivedWrites``): a
writer that opens its table each micro-batch parses only the archive's new files (a file
appended to is read again: its size changed), not the whole archive, whose size grows with
the table's history."""

ENTRY_FIELDS: Schema = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieArchivedMetaEntry",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            {"name": name, "type": ["null", "string"], "default": None}
            for name in ("commitTime", "actionType", "actionState")
        ],
    }
)
"""The reader schema: only the fields that say which instant completed."""

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ArchivedInstant:
    """One archive entry."""

    timestamp: str
    action: str
    state: str


archive_cache: ParsedFiles[ArchivedWrites] = ParsedFiles(ARCHIVE_CACHE_FILES)


def archive_folder(properties: dict[str, str]) -> str:
    """Where Hudi archives: ``.hoodie/<hoodie.archivelog.folder>`` (an empty value is
    ``.hoodie`` itself, where the oldest Hudi versions archived)."""
    folder = properties.get(ARCHIVE_FOLDER_PROPERTY, DEFAULT_ARCHIVE_FOLDER).strip("/ ")
    return f"{META_FOLDER}/{folder}" if folder else META_FOLDER


class ArchivedTimeline:
    """The completed writes in a table's archived timeline, read once per table load and
    again only when the archive's files changed (one listing per ``completed_writes``),
    each file's writes parsed once per process (``archive_cache``); ``instants`` reads
    every entry again (the history listing's)."""

    def __init__(self, storage: Storage, folder: str = f"{META_FOLDER}/{DEFAULT_ARCHIVE_FOLDER}"):
        self.storage = storage
        self.folder = folder
        self._read_from: tuple[FileInfo, ...] | None = None
        self._writes = NO_WRITES

    def completed_writes(self) -> frozenset[str]:
        """Instant times the archive lists as a COMPLETED commit, deltacommit or
        replacecommit."""
        return self._archived_writes().writes

    def completed_deltacommits(self) -> dict[str, str]:
        """Requested time -> completion time (the same time: version 6 records no other)
        of the COMPLETED deltacommits the archive lists."""
        return dict(self._archived_writes().deltacommits)

    def _archived_writes(self) -> ArchivedWrites:
        files = self.files()
        if files != self._read_from:
            files, found = self._read(files, self._writes_of)
            self._writes = ArchivedWrites.union(found)
            self._read_from = files
        return self._writes

    def instants(self) -> tuple[ArchivedInstant, ...]:
        """Every entry of the archive files, files in name order, each entry once (a
        merge lists its entries twice until it deletes the small files)."""
        _, found = self._read(self.files(), self._entries_of)
        return tuple(dict.fromkeys(entry for entries in found for entry in entries))

    def _read(
        self, files: tuple[FileInfo, ...], parse: Callable[[FileInfo], Parsed]
    ) -> tuple[tuple[FileInfo, ...], list[Parsed]]:
        """What ``parse`` finds in each of ``files``, listed again when a merge deleted one
        meanwhile (its entries are in the merged file, which that listing shows)."""
        for _ in range(MERGE_RELISTS):
            archive_cache.retain(self.storage.uri, [info.path for info in files])
            try:
                return files, [parse(info) for info in files]
            except NotFoundError:
                files = self.files()
        raise _unreadable(self.folder, "its files kept disappearing while being read")

    def _entries_of(self, info: FileInfo) -> list[ArchivedInstant]:
        return parse_archive_log(self.storage.read(info.path), info.path)

    def _writes_of(self, info: FileInfo) -> ArchivedWrites:
        return archive_cache.read(
            (self.storage.uri, info.path, info.size),
            lambda: _completed_writes(self._entries_of(info)),
        )

    def files(self) -> tuple[FileInfo, ...]:
        """The archive's log files (one listing)."""
        return tuple(
            info
            for info in self.storage.list_dir(self.folder).files
            if ARCHIVE_FILE.fullmatch(info.path.rpartition("/")[2])
        )


def _completed_writes(entries: Iterable[ArchivedInstant]) -> ArchivedWrites:
    """The writes ``entries`` list as completed (version 6 records no completion time:
    a deltacommit's is its requested time)."""
    completed = [entry for entry in entries if entry.state == COMPLETED]
    return ArchivedWrites(
        frozenset(entry.timestamp for entry in completed if entry.action in WRITE_ACTIONS),
        {entry.timestamp: entry.timestamp for entry in completed if entry.action == DELTA_COMMIT},
    )


def parse_archive_log(data: bytes, path: str) -> list[ArchivedInstant]:
    """Every instant recorded in one archive log file, in file order."""
    if not data.startswith(MAGIC):
        raise _unreadable(path, "it does not start with Hudi's log magic #HUDI#")
    instants: list[ArchivedInstant] = []
    position = 0
    while position < len(data):
        block_start = position + len(MAGIC)
        block_end = _block_end(data, block_start)
        if block_end is None:
            next_magic = data.find(MAGIC, block_start)
            position = len(data) if next_magic < 0 else next_magic
            continue
        instants += _read_block(data[block_start + _LONG.size : block_end], path)
        position = block_end
    return instants


def last_block(storage: Storage, info: FileInfo) -> list[ArchivedInstant]:
    """The entries of an archive file's last block (the newest archival's: each writes
    one, and a merge keeps the blocks in order), found by its reverse pointer with two
    small reads; the whole file is read when the pointer does not lead to a block."""
    if info.size > _LONG.size:
        tail = storage.read_range(info.path, info.size - _LONG.size, _LONG.size)
        length = _LONG.unpack(tail)[0] + _LONG.size  # the pointer leaves out the size field
        if len(MAGIC) + _LONG.size < length <= info.size:
            block = storage.read_range(info.path, info.size - length, length)
            if _block_end(block, len(MAGIC)) == len(block):
                return parse_archive_log(block, info.path)
    return parse_archive_log(storage.read(info.path), info.path)


def _block_end(data: bytes, block_start: int) -> int | None:
    """Where the block whose size field is at ``block_start`` ends, or None when it is
    not whole: cut short, its reverse pointer disagreeing, or no magic after it."""
    if block_start + _LONG.size > len(data):
        return None
    size = _LONG.unpack_from(data, block_start)[0]
    end = block_start + _LONG.size + size
    if size < _LONG.size or end > len(data):
        return None
    if _LONG.unpack_from(data, end - _LONG.size)[0] != size + len(MAGIC):
        return None
    if end < len(data) and not data.startswith(MAGIC, end):
        return None
    return end


def _read_block(block: bytes, path: str) -> list[ArchivedInstant]:
    """The instants of one whole block (from its version field to its reverse pointer)."""
    reader = _Reader(block, path)
    version = reader.int32()
    if version != LOG_FORMAT_VERSION:
        raise _unreadable(path, f"log format version {version} (only 1 is supported)")
    block_type = reader.int32()
    header = reader.metadata()
    content = reader.take(reader.int64())
    if block_type != AVRO_DATA_BLOCK:
        return []
    schema_json = header.get(SCHEMA_HEADER)
    if schema_json is None:
        raise _unreadable(path, "an Avro data block has no schema in its header")
    return _read_entries(content, schema_json, path)


def _read_entries(content: bytes, schema_json: str, path: str) -> list[ArchivedInstant]:
    try:
        writer_schema = fastavro.parse_schema(json.loads(schema_json))
    except (ValueError, TypeError, fastavro.schema.SchemaParseException) as error:
        raise _unreadable(path, f"its block schema is not Avro ({error})") from error
    reader = _Reader(content, path)
    block_version = reader.int32()
    if block_version < 1:
        raise _unreadable(path, f"Avro data block version {block_version} (1 or later)")
    instants = []
    for _ in range(reader.int32()):
        record = reader.take(reader.int32())
        try:
            entry = fastavro.schemaless_reader(io.BytesIO(record), writer_schema, ENTRY_FIELDS)
        except (ValueError, EOFError, SchemaResolutionError) as error:
            reason = f"a record is not a HoodieArchivedMetaEntry ({error})"
            raise _unreadable(path, reason) from error
        assert isinstance(entry, dict)
        if not entry["commitTime"] or not entry["actionType"]:
            raise _unreadable(path, "a record lacks commitTime or actionType")
        instants.append(
            ArchivedInstant(
                entry["commitTime"],
                entry["actionType"],
                entry["actionState"] or COMPLETED,
            )
        )
    return instants


class _Reader:
    """Big-endian fields read one after another from ``data``; running out of bytes is an
    error naming the file."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.path = path
        self.position = 0

    def take(self, count: int) -> bytes:
        if count < 0 or self.position + count > len(self.data):
            raise _unreadable(self.path, "a block is shorter than its fields say")
        chunk = self.data[self.position : self.position + count]
        self.position += count
        return chunk

    def int32(self) -> int:
        value: int = _INT.unpack(self.take(_INT.size))[0]
        return value

    def int64(self) -> int:
        value: int = _LONG.unpack(self.take(_LONG.size))[0]
        return value

    def metadata(self) -> dict[int, str]:
        entries = {}
        for _ in range(self.int32()):
            key = self.int32()
            entries[key] = self.take(self.int32()).decode("utf-8", errors="replace")
        return entries


def _unreadable(path: str, reason: str) -> FailedPreconditionError:
    return FailedPreconditionError(
        f"cannot read Hudi's archived timeline file {path}: {reason}", field="table"
    )
