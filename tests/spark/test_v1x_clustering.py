"""Clustering and the record index on table versions 8 and 9 (timeline layout 2), on a
table Hudi 1.0 or 1.1 wrote and on a table Tidemark created at each version: the index is
built, a bulk_insert adds a file group to every partition, the planner service schedules
the small files as a ``clustering`` instant, ``cluster run`` completes it as
``<requested>_<completion>.replacecommit``, and an upsert tagged through the index service
lands where the model says. hudi-rs reads exactly the model's rows and the index holds
exactly the snapshot's keys after every step."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from table.v1x_testkit import unzip_fixture

from spark.indexkit import assert_index_agrees
from spark.sparkkit import SCHEMA, hudi_rs_table, snapshot
from tidemark.cli import main
from tidemark.jobs.index_build import build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table.instant import REPLACE_COMMIT
from tidemark.table.keys import META_COLUMNS
from tidemark.table.table import HoodieTable


@dataclass(frozen=True)
class Case:
    """A table (a Hudi-written fixture, or ``new`` at ``version``) and its columns."""

    table: str
    key: str
    ordering: str
    partition: str
    field: str
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
        write(spark, spark.createDataFrame(first, SCHEMA), uri, "bulk_insert", options)
        return uri


CASES = [
    Case("v8_simplekeygen_nonhivestyle", "id", "longField", "byteField", "name"),
    Case("v9_txns_simple_nometa", "txn_id", "txn_ts", "region", "merchant_name"),
    Case("new", "id", "ts", "part", "name", version=8),
    Case("new", "id", "ts", "part", "name", version=9),
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
    key = case.key
    current = snapshot(uri)
    schema = current.drop_columns(list(META_COLUMNS)).schema
    model = data(current, key)
    build_index(spark, HoodieTable.open(uri), IndexBuildOptions(shards=2))
    assert_index_agrees(uri)

    one_per_partition = {row[case.partition]: row for row in model.values()}.values()
    fresh = [{**row, key: _new_key(row[key]), case.field: "fresh"} for row in one_per_partition]
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
    newer = {**model[first], case.ordering: model[first][case.ordering] + 1000}
    newer[case.field] = "newer"
    brand_new = {**newer, key: _new_key(_new_key(first)), case.field: "brand new"}
    upserted = write_rows(spark, uri, [newer, brand_new], schema, "upsert")
    assert (upserted.rows_updated, upserted.rows_inserted, upserted.tagging) == (1, 1, "record")
    model |= {first: newer, brand_new[key]: brand_new}
    assert_readers_read(uri, model, key)
    assert_index_agrees(uri)
    completed = HoodieTable.open(uri).timeline.completed()
    assert completed[-1].completed_at > done.completed_at


def _new_key(key: Any) -> Any:
    return f"{key}-new" if isinstance(key, str) else 1000 + key
