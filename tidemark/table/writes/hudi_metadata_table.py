"""Hudi's own metadata table (``.hoodie/metadata/``), which Tidemark does not maintain.

Hudi readers that list files through it would miss every file Tidemark writes, so a write
is refused while ``hoodie.properties`` lists metadata partitions. With the caller's consent
(``--disable-hudi-metadata-table``) Tidemark does what a Hudi writer with
``hoodie.metadata.enable=false`` does: clear both properties first (readers stop using the
metadata table at once; ``hoodie.table.checksum`` covers only the database and table names,
so it stays valid), then delete the folder. A run interrupted in between leaves a folder no
reader uses; the next write deletes it.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from tidemark.errors import FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.properties.config import (
    PROPERTIES_PATH,
    TableConfig,
    format_properties,
    read_properties,
)

log = structlog.get_logger(__name__)

METADATA_FOLDER = ".hoodie/metadata/"
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
INFLIGHT_KEY = "hoodie.table.metadata.partitions.inflight"
DISABLE_OPTION = "--disable-hudi-metadata-table"


def metadata_partitions(props: Mapping[str, str]) -> list[str]:
    """Metadata partitions built or being built (``files``, ``column_stats``, ...)."""
    listed = f"{props.get(PARTITIONS_KEY, '')},{props.get(INFLIGHT_KEY, '')}"
    return sorted({part.strip() for part in listed.split(",") if part.strip()})


REMOVE_IT = f"pass {DISABLE_OPTION} to remove it"
"""How a write's caller lets it remove the metadata table."""


def check_hudi_metadata_table(
    props: Mapping[str, str], *, disable: bool, remedy: str = REMOVE_IT
) -> None:
    """Refuse a write to a table with a metadata table unless the caller lets us drop it
    (``remedy`` says how, for the command at hand)."""
    partitions = metadata_partitions(props)
    if partitions and not disable:
        raise FailedPreconditionError(
            f"the table has a Hudi metadata table ({', '.join(partitions)}) that Tidemark "
            f"does not update, so Hudi readers using it would miss this write; {remedy} "
            "(as a Hudi writer with hoodie.metadata.enable=false does)",
            field=PARTITIONS_KEY,
        )


def check_no_hudi_metadata_table(props: Mapping[str, str], what: str) -> None:
    """Refuse ``what`` (a service that deletes or replaces files, with no option to remove
    the metadata table) on a table that has one: a write removes it."""
    check_hudi_metadata_table(
        props,
        disable=False,
        remedy=f"a write with {DISABLE_OPTION} removes it, then {what} can run",
    )


def remove_hudi_metadata_table(table: HoodieTable, *, disable: bool) -> None:
    """Under the table lock: clear the properties, then delete the folder (also the
    leftover of an interrupted removal)."""
    clear_metadata_properties(table, disable=disable)
    delete_metadata_folder(table)


def clear_metadata_properties(table: HoodieTable, *, disable: bool) -> None:
    """First step: readers stop using the metadata table. Re-checks the properties as
    read under the lock (a Hudi writer may have built one since the write started)."""
    props = read_properties(table.storage)
    partitions = metadata_partitions(props)
    if not partitions:
        return
    check_hudi_metadata_table(props, disable=disable)
    cleared = {k: v for k, v in props.items() if k not in (PARTITIONS_KEY, INFLIGHT_KEY)}
    table.storage.write(PROPERTIES_PATH, format_properties(cleared, comment="Updated"))
    table.config = TableConfig.from_properties(cleared)
    log.warning("hudi_metadata_table.disabled", table=table.uri, partitions=",".join(partitions))


def delete_metadata_folder(table: HoodieTable) -> None:
    """Second step: delete ``.hoodie/metadata/`` once no property points readers to it."""
    deleted = table.storage.delete_prefix(METADATA_FOLDER)
    if deleted:
        log.warning("hudi_metadata_table.deleted", table=table.uri, objects=deleted)
