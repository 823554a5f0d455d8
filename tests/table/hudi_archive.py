"""Test-only writer of Hudi archived-timeline log files (``.commits_.archive.<N>_<token>``),
built from Hudi's documented log format, because no archive written by Hudi itself is
available to the tests (the v6 fixtures' ``archived`` folders are empty).

Each entry is a ``HoodieArchivedMetaEntry`` as Hudi 0.14's archiver writes one: the
instant's time, action and state, and for a completed commit its commit metadata (a nested
``HoodieCommitMetadata`` record, which a reader must skip). The writer schema travels in
each block's header, with the Java-only ``avro.java.string`` properties Hudi's schemas carry
(unlike Tidemark's own archiver, whose block framing these entries share).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro

from tidemark.table.timeline.archive_writer import avro_data_block

Entry = tuple[str, str, str | None]
"""(commit time, action, state); a None state is how the oldest archives wrote entries."""

_STRING = {"type": "string", "avro.java.string": "String"}
_OPTIONAL_STRING = ["null", _STRING]
WRITE_STAT = {
    "type": "record",
    "name": "HoodieWriteStat",
    "fields": [
        {"name": name, "type": ["null", "string"], "default": None}
        for name in ("fileId", "path", "prevCommit", "partitionPath")
    ]
    + [
        {"name": name, "type": ["null", "long"], "default": None}
        for name in ("numWrites", "numInserts", "fileSizeInBytes")
    ],
}
ENTRY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieArchivedMetaEntry",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {
            "name": "hoodieCommitMetadata",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "HoodieCommitMetadata",
                    "fields": [
                        {
                            "name": "partitionToWriteStats",
                            "type": [
                                "null",
                                {
                                    "type": "map",
                                    "values": {"type": "array", "items": WRITE_STAT},
                                    "avro.java.string": "String",
                                },
                            ],
                            "default": None,
                        },
                        {
                            "name": "extraMetadata",
                            "type": [
                                "null",
                                {"type": "map", "values": _STRING, "avro.java.string": "String"},
                            ],
                            "default": None,
                        },
                        {"name": "version", "type": ["int", "null"], "default": 1},
                        {"name": "operationType", "type": _OPTIONAL_STRING, "default": None},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "commitTime", "type": _OPTIONAL_STRING, "default": None},
        {"name": "actionType", "type": _OPTIONAL_STRING, "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "actionState", "type": _OPTIONAL_STRING, "default": None},
    ],
}


def entry_record(commit_time: str, action: str, state: str | None) -> dict[str, Any]:
    metadata = None
    if action == "commit" and state in ("COMPLETED", None):
        stat = {
            "fileId": "f-0",
            "path": f"p/f-0_0-1-1_{commit_time}.parquet",
            "prevCommit": "null",
            "partitionPath": "p",
            "numWrites": 3,
            "numInserts": 3,
            "fileSizeInBytes": 4096,
        }
        metadata = {
            "partitionToWriteStats": {"p": [stat]},
            "extraMetadata": {"schema": "{}"},
            "version": 1,
            "operationType": "UPSERT",
        }
    return {
        "hoodieCommitMetadata": metadata,
        "commitTime": commit_time,
        "actionType": action,
        "version": 1,
        "actionState": state,
    }


def avro_block(entries: Sequence[Entry]) -> bytes:
    """One whole log block (magic to reverse pointer) holding ``entries``."""
    schema = fastavro.parse_schema(ENTRY_SCHEMA)
    return avro_data_block(ENTRY_SCHEMA, schema, [entry_record(*entry) for entry in entries])


def write_archive(folder: Path, number: int, *blocks: Sequence[Entry], tail: bytes = b"") -> Path:
    """``.commits_.archive.<number>_1-0-1`` in ``folder``: one block per ``blocks`` item,
    then ``tail`` (e.g. the start of a block a crash cut short)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f".commits_.archive.{number}_1-0-1"
    path.write_bytes(b"".join(avro_block(entries) for entries in blocks) + tail)
    return path


def archived_commit(commit_time: str) -> list[Entry]:
    """The three entries Hudi's archiver writes for one completed commit."""
    return [(commit_time, "commit", state) for state in ("REQUESTED", "INFLIGHT", "COMPLETED")]
