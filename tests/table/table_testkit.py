"""Helpers for the table library tests: a small test table, a Spark-like writer that
writes base files with pyarrow, fixture copies, and hudi-rs as the oracle."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hudi import HudiReadOptions, HudiTableBuilder

from tidemark.cli import main
from tidemark.clients.marker import marker_writer_for
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import base_file_name, join_path, new_file_id, write_token
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.metadata.commit import NULL_COMMIT, CommitMetadata, WriteStat
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import (
    FILE_NAME,
    RECORD_KEY,
    partition_paths,
    record_keys,
    with_meta_columns,
)
from tidemark.table.records.schema import arrow_to_avro_schema
from tidemark.table.timeline.archived import COMPLETED
from tidemark.table.timeline.instant import new_instant_time
from tidemark.table.timeline.lsm import LsmTimeline
from tidemark.table.timeline.versions import archived_log
from tidemark.table.writes.commit import complete_commit
from tidemark.table.writes.markers import IOType, MarkerSpec, StorageMarkerReader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-v6"
FIXTURE_NAMES = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
SCHEMA = pa.schema(
    [("id", pa.int64()), ("name", pa.string()), ("region", pa.string()), ("score", pa.float64())]
)


def rows(*records: tuple[int, str, str, float]) -> pa.Table:
    return pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, record, strict=True)) for record in records], schema=SCHEMA
    )


def sorted_rows(table: pa.Table, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows (of ``columns``, default all) in a stable order."""
    selected = table.select(columns) if columns is not None else table
    return sorted(selected.to_pylist(), key=lambda row: (str(row.get(RECORD_KEY)), str(row)))


def hudi_rs_rows(uri: str) -> list[dict[str, Any]]:
    return sorted_rows(hudi_rs_table(uri))


def hudi_rs_table(uri: str) -> pa.Table:
    """What hudi-rs reads; it leaves the (null) meta columns out of virtual-key tables."""
    batches = hudi_rs_builder(uri).build().read()
    return pa.Table.from_batches(batches) if batches else pa.table({})


def hudi_rs_read_optimized(uri: str, as_of: str | None = None) -> pa.Table:
    """What hudi-rs reads in its read-optimized mode (each file group's latest base file,
    logs ignored), at ``as_of`` (default the latest)."""
    builder = hudi_rs_builder(uri).with_option("hoodie.read.use.read_optimized.mode", "true")
    options = HudiReadOptions().with_as_of_timestamp(as_of) if as_of else None
    batches = builder.build().read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def hudi_rs_builder(uri: str) -> HudiTableBuilder:
    """hudi-rs on ``uri``, pointed at the local S3 server for ``s3://`` tables."""
    builder = HudiTableBuilder.from_base_uri(uri)
    if not uri.startswith("s3://"):
        return builder
    return builder.with_storage_options(
        {
            "aws_endpoint_url": os.environ["AWS_ENDPOINT_URL"],
            "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
            "aws_region": os.environ["AWS_DEFAULT_REGION"],
            "aws_allow_http": "true",
        }
    )


def archived_completed(table: HoodieTable) -> list[tuple[str, str]]:
    """(requested time, action) of each completed instant the table's archive lists (the
    archived log on version 6, the LSM history on 8 and 9), repeats included."""
    if isinstance(table.archive, LsmTimeline):
        return [(i.timestamp, i.action) for i in table.archive.instants()]
    entries = archived_log(table.archive).instants()
    return [(i.timestamp, i.action) for i in entries if i.state == COMPLETED]


def copy_fixture(name: str, destination: Path) -> str:
    target = destination / name
    shutil.copytree(FIXTURES / name, target)
    return str(target)


def set_property(root: Path, key: str, value: str) -> None:
    """Set ``key`` in the table's hoodie.properties as Hudi writes it (before the checksum)."""
    path = root / ".hoodie" / "hoodie.properties"
    lines = [line for line in path.read_text().splitlines() if not line.startswith(f"{key}=")]
    at = next(i for i, line in enumerate(lines) if line.startswith("hoodie.table.checksum="))
    lines.insert(at, f"{key}={value}")
    path.write_text("\n".join(lines) + "\n")


def file_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to prove nothing changed)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def upload_fixture(name: str, uri: str) -> str:
    storage = open_storage(uri)
    for path in (FIXTURES / name).rglob("*"):
        if path.is_file():
            storage.write(path.relative_to(FIXTURES / name).as_posix(), path.read_bytes())
    return uri


class Writer:
    """Writes commits the way the Spark job does (one file group per partition), with
    pyarrow instead of Spark, through the public table API."""

    def __init__(self, table: HoodieTable) -> None:
        self.table = table

    def begin(self) -> str:
        instant = new_instant_time(after=self.table.timeline.latest_timestamp())
        self.table.timeline.create_requested(instant, COMMIT)
        self.table.timeline.transition_inflight(instant, COMMIT)
        return instant

    def write_files(self, instant: str, data: pa.Table, *, attempt: int = 0) -> list[WriteStat]:
        config = self.table.config
        storage = self.table.storage
        keys = record_keys(data, config)
        partitions = partition_paths(data, config)
        markers = marker_writer_for(MarkerSpec("direct", self.table.uri, instant))
        current = {f.partition_path: f for f in self.table.view().latest_base_files()}
        stats = []
        for task, partition in enumerate(sorted(set(partitions.to_pylist()))):
            selected = pc.equal(partitions, partition)
            new_keys = keys.filter(selected)
            previous = current.get(partition)
            file_id = previous.file_id if previous else new_file_id()
            name = base_file_name(file_id, write_token(task, 1, attempt), instant)
            io_type = IOType.MERGE if previous else IOType.CREATE
            markers.create(partition, name, io_type)
            fresh = with_meta_columns(
                data.filter(selected),
                instant=instant,
                task_partition_id=task,
                keys=new_keys,
                partition_path=partition,
                file_name=name,
            )
            merged = fresh
            updates = 0
            if previous is not None:
                old = pq.read_table(storage.open_input(previous.path))
                replaced = pc.is_in(old.column(RECORD_KEY), value_set=new_keys)
                updates = pc.sum(replaced).as_py() or 0
                kept = old.filter(pc.invert(replaced))
                kept = kept.set_column(
                    kept.schema.get_field_index(FILE_NAME),
                    FILE_NAME,
                    pa.array([name] * kept.num_rows, pa.string()),
                )
                merged = pa.concat_tables([kept, fresh.cast(kept.schema)])
            path = join_path(partition, name)
            with storage.open_output(path) as out:
                pq.write_table(merged, out)
            size = storage.size(path)
            stats.append(
                WriteStat(
                    file_id=file_id,
                    path=path,
                    prev_commit=previous.instant if previous else NULL_COMMIT,
                    num_writes=merged.num_rows,
                    num_deletes=0,
                    num_update_writes=updates,
                    num_inserts=fresh.num_rows - updates,
                    total_write_bytes=size,
                    file_size_in_bytes=size,
                    partition_path=partition,
                )
            )
        return stats

    def finish(self, instant: str, stats: list[WriteStat], schema: pa.Schema = SCHEMA) -> list[str]:
        avro = arrow_to_avro_schema(schema, self.table.config.name)
        metadata = CommitMetadata.from_write_stats(stats, "UPSERT", avro)
        return complete_commit(
            self.table, instant, COMMIT, metadata, StorageMarkerReader(self.table.storage)
        )

    def commit(self, data: pa.Table) -> str:
        instant = self.begin()
        self.finish(instant, self.write_files(instant, data), data.schema)
        return instant


def people_config(
    *, hive_style: bool = False, partition: tuple[str, ...] = ("region",), table_version: int = 6
) -> TableConfig:
    key = ("id",)
    return TableConfig(
        name="people",
        record_key_fields=key,
        partition_fields=partition,
        precombine_field="score",
        hive_style=hive_style,
        avro_schema=arrow_to_avro_schema(SCHEMA, "people"),
        key_generator_class=TableConfig.default_key_generator(key, partition),
        table_version=table_version,
    )


def create_people_cli(tmp_path: Path, *extra: str) -> tuple[int, str]:
    """``tidemark create`` of the people table (schema from a sample Parquet file,
    partitioned hive-style by region) with ``extra`` flags: its exit code and URI."""
    sample = tmp_path / "sample.parquet"
    pq.write_table(rows((1, "a", "eu", 1.0)), sample)
    uri = str(tmp_path / "people")
    command = ["create", "--table", uri, "--schema-from", str(sample), "--key", "id"]
    return main([*command, "--partition", "region", "--hive-style", *extra]), uri
