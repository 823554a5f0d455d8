"""File pruning for reads by key: which file groups hold some record keys, by the record
index (``tidemark read --where id=5`` and ``spark_jobs.read`` open only those)."""

from __future__ import annotations

import pyarrow as pa

from tidemark.index.record_index import RecordIndex
from tidemark.storage.base import Storage
from tidemark.table.reader import Locator


def index_locator(storage: Storage) -> Locator | None:
    """A ``Locator`` over the table's record index; None for a table without one."""
    if not RecordIndex.exists(storage):
        return None
    index = RecordIndex.open(storage)

    def locate(keys: set[str]) -> set[str]:
        if not keys:
            return set()
        located = index.lookup(pa.array(sorted(keys), pa.string()))
        return set(located.column("file_id").drop_null().to_pylist())

    return locate
