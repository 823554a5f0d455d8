"""delta-rs as the peer of a merge-on-read stream: the same rows as a Delta table and the
same batches merged into it with ``DeltaTable.merge`` (update all when matched, insert
all when not), the upsert delta-rs documents.

Set up as the Delta docs advise for a table this size: not partitioned (they partition
only by a column whose partitions hold at least 1 GB each; the benchmark's 5M rows are
about 70 MB), delta-rs's default target file size (``delta.targetFileSize`` unset),
deletion vectors off: delta-rs 1.6's merge writes none (with
``delta.enableDeletionVectors`` on it still rewrote each file holding a matched row), so
the feature would only shut out readers without it. With keys spread over the whole table
every file holds one, so a merge rewrites the table, as copy-on-write does; partitions
would not spare a file. ``deltalake`` is a dev dependency,
imported only when the benchmark runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql import DataFrame

MERGE_PREDICATE = "target.id = source.id"


class DeltaMerge:
    """A Delta table the benchmark's batches are merged into."""

    def __init__(self, path: Path) -> None:
        from deltalake import DeltaTable

        self.table = DeltaTable(str(path))

    @classmethod
    def create(cls, rows: DataFrame, path: Path) -> DeltaMerge:
        """The table of ``rows``: Spark writes them as Parquet, which delta-rs streams
        into one new table (the driver never holds them all)."""
        from deltalake import write_deltalake

        staging = path.with_name(path.name + "-staging")
        rows.write.parquet(str(staging))
        write_deltalake(str(path), ds.dataset(str(staging)).scanner().to_reader())
        shutil.rmtree(staging)
        return cls(path)

    def merge(self, batch: pa.Table) -> dict[str, Any]:
        """Upsert ``batch`` by key; delta-rs's merge metrics (rows copied, files
        rewritten)."""
        merger = self.table.merge(
            source=batch,
            predicate=MERGE_PREDICATE,
            source_alias="source",
            target_alias="target",
        )
        return merger.when_matched_update_all().when_not_matched_insert_all().execute()

    def files(self) -> int:
        """Data files in the table's latest version."""
        return len(self.table.file_uris())
