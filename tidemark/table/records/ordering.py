"""Event-time ordering of upserts (Hudi 1.x's ``EVENT_TIME_ORDERING``, 0.x's
``DefaultHoodieRecordPayload``): when an incoming record meets the stored record of its
key, the one with the greater ordering value stays; on a tie, or when either value is
null, the incoming one wins (as Hudi's payload keeps the incoming record unless the stored
one orders strictly later). Commit-time ordering (every other table) lets the incoming
record win always, and never calls this.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import RECORD_KEY


def newer_than_stored(
    incoming: pa.Table,
    stored: pa.Table,
    stored_keys: pa.Array | pa.ChunkedArray,
    config: TableConfig,
) -> pa.Table:
    """``incoming`` without the rows whose stored record (same key, in ``stored``, keyed
    ``stored_keys``) has a greater ordering value: those stored records stay as they are."""
    field = config.precombine_field
    if field is None or field not in incoming.column_names or field not in stored.column_names:
        return incoming
    keys = incoming.column(RECORD_KEY).combine_chunks()
    values = (
        stored_keys.combine_chunks() if isinstance(stored_keys, pa.ChunkedArray) else stored_keys
    )
    position = pc.index_in(keys, value_set=values)
    ordering = incoming.column(field).combine_chunks()
    stored_ordering = pc.take(stored.column(field).combine_chunks(), position).cast(ordering.type)
    stale = pc.fill_null(pc.less(ordering, stored_ordering), False)
    return incoming.filter(pc.invert(stale))
