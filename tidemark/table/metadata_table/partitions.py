"""Which partitions a table's metadata table has (``hoodie.table.metadata.partitions``,
and ``...partitions.inflight`` for those being built), and dropping one as Hudi does:
out of the property first (readers stop using it at once), then its folder deleted."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import structlog

from tidemark.storage.base import Storage
from tidemark.table.properties.config import PROPERTIES_PATH, format_properties

__all__ = [
    "FILES",
    "INFLIGHT_KEY",
    "METADATA_FOLDER",
    "PARTITIONS_KEY",
    "drop_partitions",
    "keeps_files",
    "listed",
    "metadata_partitions",
]

log = structlog.get_logger(__name__)

METADATA_FOLDER = ".hoodie/metadata/"
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
INFLIGHT_KEY = "hoodie.table.metadata.partitions.inflight"
FILES = "files"
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


def drop_partitions(
    storage: Storage, props: Mapping[str, str], dropped: Collection[str]
) -> dict[str, str]:
    """Remove ``dropped`` from the partitions property, then delete their folders; the
    properties written. A crash in between leaves folders no property names, which the
    next drop (or ``delete_prefix``) removes."""
    kept = [part for part in listed(props, PARTITIONS_KEY) if part not in dropped]
    updated = {**props, PARTITIONS_KEY: ",".join(kept)}
    storage.write(PROPERTIES_PATH, format_properties(updated, comment="Updated"))
    for partition in dropped:
        deleted = storage.delete_prefix(f"{METADATA_FOLDER}{partition}/")
        log.warning(
            "hudi_metadata_table.partition_dropped",
            table=storage.uri,
            partition=partition,
            objects=deleted,
        )
    return updated
