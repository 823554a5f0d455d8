"""Hudi's own metadata table (``.hoodie/metadata/``): kept, or removed with the caller's
consent.

On table versions 8 and 9 with a ``files`` partition Tidemark keeps that partition: every
commit it completes records its files there first (``record_in_metadata_table``; a
rollback removes that record, ``roll_back_in_metadata_table``), and the other partitions
(``record_index``, ``column_stats``, ``partition_stats``, ``bloom_filters``, secondary and
expression indexes), which Tidemark does not maintain, are dropped under the lock as Hudi
drops one, with their index definitions
(``tidemark.table.metadata_table.partitions.keep_only_files``). Writes wait
while Hudi builds a partition (``hoodie.table.metadata.partitions.inflight``).

Elsewhere (table version 6, or no ``files`` partition) Hudi readers that list files
through it would miss every file Tidemark writes, so a write is refused unless the caller
consents (``--disable-hudi-metadata-table``); then Tidemark does what a Hudi writer with
``hoodie.metadata.enable=false`` does: clear both properties first (readers stop using the
metadata table at once; ``hoodie.table.checksum`` covers only the database and table names,
so it stays valid), then delete the folder. A run interrupted in between leaves a folder no
reader uses; the next write deletes it. The option removes a kept metadata table too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import structlog

from tidemark.errors import FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.metadata_table import compaction, deltacommit
from tidemark.table.metadata_table.files_records import FileChanges
from tidemark.table.metadata_table.partitions import (
    INFLIGHT_KEY,
    METADATA_FOLDER,
    PARTITIONS_KEY,
    keep_only_files,
    keeps_files,
    listed,
    metadata_partitions,
    only_files,
)
from tidemark.table.properties.config import (
    PROPERTIES_PATH,
    TableConfig,
    format_properties,
    read_properties,
)

log = structlog.get_logger(__name__)

DISABLE_OPTION = "--disable-hudi-metadata-table"


REMOVE_IT = f"pass {DISABLE_OPTION} to remove it"
"""How a write's caller lets it remove the metadata table."""


def check_hudi_metadata_table(
    props: Mapping[str, str],
    *,
    disable: bool,
    table_version: int | None = None,
    remedy: str = REMOVE_IT,
) -> None:
    """Refuse a write to a table with a metadata table Tidemark does not keep (a write
    to a ``table_version`` 8 or 9 table with ``files`` keeps it; ``None``: a service that
    never does) unless the caller lets us drop it (``remedy`` says how, for the command
    at hand); refuse one while Hudi builds a metadata partition."""
    partitions = metadata_partitions(props)
    if not partitions or disable:
        return
    building = listed(props, INFLIGHT_KEY)
    if table_version is not None and building:
        raise FailedPreconditionError(
            f"Hudi is building the metadata table's {', '.join(building)} partition; write "
            f"once it is built, or {remedy}",
            field=INFLIGHT_KEY,
        )
    if table_version is None or not keeps_files(props, table_version):
        raise FailedPreconditionError(
            f"the table has a Hudi metadata table ({', '.join(partitions)}) that Tidemark "
            f"does not update, so Hudi readers using it would miss this write; {remedy} "
            "(as a Hudi writer with hoodie.metadata.enable=false does)",
            field=PARTITIONS_KEY,
        )


def check_no_hudi_metadata_table(
    props: Mapping[str, str], what: str, *, table_version: int | None = None
) -> None:
    """Refuse ``what`` (a service that deletes or replaces files, with no option to remove
    the metadata table) on a table that has one, unless Tidemark keeps it on this
    ``table_version`` and a write already dropped every partition but ``files`` (``what``
    records its changes there): a write removes it or drops them."""
    if table_version is not None and only_files(props, table_version):
        return
    check_hudi_metadata_table(
        props,
        disable=False,
        remedy=f"a write with {DISABLE_OPTION} removes it, then {what} can run",
    )


def prepare_hudi_metadata_table(table: HoodieTable, *, disable: bool) -> None:
    """Under the table lock, before a write begins: remove the metadata table (with the
    caller's consent, or the leftover of an interrupted removal), else, where Tidemark
    keeps its ``files`` partition, drop the partitions it does not keep. Re-checks the
    properties as read under the lock (a Hudi writer may have changed them)."""
    props = read_properties(table.storage)
    version = table.config.table_version
    if disable or not keeps_files(props, version):
        remove_hudi_metadata_table(table, disable=disable)
        return
    check_hudi_metadata_table(props, disable=False, table_version=version)
    table.config = TableConfig.from_properties(keep_only_files(table.storage, props))


def record_in_metadata_table(table: HoodieTable, instant: str, metadata: CommitMetadata) -> None:
    """At a commit, before the data instant completes: its files in the ``files``
    partition, where Tidemark keeps it."""
    _record(table, instant, FileChanges.of_commit(metadata))


def record_clean_in_metadata_table(
    table: HoodieTable, instant: str, deleted: Mapping[str, Sequence[str]]
) -> None:
    """At a clean, before its instant completes: tombstones for the files it deleted."""
    _record(table, instant, FileChanges.of_clean(deleted))


def _record(table: HoodieTable, instant: str, changes: FileChanges) -> None:
    """The metadata deltacommit of ``instant``, after the ``files`` partition's compaction
    and cleaning when due (as Hudi runs the metadata table's services first)."""
    if not keeps_files(dict(table.config.properties), table.config.table_version):
        return
    pending = [found.timestamp for found in table.timeline.pending()]
    compaction.compact_if_due(table.storage, pending, after=instant)
    deltacommit.write_deltacommit(table.storage, instant, changes)


def roll_back_in_metadata_table(table: HoodieTable, instant: str) -> None:
    """At a rollback of data instant ``instant``: its metadata deltacommit removed."""
    if keeps_files(dict(table.config.properties), table.config.table_version):
        deltacommit.roll_back(table.storage, instant)


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
