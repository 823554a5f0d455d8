"""Everything about an existing table that refuses a write, checked before the write
touches anything (no lock, instant, marker or file is created for a refused write)."""

from __future__ import annotations

from tidemark.errors import FailedPreconditionError
from tidemark.table.metadata_table.partitions import INDEX_DEFS_KEY, keeps_files
from tidemark.table.properties.config import TableConfig
from tidemark.table.properties.support import check_properties
from tidemark.table.records.keys import partition_field_kinds
from tidemark.table.writes.hudi_metadata_table import (
    check_hudi_metadata_table,
    check_no_hudi_metadata_table,
)


def check_writable(config: TableConfig, *, disable_hudi_metadata_table: bool) -> None:
    props = dict(config.properties)
    if keeps_files(props, config.table_version) and not disable_hudi_metadata_table:
        # the write drops every index definition with its metadata partition
        # (``prepare_hudi_metadata_table``), so they refuse nothing
        props.pop(INDEX_DEFS_KEY, None)
    check_properties(props, "write")
    if config.merge_on_read and not config.populate_meta_fields:
        raise FailedPreconditionError(
            "value 'false' is not supported on a merge-on-read table (its log records carry "
            "their keys in the meta columns)",
            field="hoodie.populate.meta.fields",
        )
    if config.orders_by_event_time and not config.precombine_field:
        raise FailedPreconditionError(
            "value 'EVENT_TIME_ORDERING' needs an ordering field, and the table has none",
            field="hoodie.record.merge.mode",
        )
    partition_field_kinds(config)
    check_hudi_metadata_table(
        props, disable=disable_hudi_metadata_table, table_version=config.table_version
    )


def check_clusterable(config: TableConfig) -> None:
    """Clustering rewrites file groups, so what refuses a write refuses it too (Hudi's
    metadata table and indexes would list the replaced files); it has no option to remove
    the metadata table: a write removes it. Merge-on-read tables are clustered from their
    merged slices."""
    props = dict(config.properties)
    check_properties(props, "write")
    check_no_hudi_metadata_table(props, "clustering", table_version=config.table_version)
