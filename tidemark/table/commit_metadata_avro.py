"""Commit metadata in Avro, as Hudi 1.x (table versions 8 and 9) writes it for every action.

From table version 8 on, the completed ``commit`` and ``replacecommit`` files (and the
inflight ones) are Avro object container files holding one ``HoodieCommitMetadata`` or
``HoodieReplaceCommitMetadata`` record (``hudi-common/src/main/avro``), not JSON. The field
names are the JSON ones, so the record maps onto ``CommitMetadata`` field by field; the
file carries its writer schema, which is all a reader needs.
"""

from __future__ import annotations

import io

import fastavro

from tidemark.errors import InvalidArgumentError
from tidemark.table.commit_metadata import CommitMetadata


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
