"""Compaction and cleaning of the metadata table's ``files`` partition, as Hudi 1.x does
them at the start of a metadata update, so a table only Tidemark writes keeps its
metadata table bounded.

Once the partition's latest file slice has ``MAX_DELTA_COMMITS`` log files (Hudi's
``hoodie.metadata.compact.max.delta.commits``), its base HFile and logs are merged into a
new base file at a fresh instant C: ``C.compaction.requested`` (a
``HoodieCompactionPlan``), ``C.compaction.inflight``, the base file
``<fileId>_0-0-0_C.hfile``, then ``C_<completion>.commit`` (operation ``COMPACT``).
A log written after C was requested completes after it, so it belongs to the new slice
(file slices by completion time, as Hudi 1.x reads them).

Only metadata of completed data instants is folded: Hudi's readers skip a log block whose
data instant is not completed, and a base file cannot forget one, so a compaction waits
while a deltacommit in the slice belongs to a pending data instant (a crash between the
two commits, until its rollback removes it). A compaction killed before its commit is
rolled back by the next: its base file deleted, its pending instant files removed.

Cleaning keeps the newest two slices (readers that listed before the compaction still
find theirs) and deletes older base files, logs and the metadata-timeline instants that
described only them; the metadata table's history is not archived (it describes only its
own files, deleted with them)."""

from __future__ import annotations

import io
import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import fastavro
import structlog

from tidemark.hfile.reader import HFileReader
from tidemark.hfile.writer import write_hfile
from tidemark.storage.base import Storage
from tidemark.table.logfiles.file_names import is_log_file_name, parse_log_file_name
from tidemark.table.logfiles.framing import BlockType, read_blocks
from tidemark.table.metadata.actions import COMMIT, COMPACTION
from tidemark.table.metadata.avro import write_single_record
from tidemark.table.metadata.commit import COMPACT_OPERATION, CommitMetadata, WriteStat
from tidemark.table.metadata.commit_avro import commit_metadata_to_avro
from tidemark.table.metadata.compaction import COMPACTION_PLAN_SCHEMA
from tidemark.table.metadata_table.deltacommit import FilesPartition
from tidemark.table.metadata_table.files_records import FileList, encode_records
from tidemark.table.metadata_table.partitions import FILES
from tidemark.table.metadata_table.timeline import (
    FOLDER,
    completion_times,
    instant_path,
    latest_time,
    metadata_timeline,
)
from tidemark.table.timeline.instant import Instant, State, new_instant_time

__all__ = ["MAX_DELTA_COMMITS", "FilesSlices", "compact_if_due"]

log = structlog.get_logger(__name__)

MAX_DELTA_COMMITS = 10
"""Hudi's ``hoodie.metadata.compact.max.delta.commits`` default."""
RETAINED_SLICES = 2
WRITE_TOKEN = "0-0-0"
PLAN_VERSION = 2
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
            (_base_instant(n), n)
            for n in names
            if n.endswith(BASE_SUFFIX) and _base_instant(n) in completed
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


def _base_instant(name: str) -> str:
    return name.rsplit("_", 1)[-1].removesuffix(BASE_SUFFIX)


def compact_if_due(
    storage: Storage,
    pending_data: Collection[str],
    *,
    after: str,
    max_delta_commits: int = MAX_DELTA_COMMITS,
) -> str | None:
    """Before the metadata deltacommit of data instant ``after``: roll back a compaction
    left pending, then compact the ``files`` slice once it has ``max_delta_commits`` logs
    (none of a data instant in ``pending_data``) and clean the slices before the last
    two. The compaction's instant, or None."""
    _roll_back_pending_compactions(storage)
    timeline = metadata_timeline(storage)
    latest = FilesSlices.read(storage, timeline).latest
    if len(latest.logs) < max_delta_commits:
        return None
    unsettled = sorted({parse_log_file_name(n).instant for n in latest.logs} & set(pending_data))
    if unsettled:
        log.info("metadata_table.compaction_deferred", table=storage.uri, pending=unsettled)
        return None
    instant = new_instant_time(after=max(after, latest_time(timeline) or after))
    _compact(storage, latest, instant)
    clean(storage)
    return instant


def _compact(storage: Storage, piece: FileSlice, instant: str) -> None:
    partition = FilesPartition.read(storage)
    files = _merged(storage, piece)
    name = f"{partition.file_id}_{WRITE_TOKEN}_{instant}{BASE_SUFFIX}"
    rows = [row for row, _, _ in files]
    hfile = write_hfile(
        encode_records(files, partition.schema, file_name=name),
        file_info={
            b"schema": partition.schema.encode(),
            b"minRecordKey": min(rows).encode(),
            b"maxRecordKey": max(rows).encode(),
        },
        options=partition.options,
    )
    requested = Instant(instant, COMPACTION, State.REQUESTED, layout=2)
    plan = _plan(storage, partition.file_id, piece)
    storage.create_if_absent(instant_path(requested), plan)
    storage.create_if_absent(instant_path(requested.with_state(State.INFLIGHT)), b"")
    storage.write(f"{FOLDER}{name}", hfile)
    stat = WriteStat(
        file_id=partition.file_id,
        path=f"{FILES}/{name}",
        prev_commit=piece.base_instant,
        num_writes=len(files),
        num_deletes=0,
        num_update_writes=0,
        num_inserts=len(files),
        total_write_bytes=len(hfile),
        file_size_in_bytes=len(hfile),
        partition_path=FILES,
    )
    metadata = CommitMetadata(
        partition_to_write_stats={FILES: [stat]},
        operation_type=COMPACT_OPERATION,
        extra_metadata={"schema": partition.schema},
    )
    completion = new_instant_time(after=latest_time(metadata_timeline(storage)))
    done = Instant(instant, COMMIT, State.COMPLETED, completion, layout=2)
    storage.create_if_absent(instant_path(done), commit_metadata_to_avro(metadata, COMMIT))
    log.info(
        "metadata_table.compacted",
        table=storage.uri,
        instant=instant,
        base_file=name,
        logs_folded=len(piece.logs),
    )


def _plan(storage: Storage, file_id: str, piece: FileSlice) -> bytes:
    """The ``HoodieCompactionPlan`` of the one operation: ``piece`` of ``files``."""
    sizes = {info.path[len(FOLDER) :]: info.size for info in storage.list_dir(FOLDER).files}
    log_bytes = sum(sizes.get(name, 0) for name in piece.logs)
    base_bytes = sizes.get(piece.base, 0) if piece.base else 0
    mib = 1024 * 1024
    operation = {
        "baseInstantTime": piece.base_instant,
        "deltaFilePaths": list(piece.logs),
        "dataFilePath": piece.base,
        "fileId": file_id,
        "partitionPath": FILES,
        "metrics": {
            "TOTAL_LOG_FILES": float(len(piece.logs)),
            "TOTAL_LOG_FILES_SIZE": float(log_bytes),
            "TOTAL_IO_READ_MB": (base_bytes + log_bytes) / mib,
            "TOTAL_IO_WRITE_MB": base_bytes / mib,
            "TOTAL_IO_MB": (2 * base_bytes + log_bytes) / mib,
        },
        "bootstrapFilePath": None,
    }
    record: dict[str, Any] = {
        "operations": [operation],
        "extraMetadata": {},
        "version": PLAN_VERSION,
        "strategy": None,
        "preserveHoodieMetadata": False,
        "missingSchedulePartitions": [],
    }
    return write_single_record(COMPACTION_PLAN_SCHEMA, record)


def _merged(storage: Storage, piece: FileSlice) -> list[FileList]:
    """The slice's records merged as Hudi's ``HoodieMetadataPayload`` merges them: per
    row, a newer tombstone removes a file (or partition), else the larger size wins."""
    merged: dict[str, tuple[int, dict[str, tuple[int, bool]]]] = {}
    for hfile in _hfiles(storage, piece):
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


def _hfiles(storage: Storage, piece: FileSlice) -> Iterator[bytes]:
    """The slice's HFiles in merge order: the base file, then each log's data blocks."""
    if piece.base:
        yield storage.read(f"{FOLDER}{piece.base}")
    for name in piece.logs:
        for block in read_blocks(storage.read(f"{FOLDER}{name}")):
            if block.block_type is BlockType.HFILE_DATA:
                yield block.content


def clean(storage: Storage) -> list[str]:
    """Delete the slices before the newest ``RETAINED_SLICES`` and the metadata-timeline
    instants that only they needed: completed deltacommits completed before the oldest
    kept slice began, compactions requested before it. The paths deleted."""
    timeline = metadata_timeline(storage)
    slices = FilesSlices.read(storage, timeline).slices
    if len(slices) <= RETAINED_SLICES:
        return []
    kept_from = slices[-RETAINED_SLICES].base_instant
    files = [
        f"{FOLDER}{name}"
        for piece in slices[:-RETAINED_SLICES]
        for name in ([piece.base] if piece.base else []) + list(piece.logs)
    ]
    completed = completion_times(timeline)
    gone = {
        timestamp
        for timestamp, done in completed.items()
        if (done <= kept_from) and timestamp < kept_from
    }
    instants = [instant_path(i) for i in _states_first_completed(timeline, gone)]
    storage.delete_many(files)
    storage.delete_many(instants)
    log.info("metadata_table.cleaned", table=storage.uri, files=len(files), instants=len(instants))
    return [*files, *instants]


def _states_first_completed(timeline: Iterable[Instant], timestamps: set[str]) -> list[Instant]:
    """The instant files at ``timestamps``, completed files first (readers stop seeing an
    instant before its pending files go)."""
    chosen = [i for i in timeline if i.timestamp in timestamps]
    return sorted(chosen, key=lambda i: i.state, reverse=True)


def _roll_back_pending_compactions(storage: Storage) -> None:
    """Remove a compaction left pending by a killed run: its base file, then its
    inflight and requested files (under the table lock nothing else runs one)."""
    timeline = metadata_timeline(storage)
    done = {i.timestamp for i in timeline if i.is_completed}
    stuck = [i for i in timeline if i.action == COMPACTION and i.timestamp not in done]
    for instant in sorted({i.timestamp for i in stuck}):
        bases = [
            info.path
            for info in storage.list_dir(FOLDER).files
            if info.path.endswith(f"_{instant}{BASE_SUFFIX}")
        ]
        storage.delete_many(bases)
        storage.delete_many([instant_path(i) for i in _states_first_completed(stuck, {instant})])
        log.warning("metadata_table.compaction_rolled_back", table=storage.uri, instant=instant)
