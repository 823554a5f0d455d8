"""Delete blocks: the keys a deltacommit deletes, as Hudi encodes them since block version 3.

The content is the version 3, an i32 length and one Avro datum of
``HoodieDeleteRecordList`` (``deleteRecordList: [{recordKey, partitionPath,
orderingVal}]``). Hudi wraps the ordering value in a record per Java type (``IntWrapper``,
``LongWrapper``, ...) so that types sharing an Avro encoding stay apart in the union; the
wrapper is kept here as the value's ``kind``. Spark SQL's DELETE writes ``IntWrapper(0)``:
Hudi's merge treats an ordering value of 0 as "delete whatever the stored record's ordering
value", and hudi-rs 0.5 deletes on it. (Hudi's master has since made ``orderingVal`` an
array of wrappers, for several ordering fields; no table version this library reads writes
that.) The header is INSTANT_TIME and, from a data writer, SCHEMA.
"""

from __future__ import annotations

import enum
import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import fastavro

from tidemark.table.logfiles.framing import CONTENT_VERSION, BlockType, HeaderKey, LogBlock
from tidemark.table.metadata.avro import NAMESPACE

__all__ = [
    "DELETE_REGARDLESS",
    "DeleteRecord",
    "OrderingKind",
    "OrderingValue",
    "delete_block",
    "deleted_records",
]

_INT = struct.Struct(">i")


class OrderingKind(enum.Enum):
    """The wrapper records of the ordering-value union, in Hudi's union order; each value is
    the record's name and the Avro type of its ``value`` field."""

    BOOLEAN = ("BooleanWrapper", "boolean")
    INT = ("IntWrapper", "int")
    LONG = ("LongWrapper", "long")
    FLOAT = ("FloatWrapper", "float")
    DOUBLE = ("DoubleWrapper", "double")
    BYTES = ("BytesWrapper", "bytes")
    STRING = ("StringWrapper", "string")
    DATE = ("DateWrapper", "int")
    """Days since the epoch."""
    DECIMAL = (
        "DecimalWrapper",
        {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
    )
    TIME_MICROS = ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"})
    TIMESTAMP_MICROS = ("TimestampMicrosWrapper", "long")
    """Microseconds since the epoch."""

    @property
    def record_name(self) -> str:
        return f"{NAMESPACE}.{self.value[0]}"


@dataclass(frozen=True)
class OrderingValue:
    kind: OrderingKind
    value: bool | int | float | bytes | str | Decimal | Any


DELETE_REGARDLESS = OrderingValue(OrderingKind.INT, 0)
"""What Spark SQL's DELETE writes: the delete wins over any stored ordering value."""


@dataclass(frozen=True)
class DeleteRecord:
    record_key: str
    partition_path: str
    ordering: OrderingValue | None = DELETE_REGARDLESS


def _delete_list_schema() -> Any:
    wrappers = [
        {
            "type": "record",
            "name": kind.value[0],
            "namespace": NAMESPACE,
            "fields": [{"name": "value", "type": kind.value[1]}],
        }
        for kind in OrderingKind
    ]
    record = {
        "type": "record",
        "name": "HoodieDeleteRecord",
        "fields": [
            {"name": "recordKey", "type": ["null", "string"], "default": None},
            {"name": "partitionPath", "type": ["null", "string"], "default": None},
            {"name": "orderingVal", "type": ["null", *wrappers], "default": None},
        ],
    }
    return fastavro.parse_schema(
        {
            "type": "record",
            "name": "HoodieDeleteRecordList",
            "namespace": NAMESPACE,
            "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": record}}],
        }
    )


_SCHEMA = _delete_list_schema()
_KINDS = {kind.record_name: kind for kind in OrderingKind}


def delete_block(
    instant: str, deletes: Iterable[DeleteRecord], schema_json: str | None = None
) -> LogBlock:
    """A delete block of ``deletes``; ``schema_json`` is the writer schema Hudi's data
    writers put in the header too."""
    records = [
        {
            "recordKey": delete.record_key,
            "partitionPath": delete.partition_path,
            "orderingVal": None
            if delete.ordering is None
            else (delete.ordering.kind.record_name, {"value": delete.ordering.value}),
        }
        for delete in deletes
    ]
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, _SCHEMA, {"deleteRecordList": records})
    datum = buffer.getvalue()
    header = {HeaderKey.INSTANT_TIME: instant}
    if schema_json is not None:
        header[HeaderKey.SCHEMA] = schema_json
    content = _INT.pack(CONTENT_VERSION) + _INT.pack(len(datum)) + datum
    return LogBlock(BlockType.DELETE, header, content)


def deleted_records(block: LogBlock) -> list[DeleteRecord]:
    block.check_type(BlockType.DELETE)
    size, datum = block.versioned_content()
    if size != len(datum):
        raise block.damaged(f"a delete list of {size} bytes in {len(datum)}")
    stream = io.BytesIO(datum)
    try:
        decoded = fastavro.schemaless_reader(stream, _SCHEMA, None, return_record_name=True)
    except (EOFError, ValueError) as error:
        raise block.damaged(f"not a HoodieDeleteRecordList: {error}") from error
    if stream.tell() != size:
        raise block.damaged(f"{size - stream.tell()} bytes after its delete list")
    records = cast(dict[str, Any], decoded)["deleteRecordList"]
    return [_delete_record(record) for record in records]


def _delete_record(record: dict[str, Any]) -> DeleteRecord:
    wrapped = record["orderingVal"]
    ordering = None if wrapped is None else OrderingValue(_KINDS[wrapped[0]], wrapped[1]["value"])
    return DeleteRecord(record["recordKey"], record["partitionPath"], ordering)
