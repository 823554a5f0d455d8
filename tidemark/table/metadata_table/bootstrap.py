"""A new, empty table's metadata table with its ``files`` partition, as Hudi 1.x
initialises one (table versions 8 and 9), so that Hudi's readers list the table through
it and Tidemark keeps it from the first write on.

Written in the order that leaves no reader misled by a crash: the metadata table's
``hoodie.properties``, the ``files`` partition's ``.hoodie_partition_metadata`` and base
HFile (the partitions record, empty) at instant ``00000000000000000`` with its
deltacommit (requested, inflight, completed; operation ``BULK_INSERT_PREPPED``), and
last the data table's ``hoodie.table.metadata.partitions=files``: until then readers list
storage, and an interrupted run leaves a folder no property names (the next run with
the option writes it again).

The ``HoodieMetadataRecord`` schemas (``metadata_record_v8.avsc``: Hudi 1.0.2's;
``metadata_record_v9.avsc``: Hudi 1.1.1's) are copied from the files partitions of
Hudi-written test tables (Apache hudi-rs test data, Apache License 2.0); the HFile layout
is that release's (HBase's with checksums on 1.0, Hudi's own on 1.1)."""

from __future__ import annotations

import argparse
from importlib import resources

import structlog

from tidemark.errors import InvalidArgumentError
from tidemark.hfile.style import Style, WriteOptions
from tidemark.hfile.writer import write_hfile
from tidemark.storage.base import Storage
from tidemark.table.metadata.actions import DELTA_COMMIT
from tidemark.table.metadata.commit_avro import commit_metadata_to_avro
from tidemark.table.metadata_table.files_records import (
    ALL_PARTITIONS,
    PARTITION_LIST,
    encode_records,
)
from tidemark.table.metadata_table.partitions import FILES, METADATA_FOLDER, PARTITIONS_KEY
from tidemark.table.metadata_table.slices import BASE_SUFFIX, base_file_metadata
from tidemark.table.metadata_table.timeline import FOLDER, instant_path
from tidemark.table.properties.config import (
    CHECKSUM_KEY,
    DATABASE_NAME,
    PROPERTIES_PATH,
    TableConfig,
    format_properties,
    read_properties,
    table_checksum,
)
from tidemark.table.timeline.instant import Instant, State, new_instant_time

__all__ = [
    "INIT_INSTANT",
    "KEPT_VERSIONS",
    "add_hudi_metadata_table_argument",
    "check_new_metadata_table",
    "create_metadata_table",
]

log = structlog.get_logger(__name__)

INIT_INSTANT = "00000000000000000"
"""Hudi's instant for initialising a metadata partition (before every data instant)."""
FILE_ID = "files-0000-0"
WRITE_TOKEN = "0-0-0"
OPERATION = "BULK_INSERT_PREPPED"
KEPT_VERSIONS = {8: Style.HBASE, 9: Style.HUDI}
"""Table versions whose metadata table Tidemark creates, with the HFile layout of the Hudi
release that writes that version."""
PARTITION_METADATA = f"{FOLDER}.hoodie_partition_metadata"


def metadata_properties(config: TableConfig) -> dict[str, str]:
    """The metadata table's ``hoodie.properties``, as Hudi 1.x writes it."""
    name = f"{config.name}_metadata"
    version = str(config.table_version)
    return {
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.table.initial.version": version,
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.archivelog.folder": "history",
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.history.path": "history",
        CHECKSUM_KEY: str(table_checksum(DATABASE_NAME, name)),
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.name": name,
        "hoodie.timeline.path": "timeline",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.table.version": version,
    }


def record_schema(table_version: int) -> str:
    """The ``HoodieMetadataRecord`` schema Hudi writes at ``table_version``."""
    package = resources.files(__package__ or "tidemark.table.metadata_table")
    return (package / f"metadata_record_v{table_version}.avsc").read_text()


def add_hudi_metadata_table_argument(parser: argparse.ArgumentParser) -> None:
    """``--hudi-metadata-table`` of the commands that create a table."""
    parser.add_argument(
        "--hudi-metadata-table",
        action="store_true",
        help="a table this creates gets Hudi's metadata table with its files partition "
        "(table versions 8 and 9), which Hudi's readers and Tidemark then list the table "
        "through; default: none, readers list storage",
    )


def check_new_metadata_table(wanted: bool, table_version: int | None, disable: bool) -> None:
    """A new table gets a metadata table only on a version Tidemark keeps one on (None:
    not known yet, checked again when the table is created), and not while asked to
    remove it."""
    if not wanted:
        return
    if disable:
        raise InvalidArgumentError(
            "a metadata table cannot be both created and removed: pass one of "
            "--hudi-metadata-table and --disable-hudi-metadata-table",
            field="hudi_metadata_table",
        )
    if table_version is not None and table_version not in KEPT_VERSIONS:
        raise InvalidArgumentError(
            f"Tidemark keeps Hudi's metadata table on table versions "
            f"{', '.join(map(str, KEPT_VERSIONS))}, not {table_version}",
            field="hudi_metadata_table",
        )


def create_metadata_table(storage: Storage, config: TableConfig) -> TableConfig:
    """Give the empty table at ``storage`` (its ``hoodie.properties`` written from
    ``config``) a metadata table with a ``files`` partition; its configuration after."""
    version = config.table_version
    check_new_metadata_table(True, version, disable=False)
    storage.write(
        f"{METADATA_FOLDER}{PROPERTIES_PATH}",
        format_properties(metadata_properties(config), comment="Properties saved"),
    )
    storage.write(
        PARTITION_METADATA,
        format_properties(
            {"commitTime": INIT_INSTANT, "partitionDepth": "1"}, comment="partition metadata"
        ),
    )
    schema = record_schema(version)
    name = f"{FILE_ID}_{WRITE_TOKEN}_{INIT_INSTANT}{BASE_SUFFIX}"
    hfile = write_hfile(
        encode_records([(ALL_PARTITIONS, PARTITION_LIST, {})], schema, file_name=name),
        file_info={
            b"schema": schema.encode(),
            b"minRecordKey": ALL_PARTITIONS.encode(),
            b"maxRecordKey": ALL_PARTITIONS.encode(),
        },
        options=WriteOptions(style=KEPT_VERSIONS[version]),
    )
    requested = Instant(INIT_INSTANT, DELTA_COMMIT, State.REQUESTED, layout=2)
    storage.write(instant_path(requested), b"")
    storage.write(instant_path(requested.with_state(State.INFLIGHT)), b"")
    storage.write(f"{FOLDER}{name}", hfile)
    metadata = base_file_metadata(FILE_ID, name, len(hfile), 1, "null", OPERATION, schema)
    done = Instant(INIT_INSTANT, DELTA_COMMIT, State.COMPLETED, new_instant_time(), layout=2)
    storage.write(instant_path(done), commit_metadata_to_avro(metadata, DELTA_COMMIT))
    props = read_properties(storage) | {PARTITIONS_KEY: FILES}
    storage.write(PROPERTIES_PATH, format_properties(props, comment="Updated"))
    log.info("metadata_table.created", table=storage.uri, table_version=version)
    return TableConfig.from_properties(props)
