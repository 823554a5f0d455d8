"""Helpers for the planner tests: tables with many file groups of chosen sizes, written
through the public table API (pyarrow, no Spark), and the timeline as a comparable set."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
from table.table_testkit import SCHEMA, people_config

from tidemark.rpc.process import ServeProcess
from tidemark.table import HoodieTable
from tidemark.testing.tables import commit_file_groups


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
    next_id = 1 + sum(f.size for f in table.view().latest_base_files())
    files = []
    for region, counts in sorted(rows_per_file.items()):
        for count in counts:
            files.append((region, people(next_id, count, region)))
            next_id += count
    return commit_file_groups(table, files, "UPSERT")


VERSIONS = [6, 8, 9]
"""Every table version the planner serves."""


def new_table(root: Path, rows_per_file: dict[str, list[int]], version: int = 6) -> HoodieTable:
    config = dataclasses.replace(people_config(), table_version=version)
    table = HoodieTable.create(str(root / "people"), config)
    add_file_groups(table, rows_per_file)
    return table


def hoodie_files(table: HoodieTable) -> dict[str, bytes]:
    """Every file under ``.hoodie`` (timeline, lock, policies) with its bytes."""
    base = Path(table.uri) / ".hoodie"
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in base.rglob("*") if p.is_file()}


def serve_planner(env: Mapping[str, str] | None = None) -> ServeProcess:
    """``tidemark serve planner`` in a child process, on free gRPC and metrics ports."""
    return ServeProcess("planner", env=env)
