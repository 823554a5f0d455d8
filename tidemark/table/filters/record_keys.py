"""Bound filters as a record key lookup: ``=``/``in`` on every record key field name the
keys of the only rows that can match (every combination of their values, keyed as the
writer keys them: ``id=01`` is key 1), so a record index opens only the file groups
holding them."""

from __future__ import annotations

from tidemark.errors import TidemarkError
from tidemark.table.filters.expression import BoundFilter
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import record_keys


def keys_of(bound: BoundFilter, config: TableConfig) -> set[str] | None:
    """The record keys of the rows that may meet ``bound``; None when it does not name
    them all (or names values no key is made of)."""
    rows = bound.equal_rows(config.record_key_fields) if config.record_key_fields else None
    if rows is None or any(column.null_count for column in rows.columns):
        return None  # missing is null or empty: not looked up
    try:
        return set(record_keys(rows, config).to_pylist())
    except TidemarkError:
        return None
