"""Commit metadata in Avro, as Hudi 1.x (table versions 8 and 9) writes it for every action,
read and written.

From table version 8 on, the completed ``commit`` and ``replacecommit`` files (and the
inflight ones) are Avro object container files holding one ``HoodieCommitMetadata`` or
``HoodieReplaceCommitMetadata`` record (``hudi-common/src/main/avro``), not JSON. The field
names are the JSON ones, so the record maps onto ``CommitMetadata`` field by field; the
file carries its writer schema, which is all a reader needs.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
from fastavro.types import Schema

from tidemark.errors import InvalidArgumentError
from tidemark.table.metadata.actions import REPLACE_COMMIT
from tidemark.table.metadata.avro import NAMESPACE, write_single_record
from tidemark.table.metadata.commit import CommitMetadata


def commit_metadata_from_avro(payload: bytes) -> CommitMetadata:
    """Parse; an empty payload is an empty commit (a requested commit's file), as in Hudi."""
    if not payload:
        return CommitMetadata(partition_to_write_stats={}, operation_type="UNKNOWN")
    try:
        records = list(fastavro.reader(io.BytesIO(payload)))
    except (ValueError, EOFError, TypeError) as error:
        raise InvalidArgumentError(
            f"commit metadata is not an Avro container file: {error}", field="metadata"
        ) from error
    if len(records) != 1 or not isinstance(records[0], dict):
        raise InvalidArgumentError(
            f"commit metadata holds {len(records)} Avro records, expected one", field="metadata"
        )
    return CommitMetadata.from_dict(records[0])


def _optional(kind: Any) -> dict[str, Any]:
    return {"type": ["null", kind], "default": None}


_WRITE_STAT = {
    "type": "record",
    "name": "HoodieWriteStat",
    "namespace": NAMESPACE,
    "fields": [
        {"name": name, **_optional(kind)}
        for name, kind in (
            ("fileId", "string"),
            ("path", "string"),
            ("prevCommit", "string"),
            ("numWrites", "long"),
            ("numDeletes", "long"),
            ("numUpdateWrites", "long"),
            ("totalWriteBytes", "long"),
            ("totalWriteErrors", "long"),
            ("partitionPath", "string"),
            ("numInserts", "long"),
            ("fileSizeInBytes", "long"),
            ("logVersion", "int"),
            ("logOffset", "long"),
            ("baseFile", "string"),
            ("logFiles", {"type": "array", "items": "string"}),
        )
    ],
}
_COMMIT_FIELDS: list[dict[str, Any]] = [
    {
        "name": "partitionToWriteStats",
        **_optional({"type": "map", "values": {"type": "array", "items": _WRITE_STAT}}),
    },
    {"name": "compacted", **_optional("boolean")},
    {"name": "extraMetadata", **_optional({"type": "map", "values": "string"})},
    {"name": "version", "type": ["int", "null"], "default": 1},
    {"name": "operationType", **_optional("string")},
]
COMMIT_SCHEMA: Schema = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieCommitMetadata",
        "namespace": NAMESPACE,
        "fields": _COMMIT_FIELDS,
    }
)
REPLACE_COMMIT_SCHEMA: Schema = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieReplaceCommitMetadata",
        "namespace": NAMESPACE,
        "fields": [
            *_COMMIT_FIELDS,
            {
                "name": "partitionToReplaceFileIds",
                **_optional({"type": "map", "values": {"type": "array", "items": "string"}}),
            },
        ],
    }
)
"""``HoodieCommitMetadata.avsc`` / ``HoodieReplaceCommitMetadata.avsc`` with the fields
Tidemark fills (every other field of Hudi's schemas is optional with a default, so Hudi's
reader resolves this schema to its own)."""


def commit_metadata_to_avro(metadata: CommitMetadata, action: str) -> bytes:
    """The completed ``commit``, ``deltacommit`` or ``replacecommit`` file of table
    versions 8 and 9."""
    record: dict[str, Any] = {
        "partitionToWriteStats": {
            partition: [
                {
                    "fileId": stat.file_id,
                    "path": stat.path,
                    "prevCommit": stat.prev_commit,
                    "numWrites": stat.num_writes,
                    "numDeletes": stat.num_deletes,
                    "numUpdateWrites": stat.num_update_writes,
                    "totalWriteBytes": stat.total_write_bytes,
                    "totalWriteErrors": 0,
                    "partitionPath": stat.partition_path,
                    "numInserts": stat.num_inserts,
                    "fileSizeInBytes": stat.file_size_in_bytes,
                    **stat.delta_fields(),
                }
                for stat in stats
            ]
            for partition, stats in metadata.partition_to_write_stats.items()
        },
        "compacted": metadata.is_compaction,
        "extraMetadata": dict(metadata.extra_metadata),
        "version": 1,
        "operationType": metadata.operation_type,
    }
    if action == REPLACE_COMMIT:
        record["partitionToReplaceFileIds"] = {
            partition: list(file_ids)
            for partition, file_ids in metadata.partition_to_replace_file_ids.items()
        }
        return write_single_record(REPLACE_COMMIT_SCHEMA, record)
    return write_single_record(COMMIT_SCHEMA, record)
