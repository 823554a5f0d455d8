"""Everything about an existing table that refuses a write, checked before the write
touches anything (no lock, instant, marker or file is created for a refused write)."""

from __future__ import annotations

from tidemark.errors import FailedPreconditionError
from tidemark.table.hudi_metadata import check_hudi_metadata_table
from tidemark.table.keys import partition_field_kinds
from tidemark.table.properties import TableConfig
from tidemark.table.property_support import check_properties


def check_writable(config: TableConfig, *, disable_hudi_metadata_table: bool) -> None:
    props = dict(config.properties)
    check_properties(props, "write")
    if config.orders_by_event_time and not config.precombine_field:
        raise FailedPreconditionError(
            "value 'EVENT_TIME_ORDERING' needs an ordering field, and the table has none",
            field="hoodie.record.merge.mode",
        )
    partition_field_kinds(config)
    check_hudi_metadata_table(props, disable=disable_hudi_metadata_table)
