"""What Hudi's Avro timeline metadata shares: the namespace, the version field, and the
one-record container files (TimelineMetadataUtils.serializeAvroMetadata) every Avro plan and
metadata file is."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.types import Schema

from tidemark.errors import InvalidArgumentError

__all__ = [
    "METADATA_VERSION",
    "NAMESPACE",
    "STRINGS",
    "VERSION_FIELD",
    "read_single_record",
    "write_single_record",
]

NAMESPACE = "org.apache.hudi.avro.model"
METADATA_VERSION = 1
"""Hudi's current version of both the plan and the metadata (``version`` field)."""
STRINGS = {"type": "array", "items": "string"}
VERSION_FIELD = {"name": "version", "type": ["int", "null"], "default": METADATA_VERSION}


def write_single_record(schema: Schema, record: Mapping[str, Any]) -> bytes:
    """An Avro container file (null codec) holding ``record``, as Hudi writes one."""
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema, [record], validator=True)
    return buffer.getvalue()


def read_single_record(
    schema: Schema, data: bytes, what: str = "rollback metadata"
) -> dict[str, Any]:
    """The one record of an Avro container file, resolved against ``schema``;
    InvalidArgumentError(field="metadata") naming ``what`` it is not."""
    try:
        records = list(fastavro.reader(io.BytesIO(data), reader_schema=schema))
    except (ValueError, EOFError, SchemaResolutionError) as error:
        raise InvalidArgumentError(f"not Avro {what}: {error}", field="metadata") from error
    if len(records) != 1 or not isinstance(records[0], dict):
        raise InvalidArgumentError(
            f"expected one Avro record, found {len(records)}", field="metadata"
        )
    return records[0]
