"""HoodieCommitMetadata / HoodieReplaceCommitMetadata JSON, as Hudi 0.14 writes it.

Field names and the set of fields follow the completed ``.commit``/``.replacecommit`` files
Hudi writes, so Hudi (Jackson) and hudi-rs both parse what we write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tidemark.errors import InvalidArgumentError

NULL_COMMIT = "null"
COMPACT_OPERATION = "COMPACT"
"""``WriteOperationType.COMPACT``: a compaction's commit (Hudi sets ``compacted`` on it)."""


@dataclass(frozen=True)
class WriteStat:
    """What one task wrote into one base file or, on a merge-on-read table, appended to one
    file slice's log (HoodieWriteStat; the log fields are HoodieDeltaWriteStat's, None for a
    base file)."""

    file_id: str
    path: str
    prev_commit: str
    num_writes: int
    num_deletes: int
    num_update_writes: int
    num_inserts: int
    total_write_bytes: int
    file_size_in_bytes: int
    partition_path: str
    min_record_key: str | None = None
    max_record_key: str | None = None
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    """The name of the slice's base file ("" for a slice of logs only)."""
    log_files: tuple[str, ...] | None = None
    """Names of the slice's log files the write appended to."""

    @property
    def is_delta(self) -> bool:
        return self.log_version is not None

    def delta_fields(self) -> dict[str, Any]:
        """HoodieDeltaWriteStat's fields, under Hudi's names (none for a base file)."""
        if not self.is_delta:
            return {}
        return {
            "logVersion": self.log_version,
            "logOffset": self.log_offset,
            "baseFile": self.base_file,
            "logFiles": list(self.log_files or ()),
        }

    def to_json_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "fileId": self.file_id,
            "path": self.path,
            "cdcStats": None,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": 0,
            "tempPath": None,
            "partitionPath": self.partition_path,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size_in_bytes,
            "minEventTime": None,
            "maxEventTime": None,
            "runtimeStats": None,
        }
        if self.min_record_key is not None:
            data["minRecordKey"] = self.min_record_key
        if self.max_record_key is not None:
            data["maxRecordKey"] = self.max_record_key
        return data | self.delta_fields()

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> WriteStat:
        return cls(
            file_id=data.get("fileId") or "",
            path=data.get("path") or "",
            prev_commit=data.get("prevCommit") or NULL_COMMIT,
            num_writes=int(data.get("numWrites") or 0),
            num_deletes=int(data.get("numDeletes") or 0),
            num_update_writes=int(data.get("numUpdateWrites") or 0),
            num_inserts=int(data.get("numInserts") or 0),
            total_write_bytes=int(data.get("totalWriteBytes") or 0),
            file_size_in_bytes=int(data.get("fileSizeInBytes") or 0),
            partition_path=data.get("partitionPath") or "",
            min_record_key=data.get("minRecordKey"),
            max_record_key=data.get("maxRecordKey"),
            log_version=data.get("logVersion"),
            log_offset=data.get("logOffset"),
            base_file=data.get("baseFile"),
            log_files=tuple(data["logFiles"]) if data.get("logFiles") is not None else None,
        )


@dataclass(frozen=True)
class CommitMetadata:
    """A commit's write stats per partition; replacecommits also list replaced file groups.

    An immutable value, as the completed instant it describes: the mappings are read-only
    views over tuples, whatever the caller passed."""

    partition_to_write_stats: Mapping[str, Sequence[WriteStat]]
    operation_type: str
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    partition_to_replace_file_ids: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        frozen = {
            "partition_to_write_stats": _frozen(self.partition_to_write_stats, tuple),
            "extra_metadata": MappingProxyType(dict(self.extra_metadata)),
            "partition_to_replace_file_ids": _frozen(self.partition_to_replace_file_ids, tuple),
        }
        for name, value in frozen.items():
            object.__setattr__(self, name, value)

    @property
    def write_stats(self) -> list[WriteStat]:
        return [stat for stats in self.partition_to_write_stats.values() for stat in stats]

    @classmethod
    def from_write_stats(
        cls,
        write_stats: list[WriteStat],
        operation_type: str,
        schema: str,
        partition_to_replace_file_ids: Mapping[str, Sequence[str]] | None = None,
        extra_metadata: Mapping[str, str] | None = None,
    ) -> CommitMetadata:
        """Group flat stats (as collected from executors) by partition; ``schema`` and
        ``extra_metadata`` become the commit's extraMetadata."""
        by_partition: dict[str, list[WriteStat]] = {}
        for stat in write_stats:
            by_partition.setdefault(stat.partition_path, []).append(stat)
        return cls(
            partition_to_write_stats=by_partition,
            operation_type=operation_type,
            extra_metadata={"schema": schema, **(extra_metadata or {})},
            partition_to_replace_file_ids=partition_to_replace_file_ids or {},
        )

    def touched_file_groups(self) -> set[tuple[str, str]]:
        """(partition, file id) of every file group the write wrote or replaced."""
        written = {(stat.partition_path, stat.file_id) for stat in self.write_stats}
        replaced = {
            (partition, file_id)
            for partition, file_ids in self.partition_to_replace_file_ids.items()
            for file_id in file_ids
        }
        return written | replaced

    @property
    def is_compaction(self) -> bool:
        return self.operation_type == COMPACT_OPERATION

    def to_json(self) -> bytes:
        data: dict[str, Any] = {
            "partitionToWriteStats": {
                partition: [stat.to_json_dict() for stat in stats]
                for partition, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.is_compaction,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids:
            data["partitionToReplaceFileIds"] = {
                partition: list(file_ids)
                for partition, file_ids in self.partition_to_replace_file_ids.items()
            }
        return json.dumps(data, indent=2, separators=(",", " : ")).encode()

    @classmethod
    def from_json(cls, payload: bytes) -> CommitMetadata:
        """Parse; an empty payload is an empty commit, as in Hudi."""
        if not payload.strip():
            return cls(partition_to_write_stats={}, operation_type="UNKNOWN")
        try:
            data = json.loads(payload)
        except ValueError as error:
            raise InvalidArgumentError(
                f"commit metadata is not JSON: {error}", field="metadata"
            ) from error
        if not isinstance(data, dict):
            raise InvalidArgumentError("commit metadata is not a JSON object", field="metadata")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommitMetadata:
        """From Hudi's field names, which its JSON and its Avro records share."""
        return cls(
            partition_to_write_stats={
                partition: [WriteStat.from_json_dict(stat) for stat in stats or []]
                for partition, stats in (data.get("partitionToWriteStats") or {}).items()
            },
            operation_type=data.get("operationType") or "UNKNOWN",
            extra_metadata=dict(data.get("extraMetadata") or {}),
            partition_to_replace_file_ids={
                partition: list(file_ids or [])
                for partition, file_ids in (data.get("partitionToReplaceFileIds") or {}).items()
            },
        )


def _frozen(mapping: Mapping[str, Iterable[Any]], kind: type[tuple[Any, ...]]) -> Mapping[str, Any]:
    return MappingProxyType({key: kind(values) for key, values in mapping.items()})
