"""Upserts, deletes and inserts into tables Hudi 1.0 and 1.1 wrote (event-time ordered:
the greater ordering value wins), through ``tidemark write``; hudi-rs and Tidemark read
the rows the model expects after each step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from table.v1x_testkit import unzip_fixture

from spark.sparkkit import hudi_rs_table, snapshot
from tidemark.cli import main
from tidemark.table import HoodieTable
from tidemark.table.records.keys import META_COLUMNS

CASES = [
    ("v9_txns_simple_nometa", "txn_id", "txn_ts", "merchant_name"),
    ("v8_simplekeygen_nonhivestyle", "id", "longField", "name"),
]


def data(table: pa.Table | None) -> dict[Any, dict[str, Any]]:
    assert table is not None
    kept = table.drop_columns([c for c in META_COLUMNS if c in table.column_names])
    return {row[kept.column_names[0]]: row for row in kept.to_pylist()}


def write(root: Path, rows: list[dict[str, Any]], schema: pa.Schema, op: str) -> None:
    batch = root.parent / f"batch-{op}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), batch)
    argv = ["write", "--table", str(root), "--input", str(batch), "--op", op]
    assert main([*argv, "--markers", "direct"]) == 0


@pytest.mark.parametrize(("name", "key", "ordering", "field"), CASES)
def test_event_time_ordered_fixture_takes_upserts_deletes_and_inserts(
    spark: SparkSession, tmp_path: Path, name: str, key: str, ordering: str, field: str
) -> None:
    root = unzip_fixture(name, tmp_path)
    current = snapshot(str(root))
    schema = current.drop_columns(list(META_COLUMNS)).schema
    model = {row[key]: row for row in current.drop_columns(list(META_COLUMNS)).to_pylist()}
    assert HoodieTable.open(str(root)).config.orders_by_event_time
    first, second, third = sorted(model)[:3]
    newer = {**model[first], ordering: model[first][ordering] + 1000, field: "newer"}
    older = {**model[second], ordering: model[second][ordering] - 1000, field: "older"}
    write(root, [newer, older], schema, "upsert")
    model[first] = newer  # the stored record of `second` orders later: it stays
    assert data(snapshot(str(root))) == model
    assert data(hudi_rs_table(str(root))) == model
    write(root, [model[third]], schema, "delete")
    del model[third]
    fresh_key = f"{first}-new" if isinstance(first, str) else 1000 + first
    fresh = {**model[first], key: fresh_key, field: "fresh"}
    write(root, [fresh], schema, "upsert")
    model[fresh_key] = fresh
    assert data(snapshot(str(root))) == model
    assert data(hudi_rs_table(str(root))) == model
    timeline = HoodieTable.open(str(root)).timeline
    ours = timeline.completed()[-3:]
    assert all(i.completion_time and i.completion_time > i.timestamp for i in ours)
    assert [i.completed_at for i in timeline.completed()] == sorted(
        i.completed_at for i in timeline.completed()
    )
