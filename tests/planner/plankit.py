"""Helpers for the planner tests: tables with many file groups of chosen sizes, written
through the public table API (pyarrow, no Spark), and the timeline as a comparable set."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from table.table_testkit import SCHEMA, Writer, people_config

from tidemark.clients.marker import marker_writer_for
from tidemark.rpc.process import ServeProcess
from tidemark.table.commit_metadata import NULL_COMMIT, WriteStat
from tidemark.table.keys import partition_paths, record_keys, with_meta_columns
from tidemark.table.markers import IOType, MarkerSpec
from tidemark.table.naming import base_file_name, join_path, new_file_id, write_token
from tidemark.table.table import HoodieTable


def people(first_id: int, count: int, region: str) -> pa.Table:
    ids = list(range(first_id, first_id + count))
    return pa.Table.from_pydict(
        {
            "id": ids,
            "name": [f"person-{i:08d}" for i in ids],
            "region": [region] * count,
            "score": [float(i % 97) for i in ids],
        },
        schema=SCHEMA,
    )


def add_file_groups(table: HoodieTable, rows_per_file: dict[str, list[int]]) -> str:
    """Commit one new file group per entry of ``rows_per_file[partition]``, holding that
    many rows (so files of a partition differ in size); returns the instant."""
    writer = Writer(table)
    instant = writer.begin()
    markers = marker_writer_for(MarkerSpec("direct", table.uri, instant))
    next_id = 1 + sum(f.size for f in table.view().latest_base_files())
    stats = []
    for task, (region, counts) in enumerate(sorted(rows_per_file.items())):
        for count in counts:
            data = people(next_id, count, region)
            next_id += count
            file_id = new_file_id()
            name = base_file_name(file_id, write_token(task, 1, 0), instant)
            markers.create(region, name, IOType.CREATE)
            keys = record_keys(data, table.config)
            assert partition_paths(data, table.config).to_pylist()[0] == region
            fresh = with_meta_columns(
                data,
                instant=instant,
                task_partition_id=task,
                keys=keys,
                partition_path=region,
                file_name=name,
            )
            path = join_path(region, name)
            with table.storage.open_output(path) as out:
                pq.write_table(fresh, out)
            size = table.storage.size(path)
            stats.append(
                WriteStat(file_id, path, NULL_COMMIT, count, 0, 0, count, size, size, region)
            )
    writer.finish(instant, stats)
    return instant


def new_table(root: Path, rows_per_file: dict[str, list[int]]) -> HoodieTable:
    table = HoodieTable.create(str(root / "people"), people_config())
    add_file_groups(table, rows_per_file)
    return table


def hoodie_files(table: HoodieTable) -> dict[str, bytes]:
    """Every file under ``.hoodie`` (timeline, lock, policies) with its bytes."""
    base = Path(table.uri) / ".hoodie"
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in base.rglob("*") if p.is_file()}


def serve_planner(env: Mapping[str, str] | None = None) -> ServeProcess:
    """``tidemark serve planner`` in a child process, on free gRPC and metrics ports."""
    return ServeProcess("planner", env=env, args=["--metrics-port", "0"])
