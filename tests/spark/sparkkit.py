"""Helpers for Spark job tests: the two readers (ours and hudi-rs) and file listings."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from table.table_testkit import hudi_rs_builder

from benchmarks.__main__ import main as bench_main
from tidemark.cli import main
from tidemark.faults import EXIT_AT_ENV, EXIT_CODE
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.leases.write_lease import WRITES_DIR
from tidemark.table.records.keys import META_COLUMNS, RECORD_KEY
from tidemark.testing.leases import outlive_lease

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hudi-v6"
SCHEMA = "id int, name string, part string, ts long"
TABLE_VERSIONS = (6, 8, 9)
"""Every Hudi table version a write creates (docs/hudi-versions.md)."""


def local_frame(spark: SparkSession, data: Any, schema: Any = None) -> DataFrame:
    """``spark.createDataFrame(data, schema)`` computed once into Spark's block manager
    (``localCheckpoint``). A DataFrame made from Python objects is a Python RDD whose rows
    pass through Python workers in every job; a write's emptiness check stops those tasks
    after a row, and PySpark kills a worker whose task stopped early, so every write made
    that way forked and imported four new workers (tests/spark/test_write_operations.py:
    86 forked workers -> 4, CPU 76 s -> 57 s). Inputs of pandas or Arrow are local
    relations already: they need no helper."""
    return spark.createDataFrame(data, schema).localCheckpoint()


def run_bench(
    spark: SparkSession, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[list[str], dict[str, Any]]:
    """``python -m benchmarks`` with ``argv`` on the tests' Spark master and ``--json``: the
    report's lines and the JSON line."""
    master = str(spark.sparkContext.master)
    assert bench_main([*argv, "--master", master, "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    return lines[:-1], json.loads(lines[-1])


def hudi_rs_table(uri: str) -> pa.Table | None:
    """What hudi-rs reads (None when the table has no rows)."""
    batches = hudi_rs_builder(uri).build().read()
    return pa.Table.from_batches(batches) if batches else None


def rows_by_key(table: pa.Table | None, columns: list[str] | None = None) -> dict[str, dict]:
    if table is None:
        return {}
    names = columns or table.column_names
    return {row[RECORD_KEY]: row for row in table.select(names).to_pylist()}


def snapshot(uri: str) -> pa.Table:
    return read_snapshot(HoodieTable.open(uri))


def assert_readers_agree(uri: str, data_columns: list[str]) -> dict[str, dict[str, Any]]:
    """Our reader and hudi-rs return the same rows, meta columns included; returns them."""
    columns = [*META_COLUMNS, *data_columns]
    ours = rows_by_key(snapshot(uri), columns)
    theirs = rows_by_key(hudi_rs_table(uri), columns)
    assert ours == theirs
    assert len(ours) == snapshot(uri).num_rows
    return ours


def data_files(uri: str) -> set[str]:
    """Every Parquet file under the table (committed or not)."""
    storage = open_storage(uri)
    return {
        info.path
        for info in storage.list("")
        if info.path.endswith(".parquet") and not info.path.startswith(".hoodie/")
    }


def table_bytes(uri: str) -> dict[str, bytes]:
    """Every file of the table (timeline, locks, markers and data) with its content: equal
    before and after a refused command when the command changed nothing."""
    storage = open_storage(uri)
    return {info.path: storage.read(info.path) for info in storage.list("")}


def files_in_view(uri: str) -> set[str]:
    return {f.path for f in HoodieTable.open(uri).view().latest_base_files()}


def timeline_listing(uri: str) -> list[str]:
    storage = open_storage(uri)
    return sorted(info.path for info in storage.list(".hoodie/"))


def copy_fixture(name: str, destination: Path) -> str:
    target = destination / name
    shutil.copytree(FIXTURES / name, target)
    return str(target)


def cli_write(uri: str, path: Path, op: str, *flags: str) -> int:
    """``tidemark write`` as a user runs it (direct markers keep the test short)."""
    argv = ["write", "--table", uri, "--input", str(path), "--op", op, "--markers", "direct"]
    return main([*argv, "--master", "local[2]", *flags])


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Rows written by Python's csv module (RFC 4180, ``\\r\\n`` line ends)."""
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def kill_writer_before_commit(
    table_uri: str, keys: str, *args: str, env: Mapping[str, str] | None = None
) -> None:
    """Run ``killed_writer.py`` (an upsert of ``keys``, comma-separated) in a child process
    that exits just before its commit, leaving its instant pending and its files written;
    its write's lease outlived (``outlive_lease``), as time frees it, so the next write
    rolls it back (one started while the lease is live leaves it: a running writer's)."""
    script = Path(__file__).with_name("killed_writer.py")
    killed = subprocess.run(
        [sys.executable, str(script), table_uri, keys, *args],
        env={**os.environ, **(env or {}), EXIT_AT_ENV: "before_commit"},
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == EXIT_CODE, killed.stderr.decode()[-2000:]
    storage = open_storage(table_uri)
    for instant in HoodieTable.open(table_uri).timeline.pending():
        outlive_lease(storage, lock_dir=f"{WRITES_DIR}/{instant.timestamp}")
