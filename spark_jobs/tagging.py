"""Index lookup for upsert and delete: Hudi's GLOBAL_SIMPLE index.

Existing keys are read from the latest slices (only the columns keys come from, in the
executors, through storage; ``tidemark.table.records.keys.stored_record_keys`` derives them in
tables with virtual keys): base files as they are, and on merge-on-read tables a slice with
log files merged with them, so a key a log deleted or moved to another partition is not
found where its base file still holds it. They are joined with the incoming keys, giving
each known key its current partition path and file group; an index build writes them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from tidemark.jobs.task import storage_for
from tidemark.storage import Storage
from tidemark.table import HoodieTable
from tidemark.table.files.merge import read_slice
from tidemark.table.files.reader import snapshot_schema
from tidemark.table.files.view import BaseFile, FileSlice, FileSystemView
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.avro_names import INTERNAL_COLUMN_PREFIX
from tidemark.table.records.keys import RECORD_KEY, key_source_columns, stored_record_keys

OLD_PARTITION = f"{INTERNAL_COLUMN_PREFIX}old_partition"
OLD_FILE_ID = f"{INTERNAL_COLUMN_PREFIX}old_file_id"
FILE_INSTANT = f"{INTERNAL_COLUMN_PREFIX}file_instant"
_LOCATION_COLUMNS = [RECORD_KEY, OLD_PARTITION, OLD_FILE_ID, FILE_INSTANT]
_LOCATION_DDL = ", ".join(f"{name} string" for name in _LOCATION_COLUMNS)


def existing_keys(
    spark: SparkSession, table_uri: str, config: TableConfig, base_files: Sequence[BaseFile]
) -> DataFrame:
    """(record key, partition path, file id, instant of the file) of every record in
    ``base_files``: what tagging joins with and what an index build writes."""
    listing = [(f.path, f.partition_path, f.file_id, f.instant) for f in base_files]
    slices = max(1, min(len(listing), spark.sparkContext.defaultParallelism))
    files = spark.createDataFrame(
        spark.sparkContext.parallelize(listing, slices),
        "path string, partition string, file_id string, instant string",
    )

    def read_keys(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = storage_for(table_uri)
        for batch in batches:
            for path, *location in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                keys = file_keys(storage, path, config)
                yield pa.RecordBatch.from_arrays(
                    [keys, *(pa.repeat(pa.scalar(value), len(keys)) for value in location)],
                    names=[RECORD_KEY, OLD_PARTITION, OLD_FILE_ID, FILE_INSTANT],
                )

    return files.mapInArrow(read_keys, _LOCATION_DDL)


@dataclass(frozen=True)
class LatestSlices:
    """The latest slices tagging and an index build read keys from: ``files``, base files
    read as they are (every slice of a copy-on-write table), and ``merged``, merge-on-read
    slices with log files, read merged with the blocks of ``deltacommits`` in ``schema``
    (the record key and the ordering field, what merging needs)."""

    files: list[BaseFile]
    merged: list[FileSlice] = field(default_factory=list)
    deltacommits: dict[str, str] = field(default_factory=dict)
    schema: pa.Schema | None = None

    def __len__(self) -> int:
        return len(self.files) + len(self.merged)

    def base_files(self) -> list[BaseFile]:
        """The slices' base files, sorted by partition then file id (as the view lists
        them; a group written only to logs has none)."""
        bases = [*self.files, *(s.base for s in self.merged if s.base is not None)]
        return sorted(bases, key=lambda f: (f.partition_path, f.file_id))

    def of(self, groups: set[tuple[str, str]]) -> LatestSlices:
        """Only the slices of ``groups`` (partition path, file id)."""
        return LatestSlices(
            [f for f in self.files if (f.partition_path, f.file_id) in groups],
            [s for s in self.merged if (s.partition_path, s.file_id) in groups],
            self.deltacommits,
            self.schema,
        )


def latest_slices(table: HoodieTable, view: FileSystemView | None = None) -> LatestSlices:
    """The latest slices of ``table`` (as of ``view``, else now) that keys are read from."""
    view = view or table.view()
    if not table.config.merge_on_read:
        return LatestSlices(view.latest_base_files())
    slices = view.latest_file_slices()
    full = snapshot_schema(table)
    config = table.config
    wanted = {RECORD_KEY, config.precombine_field if config.orders_by_event_time else None}
    return LatestSlices(
        files=[s.base for s in slices if s.base is not None and not s.logs],
        merged=[s for s in slices if s.logs],
        deltacommits=view.completed_deltacommits(),
        schema=pa.schema([f for f in full if f.name in wanted]),
    )


def slice_keys(
    spark: SparkSession, table_uri: str, config: TableConfig, slices: LatestSlices
) -> DataFrame:
    """``existing_keys`` of every record in ``slices``: base files as they are, merge-on-read
    slices with log files merged (a key a log deleted or moved is not there; one a log
    added is)."""
    keys = existing_keys(spark, table_uri, config, slices.files)
    if slices.merged:
        keys = keys.unionByName(_merged_keys(spark, table_uri, config, slices))
    return keys


def _merged_keys(
    spark: SparkSession, table_uri: str, config: TableConfig, files: LatestSlices
) -> DataFrame:
    """``existing_keys``' columns for the keys of each merged slice (a task per slice, up
    to a task per core); a slice of logs only stands at its first log's instant."""
    merged, deltacommits, schema = files.merged, files.deltacommits, files.schema
    assert schema is not None  # set with merged slices
    count = len(merged)
    indices = spark.sparkContext.parallelize(
        [(i,) for i in range(count)], max(1, min(count, spark.sparkContext.defaultParallelism))
    )

    def read_keys(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = storage_for(table_uri)
        for batch in batches:
            for index in batch.column(0).to_pylist():
                piece = merged[index]
                keys = read_slice(storage, piece, deltacommits, config, schema).column(RECORD_KEY)
                instant = piece.base.instant if piece.base else piece.logs[0].name.instant
                location = [piece.partition_path, piece.file_id, instant]
                columns = [keys.combine_chunks(), *(pa.repeat(v, len(keys)) for v in location)]
                yield pa.RecordBatch.from_arrays(columns, names=_LOCATION_COLUMNS)

    return spark.createDataFrame(indices, "slice int").mapInArrow(read_keys, _LOCATION_DDL)


def file_keys(storage: Storage, path: str, config: TableConfig) -> pa.Array:
    """The record keys of one base file, reading only the columns they come from."""
    with storage.open_input(path) as stream:
        stored = pq.read_table(stream, columns=key_source_columns(config))
    return stored_record_keys(stored, config)


def tag(keyed: DataFrame, existing: DataFrame | None) -> DataFrame:
    """``keyed`` plus the old location of each key (null columns for new keys)."""
    if existing is None:
        return keyed.withColumn(OLD_PARTITION, sf.lit(None).cast("string")).withColumn(
            OLD_FILE_ID, sf.lit(None).cast("string")
        )
    return keyed.join(existing, on=RECORD_KEY, how="left").select(
        *keyed.columns, OLD_PARTITION, OLD_FILE_ID
    )
