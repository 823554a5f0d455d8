"""The ``files`` partition's file slices and their merged records: its one file group
read against the metadata timeline, slices by completion time as Hudi 1.x reads them (a
log belongs to the slice of the newest base file requested before the log completed), and
a slice's base HFile and log blocks merged into the partition's listing; and the commit
metadata of a new base file (its initialisation, a compaction)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import fastavro

from tidemark.hfile.reader import HFileReader
from tidemark.storage.base import Storage
from tidemark.table.logfiles.file_names import is_log_file_name, parse_log_file_name
from tidemark.table.logfiles.framing import BlockType, read_blocks
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.metadata_table.files_records import FileList
from tidemark.table.metadata_table.partitions import FILES
from tidemark.table.metadata_table.timeline import FOLDER, completion_times
from tidemark.table.timeline.instant import Instant

__all__ = [
    "BASE_SUFFIX",
    "FileSlice",
    "FilesSlices",
    "base_file_metadata",
    "base_instant",
    "merged_records",
]

BASE_SUFFIX = ".hfile"
MAX_TIME = "~"
"""Sorts after every instant time: the end of the latest slice."""


@dataclass(frozen=True)
class FileSlice:
    """One slice of the ``files`` file group: its base file (None before the first) and
    the logs completed after the base's instant, in completion order (file names)."""

    base_instant: str
    base: str | None
    logs: tuple[str, ...]


@dataclass(frozen=True)
class FilesSlices:
    """The ``files`` partition's folder read against the metadata timeline: its slices,
    oldest first (files of instants not completed on it take no part)."""

    slices: tuple[FileSlice, ...]

    @classmethod
    def read(cls, storage: Storage, timeline: list[Instant]) -> FilesSlices:
        completed = completion_times(timeline)
        names = [info.path[len(FOLDER) :] for info in storage.list_dir(FOLDER).files]
        bases = sorted(
            (base_instant(n), n)
            for n in names
            if n.endswith(BASE_SUFFIX) and base_instant(n) in completed
        )
        logs = sorted(
            (completed[instant], name)
            for name in filter(is_log_file_name, names)
            if (instant := parse_log_file_name(name).instant) in completed
        )
        starts: list[tuple[str, str | None]] = [("", None), *bases]
        ends = [instant for instant, _ in starts[1:]] + [MAX_TIME]
        slices = [
            FileSlice(instant, base, tuple(n for done, n in logs if instant < done <= end))
            for (instant, base), end in zip(starts, ends, strict=True)
        ]
        if bases and not slices[0].logs:
            slices.pop(0)
        return cls(tuple(slices))

    @property
    def latest(self) -> FileSlice:
        return self.slices[-1]


def base_instant(name: str) -> str:
    return name.rsplit("_", 1)[-1].removesuffix(BASE_SUFFIX)


def merged_records(
    storage: Storage, piece: FileSlice, visible: Callable[[str], bool] = lambda _: True
) -> list[FileList]:
    """The slice's records merged as Hudi's ``HoodieMetadataPayload`` merges them: per
    row, a newer tombstone removes a file (or partition), else the larger size wins; logs
    of data instants not ``visible`` take no part."""
    merged: dict[str, tuple[int, dict[str, tuple[int, bool]]]] = {}
    for hfile in _hfiles(storage, piece, visible):
        reader = HFileReader(hfile)
        schema = fastavro.parse_schema(json.loads(reader.file_info[b"schema"]))
        for cell in reader.cells():
            record = fastavro.schemaless_reader(io.BytesIO(cell.value), schema, schema)
            assert isinstance(record, dict)
            _, files = merged.setdefault(cell.row.decode(), (record["type"], {}))
            for file_name, info in (record.get("filesystemMetadata") or {}).items():
                if info["isDeleted"]:
                    files.pop(file_name, None)
                else:
                    size = max(info["size"], files.get(file_name, (0, False))[0])
                    files[file_name] = (size, False)
    return sorted(
        ((row, kind, files) for row, (kind, files) in merged.items()),
        key=lambda record: record[0].encode(),
    )


def _hfiles(storage: Storage, piece: FileSlice, visible: Callable[[str], bool]) -> Iterator[bytes]:
    """The slice's HFiles in merge order: the base file, then each log's data blocks."""
    if piece.base:
        yield storage.read(f"{FOLDER}{piece.base}")
    for name in piece.logs:
        if not visible(parse_log_file_name(name).instant):
            continue
        for block in read_blocks(storage.read(f"{FOLDER}{name}")):
            if block.block_type is BlockType.HFILE_DATA:
                yield block.content


def base_file_metadata(
    file_id: str, name: str, size: int, records: int, prev_commit: str, operation: str, schema: str
) -> CommitMetadata:
    """The commit metadata of an instant that wrote base file ``name`` of ``size`` bytes
    holding ``records`` records into the ``files`` partition."""
    stat = WriteStat(
        file_id=file_id,
        path=f"{FILES}/{name}",
        prev_commit=prev_commit,
        num_writes=records,
        num_deletes=0,
        num_update_writes=0,
        num_inserts=records,
        total_write_bytes=size,
        file_size_in_bytes=size,
        partition_path=FILES,
    )
    return CommitMetadata(
        partition_to_write_stats={FILES: [stat]},
        operation_type=operation,
        extra_metadata={"schema": schema},
    )
