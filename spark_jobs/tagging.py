"""Index lookup for upsert and delete: Hudi's GLOBAL_SIMPLE index.

Existing keys are read from the latest base files (only the columns keys come from, in the
executors, through storage; ``tidemark.table.records.keys.stored_record_keys`` derives them in
tables with virtual keys) and joined with the incoming keys, giving each known key its
current partition path and file group.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from tidemark.jobs.task import storage_for
from tidemark.storage import Storage
from tidemark.table.files.view import BaseFile
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.avro_names import INTERNAL_COLUMN_PREFIX
from tidemark.table.records.keys import RECORD_KEY, key_source_columns, stored_record_keys

OLD_PARTITION = f"{INTERNAL_COLUMN_PREFIX}old_partition"
OLD_FILE_ID = f"{INTERNAL_COLUMN_PREFIX}old_file_id"
FILE_INSTANT = f"{INTERNAL_COLUMN_PREFIX}file_instant"
_LOCATION_DDL = (
    f"{RECORD_KEY} string, {OLD_PARTITION} string, {OLD_FILE_ID} string, {FILE_INSTANT} string"
)


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
