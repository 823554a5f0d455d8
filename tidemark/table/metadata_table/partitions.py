"""Which partitions a table's metadata table has (``hoodie.table.metadata.partitions``,
and ``...partitions.inflight`` for those being built), and dropping those Tidemark does
not keep as Hudi drops one: out of the property first (readers stop using it at once),
with its index definition, then its folder deleted."""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from tidemark.storage.base import Storage
from tidemark.table.properties.config import PROPERTIES_PATH, format_properties

__all__ = [
    "FILES",
    "INDEX_DEFS_KEY",
    "INFLIGHT_KEY",
    "METADATA_FOLDER",
    "PARTITIONS_KEY",
    "keep_only_files",
    "keeps_files",
    "listed",
    "metadata_partitions",
    "only_files",
]

log = structlog.get_logger(__name__)

METADATA_FOLDER = ".hoodie/metadata/"
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
INFLIGHT_KEY = "hoodie.table.metadata.partitions.inflight"
FILES = "files"
INDEX_DEFS_KEY = "hoodie.table.index.defs.path"
INDEX_DEFS_FOLDER = ".hoodie/.index_defs/"
"""Where Hudi 1.x keeps ``index.json``, its index definitions."""
FIRST_KEPT_VERSION = 8
"""Tidemark keeps the ``files`` partition from table version 8 (Hudi 1.x's layout)."""


def listed(props: Mapping[str, str], key: str) -> list[str]:
    """The partitions a comma-separated property names, in its order."""
    return [part.strip() for part in props.get(key, "").split(",") if part.strip()]


def metadata_partitions(props: Mapping[str, str]) -> list[str]:
    """Metadata partitions built or being built (``files``, ``column_stats``, ...)."""
    return sorted({*listed(props, PARTITIONS_KEY), *listed(props, INFLIGHT_KEY)})


def keeps_files(props: Mapping[str, str], table_version: int) -> bool:
    """Whether Tidemark keeps this table's ``files`` partition with every write."""
    return table_version >= FIRST_KEPT_VERSION and FILES in listed(props, PARTITIONS_KEY)


def only_files(props: Mapping[str, str], table_version: int) -> bool:
    """Whether the metadata table is kept and holds nothing Tidemark does not keep (a
    write dropped the rest), so services that delete or replace files may run."""
    return (
        keeps_files(props, table_version)
        and listed(props, PARTITIONS_KEY) == [FILES]
        and not listed(props, INFLIGHT_KEY)
    )


def keep_only_files(storage: Storage, props: Mapping[str, str]) -> dict[str, str]:
    """Drop every partition but ``files`` as Hudi drops one: out of the partitions
    property first (readers stop using them at once), with their index definitions (every
    definition in ``hoodie.table.index.defs.path`` is one of them: record index, column
    and partition statistics, bloom filters, secondary and expression indexes), then their
    folders and the definitions file deleted. Each step is repeated by the next call, so a
    crash in between leaves only what no property names, deleted next time. Returns the
    properties as written."""
    dropped = [part for part in listed(props, PARTITIONS_KEY) if part != FILES]
    updated = dict(props)
    if dropped or props.get(INDEX_DEFS_KEY):
        updated = {key: value for key, value in props.items() if key != INDEX_DEFS_KEY}
        updated[PARTITIONS_KEY] = FILES
        storage.write(PROPERTIES_PATH, format_properties(updated, comment="Updated"))
        log.warning("hudi_metadata_table.partitions_dropped", table=storage.uri, dropped=dropped)
    storage.delete_prefix(INDEX_DEFS_FOLDER)
    for folder in storage.list_dir(METADATA_FOLDER).dirs:
        name = folder.rpartition("/")[2]
        if name not in (FILES, ".hoodie"):
            deleted = storage.delete_prefix(f"{folder}/")
            log.warning(
                "hudi_metadata_table.partition_deleted",
                table=storage.uri,
                partition=name,
                objects=deleted,
            )
    return updated
