"""Writes Hudi's archived timeline (table version 6), the format ``archived_timeline`` reads.

Each archival run writes one new log file ``.commits_.archive.<N>_<writeToken>`` (N one
more than the highest present; Hudi rolls over to a new file the same way on storage that
cannot append) holding one Avro data block of ``HoodieArchivedMetaEntry`` records, one per
file of each archived instant (requested, inflight, completed), as Hudi 0.14's archiver
writes them. The block's writer schema (in its header) is Hudi's entry schema limited to
the fields Tidemark fills: every other field has a null default, so Hudi's reader resolves
the records against its own schema. Completed commits and deltacommits carry their metadata
as Avro ``HoodieCommitMetadata`` (the write stat fields Tidemark records, a deltacommit's
log files among them), replacecommits as ``HoodieReplaceCommitMetadata``, cleans their
``HoodieCleanMetadata`` and plan, rollbacks their metadata, a compaction (requested as
``compaction``, completed as ``commit``) its ``HoodieCompactionPlan``.

Small files are merged as Hudi 0.14's archiver merges them on storage that cannot append
(``hoodie.archive.merge.enable``, ``merge_small_files``): once the newest files up to the
first one larger than the small-file limit number at least the batch size, a plan
``mergeArchivePlan`` (Avro ``HoodieMergeArchiveFilePlan``: the candidates, the merged
file's name) is written, then the merged file (the next number: the candidates' blocks,
oldest first), then the candidates are deleted, then the plan. An interrupted merge is
finished or undone from its plan (``finish_merge``) as Hudi does.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.types import Schema

from tidemark import faults
from tidemark.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from tidemark.storage.base import FileInfo, Storage
from tidemark.table.metadata.actions import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    ROLLBACK,
)
from tidemark.table.metadata.avro import (
    NAMESPACE,
    STRINGS,
    read_single_record,
    write_single_record,
)
from tidemark.table.metadata.clean import CLEAN_METADATA, CLEANER_PLAN, CleanMetadata, CleanPlan
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.metadata.compaction import COMPACTION_PLAN, read_compaction_plan
from tidemark.table.metadata.rollback import ROLLBACK_METADATA, RollbackMetadata
from tidemark.table.timeline.archived import (
    AVRO_DATA_BLOCK,
    LOG_FORMAT_VERSION,
    MAGIC,
    SCHEMA_HEADER,
    ArchivedTimeline,
)
from tidemark.table.timeline.instant import Instant, State

AVRO_BLOCK_VERSION = 3
"""Hudi's current Avro data block version (records prefixed by their length)."""
WRITE_TOKEN = "1-0-1"
_NUMBER = re.compile(r"\.commits_\.archive\.(\d+)")
_OPTIONAL_STRING = ["null", "string"]
_OPTIONAL_LONG = ["null", "long"]
_STAT_STRINGS = ("fileId", "path", "prevCommit", "partitionPath")
_STAT_LONGS = (
    "numWrites",
    "numDeletes",
    "numUpdateWrites",
    "numInserts",
    "totalWriteBytes",
    "totalWriteErrors",
    "fileSizeInBytes",
)


def _optional(name: str, schema: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", schema], "default": None}


_DELTA_STAT_FIELDS: list[dict[str, Any]] = [
    {"name": "logVersion", "type": ["null", "int"], "default": None},
    {"name": "logOffset", "type": _OPTIONAL_LONG, "default": None},
    {"name": "baseFile", "type": _OPTIONAL_STRING, "default": None},
    {"name": "logFiles", "type": ["null", STRINGS], "default": None},
]
"""HoodieWriteStat's fields of a deltacommit's appends (null for a base file)."""
_WRITE_STAT = {
    "type": "record",
    "name": "HoodieWriteStat",
    "fields": [{"name": n, "type": _OPTIONAL_STRING, "default": None} for n in _STAT_STRINGS]
    + [{"name": n, "type": _OPTIONAL_LONG, "default": None} for n in _STAT_LONGS]
    + _DELTA_STAT_FIELDS,
}
_COMMON_COMMIT_FIELDS = [
    {
        "name": "partitionToWriteStats",
        "type": ["null", {"type": "map", "values": {"type": "array", "items": "HoodieWriteStat"}}],
        "default": None,
    },
    _optional("extraMetadata", {"type": "map", "values": "string"}),
    {"name": "version", "type": ["int", "null"], "default": 1},
    {"name": "operationType", "type": _OPTIONAL_STRING, "default": None},
]
_COMMIT_METADATA = {
    "type": "record",
    "name": "HoodieCommitMetadata",
    "fields": [
        {
            "name": "partitionToWriteStats",
            "type": [
                "null",
                {"type": "map", "values": {"type": "array", "items": _WRITE_STAT}},
            ],
            "default": None,
        },
        *_COMMON_COMMIT_FIELDS[1:],
    ],
}
_REPLACE_METADATA = {
    "type": "record",
    "name": "HoodieReplaceCommitMetadata",
    "fields": [
        *_COMMON_COMMIT_FIELDS,
        {
            "name": "partitionToReplaceFileIds",
            "type": ["null", {"type": "map", "values": {"type": "array", "items": "string"}}],
            "default": None,
        },
    ],
}


ENTRY: dict[str, Any] = {
    "type": "record",
    "name": "HoodieArchivedMetaEntry",
    "namespace": NAMESPACE,
    "fields": [
        _optional("hoodieCommitMetadata", _COMMIT_METADATA),
        _optional("hoodieCleanMetadata", CLEAN_METADATA),
        _optional("hoodieRollbackMetadata", ROLLBACK_METADATA),
        {"name": "commitTime", "type": _OPTIONAL_STRING, "default": None},
        {"name": "actionType", "type": _OPTIONAL_STRING, "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        _optional("hoodieCompactionPlan", COMPACTION_PLAN),
        _optional("hoodieCleanerPlan", CLEANER_PLAN),
        {"name": "actionState", "type": _OPTIONAL_STRING, "default": None},
        _optional("hoodieReplaceCommitMetadata", _REPLACE_METADATA),
    ],
}
ENTRY_SCHEMA: Schema = fastavro.parse_schema(ENTRY)
_STATE_NAMES = {state: state.name for state in State}
MERGE_PLAN = "mergeArchivePlan"
"""``HoodieArchivedTimeline.MERGE_ARCHIVE_PLAN_NAME``."""
MERGE_PLAN_SCHEMA: Schema = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieMergeArchiveFilePlan",
        "namespace": NAMESPACE,
        "fields": [
            {"name": "version", "type": ["int", "null"], "default": 1},
            {"name": "candidate", "type": ["null", {"type": "array", "items": "string"}]},
            {"name": "mergedArchiveFileName", "type": ["null", "string"]},
        ],
    }
)
MERGED_POINT = "archive_merge_before_delete"
"""Fault point: a merge killed after writing the merged file, before deleting the small ones."""
DEFAULT_MERGE_BATCH_SIZE = 10
"""``hoodie.archive.merge.files.batch.size``."""
DEFAULT_MERGE_SMALL_FILE_LIMIT = 20 * 1024 * 1024
"""``hoodie.archive.merge.small.file.limit.bytes``."""


@dataclass(frozen=True)
class ArchivedFile:
    """One file of an archived instant and its content (read from the active timeline)."""

    instant: Instant
    content: bytes


def entry_record(archived: ArchivedFile, base_uri: str) -> dict[str, Any]:
    """The HoodieArchivedMetaEntry of one instant file."""
    instant = archived.instant
    record: dict[str, Any] = {
        "commitTime": instant.timestamp,
        "actionType": instant.action,
        "version": 1,
        "actionState": _STATE_NAMES[instant.state],
    }
    data = archived.content
    if instant.is_completed and instant.action in (COMMIT, DELTA_COMMIT):
        record["hoodieCommitMetadata"] = _commit_record(CommitMetadata.from_json(data))
    elif instant.state is State.REQUESTED and instant.action == COMPACTION and data:
        record["hoodieCompactionPlan"] = read_compaction_plan(data)
    elif instant.is_completed and instant.action == REPLACE_COMMIT:
        metadata = CommitMetadata.from_json(data)
        record["hoodieReplaceCommitMetadata"] = {
            **_commit_record(metadata),
            "partitionToReplaceFileIds": {
                p: list(ids) for p, ids in metadata.partition_to_replace_file_ids.items()
            },
        }
    elif instant.is_completed and instant.action == CLEAN:
        record["hoodieCleanMetadata"] = CleanMetadata.from_avro(data).to_record(base_uri)
    elif instant.state is State.REQUESTED and instant.action == CLEAN and data:
        record["hoodieCleanerPlan"] = CleanPlan.from_avro(data).to_record(base_uri)
    elif instant.is_completed and instant.action == ROLLBACK:
        record["hoodieRollbackMetadata"] = RollbackMetadata.from_avro(data).to_record()
    return record


def _commit_record(metadata: CommitMetadata) -> dict[str, Any]:
    stats = {
        partition: [
            {name: value for name, value in stat.to_json_dict().items() if name in _STAT_FIELDS}
            for stat in partition_stats
        ]
        for partition, partition_stats in metadata.partition_to_write_stats.items()
    }
    return {
        "partitionToWriteStats": stats,
        "extraMetadata": dict(metadata.extra_metadata),
        "version": 1,
        "operationType": metadata.operation_type,
    }


_STAT_FIELDS = frozenset(_STAT_STRINGS + _STAT_LONGS) | {f["name"] for f in _DELTA_STAT_FIELDS}


def log_block(records: Sequence[dict[str, Any]]) -> bytes:
    """One whole Avro data block (magic to reverse pointer) of entry ``records``."""
    return avro_data_block(ENTRY, ENTRY_SCHEMA, records)


def avro_data_block(
    schema_json: dict[str, Any], schema: Schema, records: Sequence[dict[str, Any]]
) -> bytes:
    """A Hudi log block (format version 1, type Avro data) of ``records`` encoded with
    ``schema``, whose JSON form ``schema_json`` goes in the header."""
    encoded = []
    for record in records:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, schema, record)
        encoded.append(buffer.getvalue())
    content = struct.pack(">ii", AVRO_BLOCK_VERSION, len(encoded)) + b"".join(
        struct.pack(">i", len(item)) + item for item in encoded
    )
    schema_bytes = json.dumps(schema_json).encode()
    header = struct.pack(">iii", 1, SCHEMA_HEADER, len(schema_bytes)) + schema_bytes
    footer = struct.pack(">i", 0)
    body = (
        struct.pack(">ii", LOG_FORMAT_VERSION, AVRO_DATA_BLOCK)
        + header
        + struct.pack(">q", len(content))
        + content
        + footer
    )
    size = len(body) + 8
    return MAGIC + struct.pack(">q", size) + body + struct.pack(">q", size + len(MAGIC))


def archive_number(path: str) -> int:
    """N of an archive log file ``.commits_.archive.<N>_<token>`` (0 if unnumbered)."""
    match = _NUMBER.match(path.rpartition("/")[2])
    return int(match.group(1)) if match else 0


def append_to_archive(
    storage: Storage, archive: ArchivedTimeline, files: Sequence[ArchivedFile]
) -> str:
    """Write ``files`` as a new archive log file; returns its path. Created if absent, so
    two archivers never write the same file (the later one takes the next number)."""
    block = log_block([entry_record(f, storage.uri) for f in files])
    number = max((archive_number(info.path) for info in archive.files()), default=0) + 1
    for attempt in range(number, number + 100):
        path = f"{archive.folder}/.commits_.archive.{attempt}_{WRITE_TOKEN}"
        if storage.create_if_absent(path, block):
            return path
    raise AlreadyExistsError(f"no free archive file name in {archive.folder}", field="archive")


def merge_small_files(
    storage: Storage, archive: ArchivedTimeline, batch_size: int, small_file_limit: int
) -> str | None:
    """Merge the newest small archive files into one when there are at least
    ``batch_size`` of them (none past the newest file over ``small_file_limit`` bytes,
    so the files stay in time order); returns the merged file's path, or None."""
    newest_first = sorted(archive.files(), key=lambda info: archive_number(info.path), reverse=True)
    candidates: list[FileInfo] = []
    for info in newest_first:
        if info.size > small_file_limit:
            break
        candidates.append(info)
    if len(candidates) < batch_size:
        return None
    candidates.reverse()
    merged = f".commits_.archive.{archive_number(newest_first[0].path) + 1}_{WRITE_TOKEN}"
    plan = {
        "version": 1,
        "candidate": [f"{storage.uri}/{info.path}" for info in candidates],
        "mergedArchiveFileName": merged,
    }
    storage.write(f"{archive.folder}/{MERGE_PLAN}", write_single_record(MERGE_PLAN_SCHEMA, plan))
    storage.write(
        f"{archive.folder}/{merged}", b"".join(storage.read(info.path) for info in candidates)
    )
    faults.exit_if_requested(MERGED_POINT)
    storage.delete_many(info.path for info in candidates)
    storage.delete(f"{archive.folder}/{MERGE_PLAN}")
    return f"{archive.folder}/{merged}"


def finish_merge(storage: Storage, archive: ArchivedTimeline) -> None:
    """Settle a merge a kill interrupted, from its plan, as Hudi's archiver does: with
    every candidate still there the merged file may be partial, so it is deleted; with
    some gone it was whole, so the rest go too. Then the plan goes."""
    plan_path = f"{archive.folder}/{MERGE_PLAN}"
    try:
        data = storage.read(plan_path)
    except NotFoundError:
        return
    try:
        plan = read_single_record(MERGE_PLAN_SCHEMA, data, "archive merge plan")
    except InvalidArgumentError:  # a plan cut short: the merge had not started
        storage.delete(plan_path)
        return
    candidates = [f"{archive.folder}/{c.rpartition('/')[2]}" for c in plan["candidate"] or []]
    merged = f"{archive.folder}/{plan['mergedArchiveFileName']}"
    if all(storage.exists(path) for path in candidates):
        storage.delete(merged)
    elif storage.exists(merged):
        storage.delete_many(candidates)
    storage.delete(plan_path)
