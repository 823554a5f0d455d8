"""Clustering and the record index on table versions 8 and 9 (timeline layout 2), on every
copy-on-write table with Parquet base files that Hudi 1.0 or 1.1 wrote in hudi-rs's test
data and on a table Tidemark created at each version: the index is built, a bulk_insert
adds a file group to every partition, the planner service schedules the small files as a
``clustering`` instant, ``cluster run`` completes it as
``<requested>_<completion>.replacecommit``, and an upsert tagged through the index service
lands where the model says. hudi-rs reads exactly the model's rows and the index holds
exactly the snapshot's keys after every step. One test walks each table through every
step (a table per step would cost its setup again). The tables Tidemark must not rewrite
(Hudi's indexes or metadata table) are refused in one line and left unchanged."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from table.table_testkit import file_tree, set_property
from table.v1x_testkit import PARQUET_TABLES, unzip_fixture

from spark.indexkit import assert_index_agrees
from spark.sparkkit import SCHEMA, hudi_rs_table, local_frame, snapshot
from tidemark.cli import main
from tidemark.errors import FailedPreconditionError
from tidemark.jobs.index_build import build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import REPLACE_COMMIT
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import META_COLUMNS

INDEX_DEFS = "hoodie.table.index.defs.path"
REFUSED = [
    "v9_timebasedkeygen_epochmillis",
    "v9_timebasedkeygen_nonhivestyle",
    "v9_timebasedkeygen_unixtimestamp",
    "v9_txns_complex_meta",
    "v9_txns_nonpart_meta",
    "v9_txns_simple_meta",
    "v9_txns_simple_overwrite",
]
"""Fixtures with Hudi's index definitions (secondary or expression indexes and the record
index in Hudi's metadata table), which a rewrite would leave stale."""
SEEDS = {
    "v8_empty": [
        {"id": 1, "name": "one", "isActive": True},
        {"id": 2, "name": "two", "isActive": False},
    ]
}
"""First rows of a fixture with none (the walk's later rows copy live ones)."""


@dataclass(frozen=True)
class Case:
    """A table: a Hudi-written fixture, or ``new`` at ``version``."""

    table: str
    version: int = 0

    def make(self, spark: SparkSession, root: Path) -> str:
        if self.table != "new":
            return str(unzip_fixture(self.table, root))
        uri = str(root / f"new_v{self.version}")
        first = [(k, f"v{k}", "ab"[k % 2], 1) for k in range(6)]
        options = WriteOptions(
            record_key_fields=["id"],
            partition_fields=["part"],
            precombine_field="ts",
            table_version=self.version,
        )
        write(spark, local_frame(spark, first, SCHEMA), uri, "bulk_insert", options)
        return uri


CASES = [
    *(Case(name) for name in PARQUET_TABLES if name not in REFUSED),
    Case("new", version=8),
    Case("new", version=9),
]


def data(table: pa.Table | None, key: str) -> dict[Any, dict[str, Any]]:
    """Rows by key without the meta columns (hudi-rs gives none for virtual-key tables)."""
    assert table is not None
    kept = table.drop_columns([c for c in META_COLUMNS if c in table.column_names])
    return {row[key]: row for row in kept.to_pylist()}


def assert_readers_read(uri: str, model: dict[Any, dict[str, Any]], key: str) -> None:
    assert data(hudi_rs_table(uri), key) == model
    assert data(snapshot(uri), key) == model


def write_rows(
    spark: SparkSession, uri: str, rows: list[dict[str, Any]], schema: pa.Schema, op: str
) -> WriteResult:
    batch = Path(uri).parent / f"batch-{op}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), batch)
    return write(spark, spark.read.parquet(str(batch)), uri, op)


@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: c.table if c.version == 0 else f"new-v{c.version}"
)
def test_index_then_planned_clustering_then_a_tagged_upsert(
    spark: SparkSession, tmp_path: Path, case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = case.make(spark, tmp_path)
    config = HoodieTable.open(uri).config
    key = config.record_key_fields[0]
    current = snapshot(uri)
    schema = current.drop_columns(list(META_COLUMNS)).schema
    model = data(current, key)
    build_index(spark, HoodieTable.open(uri), IndexBuildOptions(shards=2))
    assert_index_agrees(uri)

    if not model:  # an empty table: its first rows, checked new through the index
        seeded = write_rows(spark, uri, SEEDS[case.table], schema, "bulk_insert")
        assert (seeded.rows_inserted, seeded.tagging) == (len(SEEDS[case.table]), "record")
        model = data(pa.Table.from_pylist(SEEDS[case.table], schema=schema), key)
    by_partition = {tuple(row[f] for f in config.partition_fields): row for row in model.values()}
    fresh = [{**row, key: _new_key(row[key])} for row in by_partition.values()]
    added = write_rows(spark, uri, fresh, schema, "bulk_insert")
    assert (added.rows_inserted, added.tagging) == (len(fresh), "record")
    model |= {row[key]: row for row in fresh}
    assert_index_agrees(uri)

    live = len(HoodieTable.open(uri).view().latest_base_files())
    assert main(["cluster", "schedule", "--table", uri, "--json"]) == 0
    planned = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    instant = planned["instant"]
    assert planned["files"] == live  # every partition has two small files or more
    pending = HoodieTable.open(uri).timeline.find(instant)
    assert pending.path == f".hoodie/timeline/{instant}.clustering.requested"
    master = str(spark.sparkContext.master)
    run = ["cluster", "run", "--table", uri, "--markers", "direct", "--master", master]
    assert main([*run, "--json"]) == 0
    [ran] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["plans"]
    assert ran["instant"] == instant and ran["files_replaced"] == planned["files"]
    timeline = HoodieTable.open(uri).timeline
    done = timeline.find(instant)
    assert done.action == REPLACE_COMMIT and done.completion_time is not None
    assert done.path == f".hoodie/timeline/{instant}_{done.completion_time}.replacecommit"
    assert timeline.pending() == []
    assert_readers_read(uri, model, key)
    assert_index_agrees(uri)

    first = sorted(model)[0]
    newer = _newer(model[first], config, schema)
    brand_new = {**newer, key: _new_key(_new_key(first))}
    upserted = write_rows(spark, uri, [newer, brand_new], schema, "upsert")
    assert (upserted.rows_updated, upserted.rows_inserted, upserted.tagging) == (1, 1, "record")
    model |= {first: newer, brand_new[key]: brand_new}
    assert_readers_read(uri, model, key)
    assert_index_agrees(uri)
    completed = HoodieTable.open(uri).timeline.completed()
    assert completed[-1].completed_at > done.completed_at


def _new_key(key: Any) -> Any:
    return f"{key}-new" if isinstance(key, str) else 1000 + key


def _newer(row: dict[str, Any], config: TableConfig, schema: pa.Schema) -> dict[str, Any]:
    """``row`` with a greater ordering value (when the table orders by one) and its first
    text column that is neither key nor partition set to ``newer``."""
    changed = dict(row)
    if config.precombine_field:
        changed[config.precombine_field] += 1000
    kept = {*config.record_key_fields, *config.partition_fields}
    text = [f.name for f in schema if pa.types.is_string(f.type) and f.name not in kept]
    if text:
        changed[text[0]] = "newer"
    assert changed != row
    return changed


def _refused(argv: list[str], field: str, capsys: pytest.CaptureFixture[str]) -> str:
    """The command exits 2 with one line naming ``field``; returns the line."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"tidemark {argv[0]}: error: {field}: "), line
    return line


@pytest.mark.parametrize("name", REFUSED)
def test_a_fixture_with_hudi_indexes_is_not_clustered(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unzip_fixture(name, tmp_path)
    before = file_tree(root)
    _refused(["cluster", "schedule", "--table", str(root)], INDEX_DEFS, capsys)
    assert file_tree(root) == before


def test_a_pending_plan_on_a_table_with_hudi_indexes_is_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clustering Hudi left pending is not run while the table has Hudi's index
    definitions, nor while it has Hudi's metadata table (which a write removes, with the
    caller's consent)."""
    root = unzip_fixture("v9_txns_simple_meta", tmp_path)
    clustered = HoodieTable.open(str(root)).timeline.find("20260307162454799")
    (root / ".hoodie/timeline" / clustered.file_name).unlink()  # pending again
    before = file_tree(root)
    run = ["cluster", "run", "--table", str(root), "--markers", "direct"]
    _refused(run, INDEX_DEFS, capsys)
    assert file_tree(root) == before
    set_property(root, INDEX_DEFS, "")
    before = file_tree(root)
    line = _refused(run, "hoodie.table.metadata.partitions", capsys)
    assert "a write with --disable-hudi-metadata-table removes it" in line
    assert file_tree(root) == before


def test_index_build_refuses_a_fixture_holding_a_key_twice(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Hudi 1.1's inserts left TXN-001 in two file groups of one partition (hudi-rs reads
    both rows): a record index cannot map it, so the build is refused naming it."""
    root = unzip_fixture("v9_timebasedkeygen_epochmillis", tmp_path)
    read = hudi_rs_table(str(root))
    assert read is not None and read.column("txn_id").to_pylist().count("TXN-001") == 2
    refusal = r"key 'TXN-001' is in file group .* violates key uniqueness"
    with pytest.raises(FailedPreconditionError, match=refusal):
        build_index(spark, HoodieTable.open(str(root)), IndexBuildOptions(shards=2))
