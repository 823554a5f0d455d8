"""Hudi's two queries of a table's current (or ``as_of``) data, as
``hoodie.datasource.query.type`` names them.

``snapshot``: each file group's latest base file merged with its committed log blocks, the
rows as written. ``read_optimized``: each file group's latest base file alone, its logs
ignored (a group written only to logs has no rows): the rows as of the group's last
compaction, read as plain Parquet files, pruned by their statistics and the record index,
with no merge. On a copy-on-write table, which has no logs, the two are the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from tidemark.errors import InvalidArgumentError
from tidemark.table.files.view import FileSlice, FileSystemView

SNAPSHOT = "snapshot"
READ_OPTIMIZED = "read_optimized"
QUERY_TYPES = (SNAPSHOT, READ_OPTIMIZED)


def check_query_type(query_type: str) -> str:
    """``query_type`` when it is one of ``QUERY_TYPES``, else an InvalidArgumentError."""
    if query_type not in QUERY_TYPES:
        raise InvalidArgumentError(
            f"use one of {', '.join(QUERY_TYPES)}, got {query_type!r}", field="query_type"
        )
    return query_type


def queried_slices(
    view: FileSystemView, partitions: Iterable[str] | None, query_type: str
) -> list[FileSlice]:
    """The latest file slices a query of ``query_type`` reads in ``partitions`` (None:
    all): read-optimized ones are each group's latest base file without logs."""
    if check_query_type(query_type) == READ_OPTIMIZED:
        return [
            FileSlice(base.partition_path, base.file_id, base, ())
            for base in view.latest_base_files(partitions)
        ]
    return view.latest_file_slices(partitions)
