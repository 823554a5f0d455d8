"""Rollback instants are Avro container files in Hudi's schemas; hudi-rs still reads
the table. The schemas below are an independent transcription of hudi-common's
HoodieRollbackPlan.avsc / HoodieRollbackMetadata.avsc (HoodieInstantInfo inline)."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest
from fastavro.schema import to_parsing_canonical_form

from table.table_testkit import Writer, hudi_rs_rows, people_config, rows, sorted_rows
from tidemark.errors import InvalidArgumentError
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.metadata.actions import COMMIT, ROLLBACK
from tidemark.table.metadata.rollback import (
    ROLLBACK_METADATA_SCHEMA,
    ROLLBACK_PLAN_SCHEMA,
    RollbackMetadata,
)
from tidemark.table.timeline.instant import Instant, State
from tidemark.table.writes.commit import rollback
from tidemark.table.writes.markers import StorageMarkerReader

STRINGS = {"type": "array", "items": "string"}
SIZES = ["null", {"type": "map", "values": "long"}]
INSTANT_INFO = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "fields": [{"name": "commitTime", "type": "string"}, {"name": "action", "type": "string"}],
}
VERSION = {"name": "version", "type": ["int", "null"], "default": 1}
HUDI_ROLLBACK_METADATA = {
    "namespace": "org.apache.hudi.avro.model",
    "type": "record",
    "name": "HoodieRollbackMetadata",
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
                        {"name": "rollbackLogFiles", "type": SIZES, "default": None},
                        {"name": "logFilesFromFailedCommit", "type": SIZES, "default": None},
                    ],
                },
            },
        },
        VERSION,
        {
            "name": "instantsRollback",
            "default": [],
            "type": {"type": "array", "items": INSTANT_INFO},
        },
    ],
}
HUDI_ROLLBACK_PLAN = {
    "namespace": "org.apache.hudi.avro.model",
    "type": "record",
    "name": "HoodieRollbackPlan",
    "fields": [
        {"name": "instantToRollback", "type": ["null", INSTANT_INFO], "default": None},
        {
            "name": "RollbackRequests",
            "default": None,
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
                            {"name": "filesToBeDeleted", "default": [], "type": STRINGS},
                            {"name": "logBlocksToBeDeleted", "type": SIZES, "default": None},
                        ],
                    },
                },
            ],
        },
        VERSION,
    ],
}


def _decode(data: bytes, hudi_schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The single record resolved against Hudi's schema, and the file's writer schema."""
    reader = fastavro.reader(io.BytesIO(data), reader_schema=fastavro.parse_schema(hudi_schema))
    records = list(reader)
    assert len(records) == 1
    assert isinstance(records[0], dict) and isinstance(reader.writer_schema, dict)
    return records[0], reader.writer_schema


def _roll_back_a_failed_write(writer: Writer) -> tuple[str, list[str], str]:
    """After one commit, write and roll back a failed instant: (failed instant, its
    deleted files, the rollback instant)."""
    writer.commit(rows((1, "ann", "eu", 1.0), (2, "bob", "us", 2.0)))
    failed = writer.begin()
    stats = writer.write_files(failed, rows((1, "ann", "eu", 9.0), (3, "cid", "asia", 3.0)))
    result = rollback(writer.table, failed, StorageMarkerReader(writer.table.storage))
    assert sorted(result.deleted_files) == sorted(s.path for s in stats)
    return failed, result.deleted_files, result.rollback_instant


def test_our_schemas_are_hudis() -> None:
    assert to_parsing_canonical_form(ROLLBACK_METADATA_SCHEMA) == to_parsing_canonical_form(
        fastavro.parse_schema(HUDI_ROLLBACK_METADATA)
    )
    assert to_parsing_canonical_form(ROLLBACK_PLAN_SCHEMA) == to_parsing_canonical_form(
        fastavro.parse_schema(HUDI_ROLLBACK_PLAN)
    )


def test_rollback_instant_files_decode_with_hudis_schemas(any_table_uri: str) -> None:
    writer = Writer(HoodieTable.create(any_table_uri, people_config()))
    failed, deleted, rollback_time = _roll_back_a_failed_write(writer)
    storage = writer.table.storage
    base = writer.table.uri.rstrip("/")
    expected_files = {path.rpartition("/")[0]: [f"{base}/{path}"] for path in sorted(deleted)}

    completed = storage.read(Instant(rollback_time, ROLLBACK, State.COMPLETED).path)
    metadata, writer_schema = _decode(completed, HUDI_ROLLBACK_METADATA)
    assert writer_schema["name"] == "org.apache.hudi.avro.model.HoodieRollbackMetadata"
    assert metadata["startRollbackTime"] == rollback_time
    assert metadata["commitsRollback"] == [failed]
    assert metadata["instantsRollback"] == [{"commitTime": failed, "action": COMMIT}]
    assert metadata["totalFilesDeleted"] == len(deleted) == 2
    assert metadata["version"] == 1
    assert {
        partition: part["successDeleteFiles"]
        for partition, part in metadata["partitionMetadata"].items()
    } == expected_files
    assert all(
        part["failedDeleteFiles"] == [] and part["partitionPath"] == partition
        for partition, part in metadata["partitionMetadata"].items()
    )

    requested = storage.read(Instant(rollback_time, ROLLBACK, State.REQUESTED).path)
    plan, _ = _decode(requested, HUDI_ROLLBACK_PLAN)
    assert plan["instantToRollback"] == {"commitTime": failed, "action": COMMIT}
    assert {
        request["partitionPath"]: request["filesToBeDeleted"]
        for request in plan["RollbackRequests"]
    } == expected_files
    assert storage.read(Instant(rollback_time, ROLLBACK, State.INFLIGHT).path) == b""

    parsed = RollbackMetadata.from_avro(completed)
    assert parsed.deleted_by_partition == expected_files
    assert parsed.total_files_deleted == 2


def test_hudi_rs_reads_a_table_holding_avro_rollback_instants(people: Writer) -> None:
    _roll_back_a_failed_write(people)
    uri = people.table.uri
    assert [row["id"] for row in hudi_rs_rows(uri)] == [1, 2]
    people.commit(rows((4, "dan", "us", 4.0)))
    assert hudi_rs_rows(uri) == sorted_rows(read_snapshot(HoodieTable.open(uri)))
    assert [row["id"] for row in hudi_rs_rows(uri)] == [1, 2, 4]


@pytest.mark.parametrize("data", [b"", b'{"commitsRollback": []}'])
def test_non_avro_rollback_metadata_is_rejected(data: bytes) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        RollbackMetadata.from_avro(data)
    assert raised.value.field == "metadata"
