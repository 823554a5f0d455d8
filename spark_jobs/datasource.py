"""``spark.read.format("tidemark").load(path)``: a PySpark Python data source over a table's
snapshot, Hudi's meta columns included, kept for compatibility. The fast path is
``tidemark.spark.read`` (Spark's own Parquet reader, pruning before the scan; see
``spark_jobs.read``): here every row passes through a Python worker.

The source takes no filters. PySpark keeps what a reader planned on the data source object
of the DataFrame: after a query whose filters a reader took, the next query of the same
DataFrame without filters (a ``count()``) reuses the partitions planned for the filtered
one (PySpark 4.1 to 4.3), so a pruning reader returns wrong rows for a reused DataFrame or
SQL view. Spark evaluates every filter on the full snapshot instead. The files are packed
into at most ``tasks`` (an option; default twice the driver's cores) tasks of about equal
bytes, as each Python task costs far more than reading a small file; a merge-on-read slice
with logs is a task of its own, merged there. Hudi's ``hoodie.datasource.query.type`` option
(or ``query_type``) ``read_optimized`` reads the latest base files only, logs ignored.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from tidemark.errors import InvalidArgumentError
from tidemark.index.pruning import plan_snapshot
from tidemark.jobs.keying import arrow_schema_in_zone
from tidemark.jobs.read import merged_slice, pack, read_file
from tidemark.storage.uri import canonical_uri
from tidemark.table import HoodieTable
from tidemark.table.files.query_types import SNAPSHOT, check_query_type
from tidemark.table.files.reader import snapshot_schema
from tidemark.table.files.view import FileSlice

NAME = "tidemark"
ARROW_TIME_ZONE = "UTC"
"""Arrow timestamps carry UTC microseconds whatever their label; PySpark 4.2+ wants a zone
to convert a ``TimestampType`` (4.1's ``to_arrow_schema`` takes none)."""
QUERY_TYPE_OPTIONS = ("hoodie.datasource.query.type", "query_type")
"""The options naming the query type: Hudi's key, and the short name."""


class FilesPartition(InputPartition):
    """One Spark task: base files of the snapshot (none for a snapshot without files, as
    Spark needs a partition)."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.paths = paths


class SlicePartition(InputPartition):
    """One Spark task: a merge-on-read slice to merge, with the deltacommits it reads."""

    def __init__(self, file_slice: FileSlice, deltacommits: dict[str, str]) -> None:
        super().__init__(file_slice)
        self.file_slice = file_slice
        self.deltacommits = deltacommits


class SnapshotReader(DataSourceReader):
    def __init__(
        self, table_uri: str, schema: StructType, as_of: str | None, tasks: int, query_type: str
    ) -> None:
        self.table_uri = table_uri
        self.output = arrow_schema_in_zone(schema, ARROW_TIME_ZONE)
        self.as_of = as_of
        self.tasks = tasks
        self.query_type = query_type

    def partitions(self) -> Sequence[InputPartition]:
        """Planned in the Python worker Spark gives the reader, which opens the table."""
        table = HoodieTable.open(self.table_uri)
        plan = plan_snapshot(table, as_of=self.as_of, query_type=self.query_type)
        merged: list[InputPartition] = [SlicePartition(s, plan.deltacommits) for s in plan.slices]
        files: list[InputPartition] = [FilesPartition(g) for g in pack(plan.files, self.tasks)]
        return files + merged or [FilesPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, SlicePartition):
            rows = merged_slice(
                self.table_uri, partition.file_slice, partition.deltacommits, self.output
            )
            yield from rows.to_batches()
            return
        assert isinstance(partition, FilesPartition)
        for path in partition.paths:
            yield from read_file(self.table_uri, path, self.output).to_batches()


class TidemarkDataSource(DataSource):
    """The snapshot of the table at the ``path`` option (``as_of``: an instant, default the
    latest; ``tasks``: at most this many Spark tasks; ``hoodie.datasource.query.type`` or
    ``query_type``: ``snapshot``, the default, or ``read_optimized``)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return from_arrow_schema(snapshot_schema(HoodieTable.open(self._path()), self._as_of()))

    def reader(self, schema: StructType) -> DataSourceReader:
        return SnapshotReader(
            self._path(), schema, self._as_of(), self._tasks(), self._query_type()
        )

    def _path(self) -> str:
        """The ``path`` option, canonical: the reader plans and reads in other processes."""
        path = self.options.get("path")
        if not path:
            raise InvalidArgumentError("give the table's path: load(path)", field="path")
        return canonical_uri(str(path))

    def _as_of(self) -> str | None:
        as_of = self.options.get("as_of")
        return str(as_of) if as_of else None

    def _query_type(self) -> str:
        """The query type either option names (both: the same one)."""
        given = {str(self.options[k]) for k in QUERY_TYPE_OPTIONS if self.options.get(k)}
        if len(given) > 1:
            raise InvalidArgumentError(
                f"{' and '.join(QUERY_TYPE_OPTIONS)} name different query types",
                field="query_type",
            )
        return check_query_type(given.pop() if given else SNAPSHOT)

    def _tasks(self) -> int:
        text = self.options.get("tasks")
        if text is None:
            return 2 * (os.cpu_count() or 1)
        if not str(text).isdigit() or int(text) < 1:
            raise InvalidArgumentError(f"must be a positive integer, got {text!r}", field="tasks")
        return int(text)
