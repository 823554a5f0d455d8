"""Clean timeline metadata in Hudi's Avro form.

Hudi 0.14 stores a clean's plan (``<ts>.clean.requested``, also copied to
``<ts>.clean.inflight``) as one ``HoodieCleanerPlan`` record and its result (``<ts>.clean``)
as one ``HoodieCleanMetadata`` record, each an Avro object container file, like the
rollback metadata (``avro_metadata``). The schemas are transcribed from hudi-common's
``HoodieCleanerPlan.avsc``, ``HoodieCleanMetadata.avsc`` and
``HoodieCleanPartitionMetadata.avsc`` (nested records declared inline), so Hudi's cleaner,
archiver and CLI, and hudi-rs, decode what Tidemark writes.

``earliestCommitToRetain`` is the oldest instant whose snapshot the clean left whole: for
KEEP_LATEST_COMMITS and KEEP_LATEST_BY_HOURS exactly Hudi's value; for
KEEP_LATEST_FILE_VERSIONS (where Hudi leaves it empty) the oldest instant no deleted file
was visible at, so readers can refuse an older ``as_of`` for every policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import fastavro
from fastavro.types import Schema

from tidemark.table.metadata.avro import (
    NAMESPACE,
    STRINGS,
    VERSION_FIELD,
    read_single_record,
    write_single_record,
)

CLEAN_VERSION = 2
"""Hudi's clean plan and metadata version 2: files named by full path."""
ACTION_INSTANT = {
    "type": "record",
    "name": "HoodieActionInstant",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "timestamp", "type": "string"},
        {"name": "action", "type": "string"},
        {"name": "state", "type": "string"},
    ],
}
CLEANER_PLAN: dict[str, object] = {
    "type": "record",
    "name": "HoodieCleanerPlan",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "earliestInstantToRetain", "type": ["null", ACTION_INSTANT], "default": None},
        {"name": "policy", "type": "string"},
        {
            "name": "filesToBeDeletedPerPartition",
            "type": ["null", {"type": "map", "values": STRINGS}],
            "default": None,
        },
        VERSION_FIELD,
        {
            "name": "filePathsToBeDeletedPerPartition",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": "HoodieCleanFileInfo",
                            "fields": [
                                {"name": "filePath", "type": ["null", "string"], "default": None},
                                {
                                    "name": "isBootstrapBaseFile",
                                    "type": ["null", "boolean"],
                                    "default": None,
                                },
                            ],
                        },
                    },
                },
            ],
            "default": None,
        },
        {"name": "partitionsToBeDeleted", "type": ["null", STRINGS], "default": None},
    ],
}
_PARTITION_METADATA = {
    "type": "record",
    "name": "HoodieCleanPartitionMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "partitionPath", "type": "string"},
        {"name": "policy", "type": "string"},
        {"name": "deletePathPatterns", "type": STRINGS},
        {"name": "successDeleteFiles", "type": STRINGS},
        {"name": "failedDeleteFiles", "type": STRINGS},
        {"name": "isPartitionDeleted", "type": ["null", "boolean"], "default": None},
    ],
}
CLEAN_METADATA: dict[str, object] = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "policy", "type": "string", "default": ""},
        {"name": "startCleanTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": "string"},
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _PARTITION_METADATA}},
        VERSION_FIELD,
        {
            "name": "bootstrapPartitionMetadata",
            "type": ["null", {"type": "map", "values": "HoodieCleanPartitionMetadata"}],
            "default": None,
        },
    ],
}
CLEANER_PLAN_SCHEMA: Schema = fastavro.parse_schema(CLEANER_PLAN)
CLEAN_METADATA_SCHEMA: Schema = fastavro.parse_schema(CLEAN_METADATA)


@dataclass(frozen=True)
class RetainedInstant:
    """``HoodieActionInstant``: the earliest instant a clean keeps every snapshot from."""

    timestamp: str
    action: str
    state: str = "COMPLETED"


@dataclass(frozen=True)
class CleanPlan:
    """What a requested clean deletes: table-relative file paths by partition (stored as
    full paths under ``base_uri``, as Hudi's planner does)."""

    policy: str
    earliest_to_retain: RetainedInstant | None
    files_by_partition: Mapping[str, Sequence[str]]
    last_completed_commit: str = ""

    @property
    def file_count(self) -> int:
        return sum(len(files) for files in self.files_by_partition.values())

    def to_avro(self, base_uri: str) -> bytes:
        return write_single_record(CLEANER_PLAN_SCHEMA, self.to_record(base_uri))

    def to_record(self, base_uri: str) -> dict[str, object]:
        """The HoodieCleanerPlan record (also embedded in archived entries)."""
        retain = self.earliest_to_retain
        return {
            "earliestInstantToRetain": None
            if retain is None
            else {"timestamp": retain.timestamp, "action": retain.action, "state": retain.state},
            "policy": self.policy,
            "filesToBeDeletedPerPartition": None,
            "version": CLEAN_VERSION,
            "filePathsToBeDeletedPerPartition": {
                partition: [
                    {"filePath": _full(base_uri, path), "isBootstrapBaseFile": False}
                    for path in files
                ]
                for partition, files in self.files_by_partition.items()
            },
            "partitionsToBeDeleted": [],
        }

    @classmethod
    def from_avro(cls, data: bytes) -> CleanPlan:
        """Decode a ``.clean.requested`` file (ours or Hudi's): paths back to table-relative
        ones (partition + file name, whatever base spelling the writer used)."""
        record = read_single_record(CLEANER_PLAN_SCHEMA, data, "cleaner plan")
        retain = record["earliestInstantToRetain"]
        files: dict[str, list[str]] = {}
        for partition, infos in (record["filePathsToBeDeletedPerPartition"] or {}).items():
            files[partition] = [_relative(partition, i["filePath"]) for i in infos if i["filePath"]]
        for partition, names in (record["filesToBeDeletedPerPartition"] or {}).items():
            files.setdefault(partition, []).extend(_relative(partition, n) for n in names)
        return cls(
            policy=record["policy"],
            earliest_to_retain=None if retain is None else RetainedInstant(**retain),
            files_by_partition=files,
        )


@dataclass(frozen=True)
class CleanMetadata:
    """A completed clean: what it deleted (table-relative paths) by partition."""

    policy: str
    start_clean_time: str
    time_taken_ms: int
    earliest_commit_to_retain: str
    last_completed_commit: str
    deleted_by_partition: Mapping[str, Sequence[str]]

    @property
    def total_files_deleted(self) -> int:
        return sum(len(files) for files in self.deleted_by_partition.values())

    def to_record(self, base_uri: str) -> dict[str, object]:
        """The HoodieCleanMetadata record (also embedded in archived entries)."""
        return {
            "policy": self.policy,
            "startCleanTime": self.start_clean_time,
            "timeTakenInMillis": self.time_taken_ms,
            "totalFilesDeleted": self.total_files_deleted,
            "earliestCommitToRetain": self.earliest_commit_to_retain,
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "partitionMetadata": {
                partition: {
                    "partitionPath": partition,
                    "policy": self.policy,
                    "deletePathPatterns": [path.rpartition("/")[2] for path in files],
                    "successDeleteFiles": [_full(base_uri, path) for path in files],
                    "failedDeleteFiles": [],
                    "isPartitionDeleted": False,
                }
                for partition, files in self.deleted_by_partition.items()
            },
            "version": CLEAN_VERSION,
            "bootstrapPartitionMetadata": {},
        }

    def to_avro(self, base_uri: str) -> bytes:
        return write_single_record(CLEAN_METADATA_SCHEMA, self.to_record(base_uri))

    @classmethod
    def from_avro(cls, data: bytes) -> CleanMetadata:
        record = read_single_record(CLEAN_METADATA_SCHEMA, data, "clean metadata")
        return cls(
            policy=record["policy"],
            start_clean_time=record["startCleanTime"],
            time_taken_ms=record["timeTakenInMillis"],
            earliest_commit_to_retain=record["earliestCommitToRetain"],
            last_completed_commit=record["lastCompletedCommitTimestamp"],
            deleted_by_partition={
                partition: [_relative(partition, path) for path in meta["successDeleteFiles"]]
                for partition, meta in record["partitionMetadata"].items()
            },
        )


def _full(base_uri: str, path: str) -> str:
    return f"{base_uri.rstrip('/')}/{path}"


def _relative(partition: str, path: str) -> str:
    name = path.rpartition("/")[2]
    return f"{partition}/{name}" if partition else name
