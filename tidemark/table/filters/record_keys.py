"""Bound filters as a record key lookup: ``=``/``in`` on every record key field name the
keys of the only rows that can match (every combination of their values, keyed as the
writer keys them: ``id=01`` is key 1), so a record index opens only the file groups
holding them."""

from __future__ import annotations

import itertools

import pyarrow as pa

from tidemark.errors import TidemarkError
from tidemark.table.filters.expression import BoundFilter
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import record_keys


def keys_of(bound: BoundFilter, config: TableConfig) -> set[str] | None:
    """The record keys of the rows that may meet ``bound``; None when it does not name
    them all (or names values no key is made of)."""
    fields = config.record_key_fields
    if not fields:
        return None
    kinds = {p.column: p.kind for p in bound}
    members: dict[str, list[object]] = {}
    for name in fields:
        values = bound.equal_values(name)
        if values is None:
            return None
        members[name] = [v.value for v in values if v.exact and v.value is not None]
        if len(members[name]) < len(values):  # missing, or of another type: not looked up
            return None
    combinations = list(itertools.product(*(members[name] for name in fields)))
    rows = pa.table(
        {
            name: pa.array([c[i] for c in combinations], type=kinds[name])
            for i, name in enumerate(fields)
        }
    )
    try:
        return set(record_keys(rows, config).to_pylist())
    except TidemarkError:
        return None
