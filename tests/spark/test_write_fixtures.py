"""Upserts into copies of tables Apache Hudi wrote stay readable by hudi-rs."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import copy_fixture, hudi_rs_table, local_frame, snapshot
from tidemark.jobs.write import write
from tidemark.table.records.keys import FILE_NAME, META_COLUMNS

WRITABLE = [
    "v6_simplekeygen_nonhivestyle",
    "v6_complexkeygen_hivestyle",
    "v6_nonpartitioned",
    "v6_simplekeygen_nonhivestyle_overwritetable",
    "v6_timebasedkeygen_nonhivestyle",
]


def _batch(table: pa.Table) -> pa.Table:
    """Update intField of the lowest id, insert a copy of that row as id 5 named Eve."""
    data = table.drop_columns(list(META_COLUMNS)).sort_by("id")
    first = data.slice(0, 1)
    updated = first.set_column(
        first.schema.get_field_index("intField"), "intField", pa.array([999], pa.int32())
    )
    new = first.set_column(0, "id", pa.array([5], pa.int32()))
    new = new.set_column(new.schema.get_field_index("name"), "name", pa.array(["Eve"]))
    return pa.concat_tables([updated, new])


@pytest.mark.parametrize("name", WRITABLE)
def test_upsert_into_hudi_written_table(spark: SparkSession, tmp_path: Path, name: str) -> None:
    uri = copy_fixture(name, tmp_path)
    before = snapshot(uri)
    batch = _batch(before)
    write(spark, local_frame(spark, batch), uri, "upsert")
    after = hudi_rs_table(uri)
    assert after is not None
    rows = {row["id"]: row for row in after.to_pylist()}
    assert set(rows) == set(before.column("id").to_pylist()) | {5}
    lowest = min(before.column("id").to_pylist())
    assert rows[lowest]["intField"] == 999
    assert rows[5]["name"] == "Eve"
    unchanged = before.filter(pc.not_equal(before.column("id"), lowest))
    for row in unchanged.to_pylist():
        carried = rows[row["id"]]
        assert carried.pop(FILE_NAME).split("_")[0] == row.pop(FILE_NAME).split("_")[0]
        assert carried == row
    assert snapshot(uri).num_rows == after.num_rows
    paths = {row["id"]: row["_hoodie_partition_path"] for row in after.to_pylist()}
    assert paths[5] == paths[lowest]
