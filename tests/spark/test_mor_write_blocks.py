"""The data blocks of merge-on-read writes: Parquet (the default) or Avro
(``log_block_format``), each read exactly by hudi-rs and ``tidemark.spark.read``, and a
task's log files all marked before any of them is written."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from table.table_testkit import SCHEMA as PEOPLE
from table.table_testkit import people_config

import tidemark.spark
from spark.morkit import mor_options
from spark.sparkkit import hudi_rs_table
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.buckets import BUCKET, bucket_groups
from tidemark.jobs.context import WriteContext
from tidemark.jobs.log_file import SliceAppend, append_to_slices
from tidemark.jobs.task import TaskIdentity
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.files.view import BaseFile
from tidemark.table.logfiles.data_blocks import AVRO, DEFAULT_LOG_BLOCK_FORMAT, PARQUET
from tidemark.table.logfiles.file_names import is_log_file_name
from tidemark.table.logfiles.framing import BlockType, read_blocks
from tidemark.table.metadata.actions import DELTA_COMMIT
from tidemark.table.properties.support import MERGE_ON_READ
from tidemark.table.records.keys import META_COLUMNS
from tidemark.table.timeline.instant import new_instant_time
from tidemark.table.writes.markers import IOType, MarkerSpec, MarkerTuple

SCHEMA = (
    "id string, name string, ts long, region string, at timestamp, "
    "price decimal(10,2), tags array<string>"
)
COLUMNS = ["id", "name", "ts", "region", "at", "price", "tags"]
BLOCK_TYPES = {AVRO: BlockType.AVRO_DATA, PARQUET: BlockType.PARQUET_DATA}


def _row(i: int, version: int) -> tuple:
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
        minutes=i, microseconds=version
    )
    price = decimal.Decimal(f"{i}.{version:02}")
    return (f"k{i:03}", f"n{i}-{version}", version, "eu" if i % 2 else "us", at, price, [f"t{i}"])


def _rows(table: pa.Table | None) -> dict[str, tuple]:
    """By key; timestamps as naive UTC (hudi-rs gives them a UTC zone, Spark none)."""
    if table is None:
        return {}
    at = table.column_names.index("at")
    table = table.set_column(at, "at", table.column(at).cast(pa.timestamp("us")))
    return {r["id"]: tuple(r[c] for c in COLUMNS) for r in table.to_pylist()}


def _model(rows: list[tuple]) -> dict[str, tuple]:
    return {row[0]: (*row[:4], row[4].replace(tzinfo=None), *row[5:]) for row in rows}


@pytest.mark.parametrize("block_format", [PARQUET, AVRO])
def test_log_blocks_in_either_format_are_read_exactly(
    spark: SparkSession, tmp_path: Path, table_version: int, block_format: str
) -> None:
    root = tmp_path / "t"
    uri = str(root)
    options = mor_options(table_version, log_block_format=block_format)
    rows = [_row(i, 1) for i in range(40)]
    tidemark.spark.write(spark.createDataFrame(rows, SCHEMA), uri, "upsert", options=options)
    updates = [_row(i, 2) for i in range(0, 40, 3)]
    tidemark.spark.write(spark.createDataFrame(updates, SCHEMA), uri, "upsert", options=options)
    deleted = [row for row in rows if row[0] in ("k004", "k011")]
    tidemark.spark.write(spark.createDataFrame(deleted, SCHEMA), uri, "delete", options=options)
    model = _model(rows) | _model(updates)
    for row in deleted:
        del model[row[0]]

    logs = [p for p in root.rglob("*") if is_log_file_name(p.name)]
    first_blocks = {read_blocks(p.read_bytes())[0].block_type for p in logs}
    assert first_blocks == {BLOCK_TYPES[block_format], BlockType.DELETE}
    assert _rows(hudi_rs_table(uri)) == model
    assert _rows(tidemark.spark.read(spark, uri).toArrow()) == model


def test_parquet_blocks_are_the_default_and_an_unknown_format_is_refused() -> None:
    assert WriteOptions().log_block_format == DEFAULT_LOG_BLOCK_FORMAT == PARQUET
    with pytest.raises(InvalidArgumentError) as refused:
        WriteOptions(log_block_format="orc")
    assert refused.value.field == "log_block_format"


def test_a_tasks_rows_are_split_into_whole_buckets_across_batches() -> None:
    def batch(buckets: list[int]) -> pa.RecordBatch:
        return pa.record_batch({BUCKET: pa.array(buckets, pa.int32()), "n": range(len(buckets))})

    batches = [batch([1, 1, 2]), batch([]), batch([2, 2]), batch([5]), batch([7, 7, 9])]
    groups = [
        (bucket, rows.column("n").to_pylist()) for bucket, rows in bucket_groups(iter(batches))
    ]
    assert groups == [(1, [0, 1]), (2, [2, 0, 1]), (5, [0]), (7, [0, 1]), (9, [2])]


class _RecordingMarkers:
    """A MarkerWriter that records its calls and which log files existed at each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[tuple[list[str], int]] = []

    def create(self, partition_path: str, data_file_name: str, io_type: IOType) -> bool:
        return self.create_many([(partition_path, data_file_name, io_type)])[0]

    def create_many(self, markers: Sequence[MarkerTuple]) -> list[bool]:
        existing = sum(1 for p in self.root.rglob("*") if is_log_file_name(p.name))
        self.calls.append(([f"{p}/{name}.{io.value}" for p, name, io in markers], existing))
        return [True] * len(markers)


def test_a_tasks_log_files_are_marked_in_one_call_before_any_is_written(
    tmp_path: Path, table_version: int
) -> None:
    root = tmp_path / "t"
    config = replace(people_config(table_version=table_version), table_type=MERGE_ON_READ)
    table = HoodieTable.create(str(root), config)
    instant = new_instant_time()
    table.timeline.create_requested(instant, DELTA_COMMIT)
    table.timeline.transition_inflight(instant, DELTA_COMMIT)
    file_schema = pa.schema([pa.field(name, pa.string()) for name in META_COLUMNS] + list(PEOPLE))
    bases = [
        BaseFile(region, f"group-{n}", "20260101000000000", f"{region}/group-{n}.parquet", 1)
        for n, region in enumerate(["eu", "eu", "us"])
    ]
    appends = [
        SliceAppend(
            base,
            pa.table({name: pa.array([None], pa.string()) for name in META_COLUMNS})
            .append_column("id", pa.array([n], pa.int64()))
            .append_column("name", pa.array([f"n{n}"]))
            .append_column("region", pa.array([base.partition_path]))
            .append_column("score", pa.array([float(n)])),
            pa.array([f"gone{n}"]),
            n,
        )
        for n, base in enumerate(bases)
    ]
    markers = _RecordingMarkers(root)
    context = WriteContext(
        str(root),
        instant,
        DELTA_COMMIT,
        MarkerSpec("direct", str(root), instant),
        file_schema,
        config,
    )
    stats = append_to_slices(
        storage=table.storage,
        markers=markers,
        task=TaskIdentity(partition_id=3, stage_id=1, attempt_id=7),
        context=context,
        appends=appends,
    )
    io_type = IOType.APPEND if table_version == 6 else IOType.CREATE
    assert markers.calls == [([f"{s.path}.{io_type.value}" for s in stats], 0)]
    assert [s.file_id for s in stats] == ["group-0", "group-1", "group-2"]
    assert all((root / s.path).is_file() for s in stats)
    assert [s.num_update_writes for s in stats] == [1, 1, 1]
    assert [s.num_deletes for s in stats] == [1, 1, 1]
