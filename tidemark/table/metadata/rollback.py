"""Rollback timeline metadata in Hudi's Avro form.

Hudi 0.14 stores a rollback's plan (``<ts>.rollback.requested``, HoodieRollbackPlan) and
its result (``<ts>.rollback``, HoodieRollbackMetadata) as Avro object container files
holding one record (TimelineMetadataUtils.serializeAvroMetadata), unlike commits, which
are JSON. Hudi tools (timeline server, cleaner, CLI) decode them with these schemas,
transcribed from hudi-common's ``HoodieRollbackPlan.avsc``, ``HoodieRollbackMetadata.avsc``
and ``HoodieInstantInfo.avsc`` (the nested record declared inline, as hudi-rs does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
from fastavro.types import Schema

from tidemark.table.metadata.avro import (
    METADATA_VERSION,
    NAMESPACE,
    STRINGS,
    VERSION_FIELD,
    read_single_record,
    write_single_record,
)

_OPTIONAL_SIZES = ["null", {"type": "map", "values": "long"}]
_INSTANT_INFO = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "commitTime", "type": "string"},
        {"name": "action", "type": "string"},
    ],
}

ROLLBACK_PLAN_SCHEMA: Schema = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieRollbackPlan",
        "namespace": NAMESPACE,
        "fields": [
            {"name": "instantToRollback", "type": ["null", _INSTANT_INFO], "default": None},
            {
                "name": "RollbackRequests",
                "type": [
                    "null",
                    {
                        "type": "array",
                        "items": {
                            "type": "record",
                            "name": "HoodieRollbackRequest",
                            "fields": [
                                {"name": "partitionPath", "type": "string"},
                                {"name": "fileId", "type": ["null", "string"], "default": None},
                                {
                                    "name": "latestBaseInstant",
                                    "type": ["null", "string"],
                                    "default": None,
                                },
                                {"name": "filesToBeDeleted", "type": STRINGS, "default": []},
                                {
                                    "name": "logBlocksToBeDeleted",
                                    "type": _OPTIONAL_SIZES,
                                    "default": None,
                                },
                            ],
                        },
                    },
                ],
                "default": None,
            },
            VERSION_FIELD,
        ],
    }
)

ROLLBACK_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": NAMESPACE,
    "fields": [
        {"name": "startRollbackTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": STRINGS},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": "string"},
                        {"name": "successDeleteFiles", "type": STRINGS},
                        {"name": "failedDeleteFiles", "type": STRINGS},
                        {"name": "rollbackLogFiles", "type": _OPTIONAL_SIZES, "default": None},
                        {
                            "name": "logFilesFromFailedCommit",
                            "type": _OPTIONAL_SIZES,
                            "default": None,
                        },
                    ],
                },
            },
        },
        VERSION_FIELD,
        {
            "name": "instantsRollback",
            "type": {"type": "array", "items": _INSTANT_INFO},
            "default": [],
        },
    ],
}
ROLLBACK_METADATA_SCHEMA: Schema = fastavro.parse_schema(ROLLBACK_METADATA)


@dataclass(frozen=True)
class InstantInfo:
    commit_time: str
    action: str

    def to_avro(self) -> dict[str, str]:
        return {"commitTime": self.commit_time, "action": self.action}


@dataclass(frozen=True)
class RollbackRequest:
    """One HoodieRollbackRequest: files of a partition to delete, or (merge-on-read,
    version 6) a file slice (``file_id``, ``latest_base_instant``) whose failed log files
    (full path to size; -1 for one its marker names that is not published yet, Hudi's
    marker-based stub) a rollback command block undoes."""

    partition_path: str
    files_to_be_deleted: Sequence[str] = ()
    file_id: str | None = None
    latest_base_instant: str | None = None
    log_blocks_to_be_deleted: Mapping[str, int] | None = None

    def to_avro(self) -> dict[str, Any]:
        return {
            "partitionPath": self.partition_path,
            "fileId": self.file_id,
            "latestBaseInstant": self.latest_base_instant,
            "filesToBeDeleted": list(self.files_to_be_deleted),
            "logBlocksToBeDeleted": (
                None
                if self.log_blocks_to_be_deleted is None
                else dict(self.log_blocks_to_be_deleted)
            ),
        }


@dataclass(frozen=True)
class RollbackPlan:
    """What a requested rollback will do: its requests (files by full path)."""

    instant_to_rollback: InstantInfo
    requests: Sequence[RollbackRequest]

    def to_avro(self) -> bytes:
        record = {
            "instantToRollback": self.instant_to_rollback.to_avro(),
            "RollbackRequests": [request.to_avro() for request in self.requests],
            "version": METADATA_VERSION,
        }
        return write_single_record(ROLLBACK_PLAN_SCHEMA, record)


@dataclass(frozen=True)
class RollbackMetadata:
    """A completed rollback: the instants undone and the files deleted (full paths) by
    partition; on a merge-on-read table of version 6, by partition, the log files its
    rollback command blocks went to (``rollback_log_files``) and the failed log files they
    undo (``failed_commit_log_files``), full path to size. No delete fails (a failed
    delete raises), so ``failedDeleteFiles`` stays empty."""

    start_rollback_time: str
    time_taken_ms: int
    instants_rollback: Sequence[InstantInfo]
    deleted_by_partition: Mapping[str, Sequence[str]]
    rollback_log_files: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    failed_commit_log_files: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def total_files_deleted(self) -> int:
        return sum(len(files) for files in self.deleted_by_partition.values())

    def to_avro(self) -> bytes:
        return write_single_record(ROLLBACK_METADATA_SCHEMA, self.to_record())

    def to_record(self) -> dict[str, Any]:
        """The HoodieRollbackMetadata record (also embedded in archived entries)."""
        return {
            "startRollbackTime": self.start_rollback_time,
            "timeTakenInMillis": self.time_taken_ms,
            "totalFilesDeleted": self.total_files_deleted,
            "commitsRollback": [info.commit_time for info in self.instants_rollback],
            "partitionMetadata": {
                partition: {
                    "partitionPath": partition,
                    "successDeleteFiles": list(files),
                    "failedDeleteFiles": [],
                    "rollbackLogFiles": dict(self.rollback_log_files.get(partition, {})),
                    "logFilesFromFailedCommit": dict(
                        self.failed_commit_log_files.get(partition, {})
                    ),
                }
                for partition, files in self.deleted_by_partition.items()
            },
            "version": METADATA_VERSION,
            "instantsRollback": [info.to_avro() for info in self.instants_rollback],
        }

    @classmethod
    def from_avro(cls, data: bytes) -> RollbackMetadata:
        """Decode a ``.rollback`` file (ours or Hudi's); InvalidArgumentError(field=
        "metadata") when it is not one HoodieRollbackMetadata record."""
        record = read_single_record(ROLLBACK_METADATA_SCHEMA, data)
        return cls(
            start_rollback_time=record["startRollbackTime"],
            time_taken_ms=record["timeTakenInMillis"],
            instants_rollback=[
                InstantInfo(info["commitTime"], info["action"])
                for info in record["instantsRollback"]
            ],
            deleted_by_partition={
                partition: metadata["successDeleteFiles"]
                for partition, metadata in record["partitionMetadata"].items()
            },
            rollback_log_files=_sizes(record, "rollbackLogFiles"),
            failed_commit_log_files=_sizes(record, "logFilesFromFailedCommit"),
        )


def _sizes(record: Mapping[str, Any], name: str) -> dict[str, dict[str, int]]:
    """A per-partition map of file sizes, the partitions without one left out."""
    return {
        partition: dict(metadata[name])
        for partition, metadata in record["partitionMetadata"].items()
        if metadata.get(name)
    }
