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

from collections.abc import Collection, Iterable
from typing import Any

import structlog

from tidemark.hfile.writer import write_hfile
from tidemark.storage.base import Storage
from tidemark.table.logfiles.file_names import parse_log_file_name
from tidemark.table.metadata.actions import COMMIT, COMPACTION
from tidemark.table.metadata.avro import write_single_record
from tidemark.table.metadata.commit import COMPACT_OPERATION
from tidemark.table.metadata.commit_avro import commit_metadata_to_avro
from tidemark.table.metadata.compaction import COMPACTION_PLAN_SCHEMA
from tidemark.table.metadata_table.deltacommit import FilesPartition
from tidemark.table.metadata_table.files_records import encode_records
from tidemark.table.metadata_table.partitions import FILES
from tidemark.table.metadata_table.slices import (
    BASE_SUFFIX,
    FileSlice,
    FilesSlices,
    base_file_metadata,
    merged_records,
)
from tidemark.table.metadata_table.timeline import (
    FOLDER,
    completion_times,
    instant_path,
    latest_time,
    metadata_timeline,
)
from tidemark.table.timeline.instant import Instant, State, new_instant_time

__all__ = ["MAX_DELTA_COMMITS", "clean", "compact_if_due"]

log = structlog.get_logger(__name__)

MAX_DELTA_COMMITS = 10
"""Hudi's ``hoodie.metadata.compact.max.delta.commits`` default."""
RETAINED_SLICES = 2
WRITE_TOKEN = "0-0-0"
PLAN_VERSION = 2


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
    timeline = metadata_timeline(storage)
    if _roll_back_pending_compactions(storage, timeline):
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
    files = merged_records(storage, piece)
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
    metadata = base_file_metadata(
        partition.file_id,
        name,
        len(hfile),
        len(files),
        piece.base_instant,
        COMPACT_OPERATION,
        partition.schema,
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


def _roll_back_pending_compactions(storage: Storage, timeline: list[Instant]) -> bool:
    """Remove a compaction ``timeline`` shows left pending by a killed run: its base file,
    then its inflight and requested files (under the table lock nothing else runs one).
    Whether there was one (the timeline listed is then out of date)."""
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
    return bool(stuck)
