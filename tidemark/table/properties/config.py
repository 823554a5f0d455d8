"""``.hoodie/hoodie.properties``: the table configuration every Hudi reader starts from.

Written in Java properties syntax with the keys and escaping Hudi 0.14 uses, including
``hoodie.table.checksum`` (CRC32 of ``<database>.<table>``, as HoodieTableConfig does) so
Hudi's own validation accepts the file.
"""

from __future__ import annotations

import argparse
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.properties.support import (
    COPY_ON_WRITE,
    DEFAULT_RECORD_PAYLOAD,
    MERGE_ON_READ,
    OVERWRITE_WITH_LATEST_PAYLOAD,
    PAYLOAD_CLASS_KEY,
    TABLE_TYPE_KEY,
    check_properties,
)
from tidemark.table.timeline.versions import READ_VERSIONS, table_version

PROPERTIES_PATH = ".hoodie/hoodie.properties"
CHECKSUM_KEY = "hoodie.table.checksum"
TABLE_VERSION = "6"
TIMELINE_LAYOUT_VERSION = "1"
DATABASE_NAME = "default"

SIMPLE_KEY_GENERATOR = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEY_GENERATOR = "org.apache.hudi.keygen.ComplexKeyGenerator"
NON_PARTITIONED_KEY_GENERATOR = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
TIMESTAMP_KEY_GENERATOR = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
CUSTOM_KEY_GENERATOR = "org.apache.hudi.keygen.CustomKeyGenerator"
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
KEY_GENERATOR_TYPES = {
    "SIMPLE": SIMPLE_KEY_GENERATOR,
    "COMPLEX": COMPLEX_KEY_GENERATOR,
    "NON_PARTITION": NON_PARTITIONED_KEY_GENERATOR,
    "TIMESTAMP": TIMESTAMP_KEY_GENERATOR,
    "CUSTOM": CUSTOM_KEY_GENERATOR,
}
"""``hoodie.table.keygenerator.type`` (Hudi 1.x writes it instead of the class name)."""
TABLE_TYPES = (COPY_ON_WRITE, MERGE_ON_READ)
COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
"""The merge mode of Tidemark's upserts: the incoming record wins."""
EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""Avro's name rule; Hudi derives Avro record names from table names."""


@dataclass(frozen=True)
class TableConfig:
    """The subset of Hudi's table config that Tidemark writes and reads."""

    name: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    precombine_field: str | None
    hive_style: bool
    avro_schema: str
    key_generator_class: str
    url_encode_partitions: bool = False
    populate_meta_fields: bool = True
    table_version: int = 6
    """6 (timeline layout 1), or 8 and 9 (Hudi 1.x, layout 2; docs/hudi-versions.md)."""
    table_type: str = COPY_ON_WRITE
    """COPY_ON_WRITE (every write rewrites the file groups it touches) or MERGE_ON_READ
    (updates and deletes appended as log blocks that readers merge)."""
    properties: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)
    """Every key of the hoodie.properties the config was read from (empty for new tables)."""

    def __post_init__(self) -> None:
        if not AVRO_NAME.fullmatch(self.name):
            raise InvalidArgumentError(
                f"table name {self.name!r} must be ASCII letters, digits or '_', not starting "
                "with a digit (Hudi derives the Avro record name from it)",
                field="name",
            )
        if self.table_version not in READ_VERSIONS:
            raise InvalidArgumentError(
                f"table version {self.table_version} is not one of 6, 8, 9", field="table_version"
            )
        if not self.record_key_fields or not all(self.record_key_fields):
            raise InvalidArgumentError("at least one record key field is required", field="key")
        if not all(self.partition_fields):
            raise InvalidArgumentError("partition field names must be non-empty", field="partition")
        if self.table_type not in TABLE_TYPES:
            raise InvalidArgumentError(
                f"table type {self.table_type!r} is not {COPY_ON_WRITE} or {MERGE_ON_READ}",
                field="table_type",
            )

    @property
    def merge_on_read(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def orders_by_event_time(self) -> bool:
        """Hudi 1.x's ``EVENT_TIME_ORDERING`` (0.x: ``DefaultHoodieRecordPayload``): an
        upsert keeps a stored record whose ordering value is greater than the incoming
        one's; otherwise (commit time ordering) the incoming record wins."""
        props = dict(self.properties)
        mode = props.get("hoodie.record.merge.mode", "").strip().upper()
        if mode:
            return mode == EVENT_TIME_ORDERING
        return props.get(PAYLOAD_CLASS_KEY, "").strip() == DEFAULT_RECORD_PAYLOAD

    @staticmethod
    def default_key_generator(
        record_key_fields: tuple[str, ...], partition_fields: tuple[str, ...]
    ) -> str:
        """The key generator Hudi picks for these fields (simple, complex, non-partitioned)."""
        if not partition_fields:
            return NON_PARTITIONED_KEY_GENERATOR
        if len(record_key_fields) == 1 and len(partition_fields) == 1:
            return SIMPLE_KEY_GENERATOR
        return COMPLEX_KEY_GENERATOR

    def to_properties(self) -> dict[str, str]:
        props = {
            "hoodie.table.name": self.name,
            "hoodie.database.name": DATABASE_NAME,
            TABLE_TYPE_KEY: self.table_type,
            "hoodie.table.version": TABLE_VERSION,
            "hoodie.timeline.layout.version": TIMELINE_LAYOUT_VERSION,
            "hoodie.archivelog.folder": "archived",
            "hoodie.table.recordkey.fields": ",".join(self.record_key_fields),
            "hoodie.table.keygenerator.class": self.key_generator_class,
            "hoodie.datasource.write.hive_style_partitioning": _bool(self.hive_style),
            "hoodie.datasource.write.partitionpath.urlencode": _bool(self.url_encode_partitions),
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.table.create.schema": self.avro_schema,
        }
        if not self.populate_meta_fields:
            props[POPULATE_META_FIELDS] = "false"
        if self.partition_fields:
            props["hoodie.table.partition.fields"] = ",".join(self.partition_fields)
        if self.precombine_field:
            props["hoodie.table.precombine.field"] = self.precombine_field
        if self.table_version == 6:
            # how Tidemark merges, stated: without it hudi-rs orders a merge-on-read
            # table's records by the precombine field, where Hudi 0.x's default payload
            # and Tidemark let the later write win
            props[PAYLOAD_CLASS_KEY] = OVERWRITE_WITH_LATEST_PAYLOAD
        else:
            props |= hudi_1x_properties(self, self.table_version, COMMIT_TIME_ORDERING)
            props["hoodie.table.initial.version"] = str(self.table_version)
        props[CHECKSUM_KEY] = str(table_checksum(DATABASE_NAME, self.name))
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TableConfig:
        """Parse and check that the table is one Tidemark supports (COW; version 6, or 8
        and 9 with timeline layout 2)."""
        for key in (
            "hoodie.table.name",
            "hoodie.table.type",
            "hoodie.table.version",
            "hoodie.timeline.layout.version",
        ):
            if key not in props:
                raise FailedPreconditionError(f"hoodie.properties lacks {key}", field="table")
        check_properties(props, "table")
        record_keys = _split(props.get("hoodie.table.recordkey.fields", ""))
        partitions = tuple(
            name.partition(":")[0]
            for name in _split(props.get("hoodie.table.partition.fields", ""))
        )
        return cls(
            name=props["hoodie.table.name"],
            record_key_fields=record_keys,
            partition_fields=partitions,
            precombine_field=_ordering_field(props),
            hive_style=props.get("hoodie.datasource.write.hive_style_partitioning") == "true",
            avro_schema=props.get("hoodie.table.create.schema", ""),
            key_generator_class=_key_generator_class(props, record_keys, partitions),
            url_encode_partitions=props.get("hoodie.datasource.write.partitionpath.urlencode")
            == "true",
            populate_meta_fields=props.get(POPULATE_META_FIELDS, "true").strip().lower() != "false",
            table_version=table_version(props),
            table_type=props[TABLE_TYPE_KEY].strip().upper(),
            properties=tuple(props.items()),
        )


def add_table_type_argument(parser: argparse.ArgumentParser, *, default: str | None) -> None:
    """``--table-type`` of ``tidemark create`` and of writes that create a table."""
    parser.add_argument(
        "--table-type",
        type=str.upper,
        choices=TABLE_TYPES,
        default=default,
        help="table type of a new table: COPY_ON_WRITE (every write rewrites the file groups "
        "it touches) or MERGE_ON_READ (updates and deletes appended as log files readers "
        f"merge); default {COPY_ON_WRITE} (see docs/merge-on-read.md)",
    )


def hudi_1x_properties(config: TableConfig, version: int, merge_mode: str) -> dict[str, str]:
    """What Hudi 1.0 (version 8) and 1.1 (version 9) keep beside the 0.14 keys: the
    version, layout 2 and its folders, the key generator type, the merge mode and, on 9,
    the ordering field under its new name."""
    props = {
        "hoodie.table.version": str(version),
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history",
        "hoodie.record.merge.mode": merge_mode,
    }
    kind = {cls: name for name, cls in KEY_GENERATOR_TYPES.items()}.get(config.key_generator_class)
    if kind:
        props["hoodie.table.keygenerator.type"] = kind
    if version >= 9 and config.precombine_field:
        props["hoodie.table.ordering.fields"] = config.precombine_field
    return props


def _ordering_field(props: Mapping[str, str]) -> str | None:
    """Hudi 1.1 renamed the precombine field ``hoodie.table.ordering.fields`` (a list;
    Tidemark orders by one field, the first)."""
    ordering = _split(props.get("hoodie.table.ordering.fields", ""))
    return props.get("hoodie.table.precombine.field") or (ordering[0] if ordering else None)


def _key_generator_class(
    props: Mapping[str, str], record_keys: tuple[str, ...], partitions: tuple[str, ...]
) -> str:
    """The class, else the class of Hudi 1.x's key generator type (an unknown type is
    kept as written, which key-dependent operations refuse), else Hudi's default."""
    if "hoodie.table.keygenerator.class" in props:
        return props["hoodie.table.keygenerator.class"]
    kind = props.get("hoodie.table.keygenerator.type", "").strip().upper()
    if kind:
        return KEY_GENERATOR_TYPES.get(kind, kind)
    return TableConfig.default_key_generator(record_keys, partitions)


def table_checksum(database: str, table_name: str) -> int:
    """HoodieTableConfig.generateChecksum: CRC32 of ``<database>.<table>`` in UTF-8."""
    return zlib.crc32(f"{database}.{table_name}".encode())


def read_properties(storage: Storage) -> dict[str, str]:
    """The table's properties; DataLossError naming the file when it is not UTF-8, names a
    key twice with different values, or lacks a valid ``hoodie.table.checksum`` (which
    Hudi writes last "to guard against partial writes": a truncated file lacks it)."""
    return read_parsed(storage, PROPERTIES_PATH, _checked_table_properties)


def _checked_table_properties(data: bytes) -> dict[str, str]:
    props = parse_properties(data.decode(), unique=True)
    for key in ("hoodie.table.name", CHECKSUM_KEY):
        if key not in props:
            raise ValueError(f"it lacks {key}, which Hudi always writes (a truncated file)")
    expected = table_checksum(props.get("hoodie.database.name", ""), props["hoodie.table.name"])
    if props[CHECKSUM_KEY] != str(expected):
        raise ValueError(f"{CHECKSUM_KEY}={props[CHECKSUM_KEY]}, expected {expected}")
    return props


def load_table_config(storage: Storage) -> TableConfig:
    return TableConfig.from_properties(read_properties(storage))


def write_table_config(storage: Storage, config: TableConfig) -> bool:
    """Create hoodie.properties; False (nothing written) if the table already exists."""
    return storage.create_if_absent(PROPERTIES_PATH, format_properties(config.to_properties()))


def format_properties(props: Mapping[str, str], comment: str = "Properties saved") -> bytes:
    """Java ``Properties.store`` output: header comments, escaped ``key=value`` lines."""
    now = datetime.now(UTC)
    lines = [f"#{comment} on {now.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z"]
    lines += [f"{_escape(key, is_key=True)}={_escape(value)}" for key, value in props.items()]
    return ("\n".join(lines) + "\n").encode("latin-1")


def parse_properties(text: str, *, unique: bool = False) -> dict[str, str]:
    """Java properties syntax: comments, ``=``/``:`` separators, backslash escapes.
    ``unique``: a key given twice with different values is a ValueError (Java keeps the
    last, hiding which one the writer meant)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key_chars: list[str] = []
        index = 0
        while index < len(line) and line[index] not in "=: \t\f":
            if line[index] == "\\" and index + 1 < len(line):
                index += 1
            key_chars.append(line[index])
            index += 1
        while index < len(line) and line[index] in " \t\f":
            index += 1
        if index < len(line) and line[index] in "=:":
            index += 1
        key, value = _unescape("".join(key_chars)), _unescape(line[index:].lstrip(" \t\f"))
        if unique and props.get(key, value) != value:
            raise ValueError(f"key {key} appears twice, with different values")
        props[key] = value
    return props


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.lstrip(" \t\f")
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            pending += stripped[:-1]
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(value: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(value):
        char = value[index]
        if char == "\\" and index + 1 < len(value):
            nxt = value[index + 1]
            if nxt == "u" and index + 6 <= len(value):
                out.append(chr(int(value[index + 2 : index + 6], 16)))
                index += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def _escape(value: str, *, is_key: bool = False) -> str:
    out: list[str] = []
    for position, char in enumerate(value):
        if char == " " and (is_key or position == 0):
            out.append("\\ ")
        elif char in "\\=:#!":
            out.append("\\" + char)
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif ord(char) < 0x20 or ord(char) > 0x7E:
            units = char.encode("utf-16-be")
            out.extend(f"\\u{units[i]:02X}{units[i + 1]:02X}" for i in range(0, len(units), 2))
        else:
            out.append(char)
    return "".join(out)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())
