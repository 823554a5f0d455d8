"""A scan of Parquet files for ``column = value`` that skips by row-group statistics: what a
query engine without an index reads, the baseline the demo and the clustering benchmark
compare Tidemark's pruned reads with."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from tidemark.storage.base import Storage


@dataclass(frozen=True)
class ScanResult:
    files_read: int
    rows_read: int
    rows_matched: int
    seconds: float


def scan_equal(storage: Storage, paths: Sequence[str], column: str, value: Any) -> ScanResult:
    """``column = value`` over the files: a file is read only if its row-group
    statistics admit the value, and only those row groups are read."""
    started = time.perf_counter()
    files_read = rows_read = matched = 0
    for path in paths:
        with storage.open_input(path) as stream:
            parquet = pq.ParquetFile(stream)
            groups = _row_groups_admitting(parquet.metadata, column, value)
            if not groups:
                continue
            rows = parquet.read_row_groups(groups)
        files_read += 1
        rows_read += rows.num_rows
        matched += int(np.count_nonzero(rows.column(column).to_numpy() == value))
    return ScanResult(files_read, rows_read, matched, time.perf_counter() - started)


def _row_groups_admitting(metadata: pq.FileMetaData, column: str, value: Any) -> list[int]:
    index = metadata.schema.names.index(column)
    admitted = []
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max or stats.min <= value <= stats.max:
            admitted.append(group)
    return admitted
