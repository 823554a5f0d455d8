"""Reads and writes keep working on a Hudi-written table whose timeline holds what Hudi's
table services leave there: archived commits, a completed clean, a failed write that the
next write rolls back (its ``.rollback`` then on the timeline for later writes).

The timeline is shaped from ``v6_simplekeygen_nonhivestyle`` as Hudi's services would
leave it: the first commit's instant files moved out of the active timeline into an
archive log under ``.hoodie/archived/`` (made by ``hudi_archive``); a clean that deleted
the file slice the second commit superseded (its metadata is opaque to Tidemark, which
never reads it); a write that failed after requesting its instant.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from table.hudi_archive import archived_commit, write_archive

from spark.sparkkit import copy_fixture, hudi_rs_table, local_frame, snapshot
from tidemark.jobs.write import write
from tidemark.table import HoodieTable
from tidemark.table.records.keys import META_COLUMNS

FIRST = "20240418172802262"
SUPERSEDED = "10/97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_1-98-142_20240418172802262.parquet"
CLEAN = "20240418172805000"
FAILED = "20240418172806000"


def _shape_timeline(root: Path) -> None:
    meta = root / ".hoodie"
    for name in (f"{FIRST}.commit", f"{FIRST}.commit.requested", f"{FIRST}.inflight"):
        (meta / name).unlink()
    write_archive(meta / "archived", 1, archived_commit(FIRST))
    (root / SUPERSEDED).unlink()
    for name in (f"{CLEAN}.clean.requested", f"{CLEAN}.clean.inflight", f"{CLEAN}.clean"):
        (meta / name).write_bytes(b"Obj\x01clean-metadata")
    (meta / f"{FAILED}.commit.requested").write_bytes(b"")
    (meta / f"{FAILED}.inflight").write_bytes(b"")


def _names(table: pa.Table | None) -> dict[int, str]:
    assert table is not None
    return {row["id"]: row["name"] for row in table.to_pylist()}


def _row(table: pa.Table, key: int, name: str) -> pa.Table:
    data = table.drop_columns(list(META_COLUMNS))
    row = data.filter(pc.equal(data.column("id"), 1))
    row = row.set_column(0, "id", pa.array([key], pa.int32()))
    return row.set_column(row.schema.get_field_index("name"), "name", pa.array([name]))


def test_writes_over_archived_cleaned_and_failed_instants(
    spark: SparkSession, tmp_path: Path
) -> None:
    uri = copy_fixture("v6_simplekeygen_nonhivestyle", tmp_path)
    _shape_timeline(Path(uri))
    model = {1: "Alice", 2: "Bob", 3: "Carol", 4: "Diana"}
    assert _names(snapshot(uri)) == model
    assert _names(hudi_rs_table(uri)) == model
    before = snapshot(uri)

    first = write(spark, local_frame(spark, _row(before, 2, "Bobby")), uri, "upsert")
    model[2] = "Bobby"
    timeline = HoodieTable.open(uri).timeline
    actions = {(i.timestamp, i.action) for i in timeline.instants() if i.is_completed}
    assert (CLEAN, "clean") in actions
    assert any(action == "rollback" for _, action in actions)
    assert not any(i.timestamp == FAILED for i in timeline.pending())
    assert timeline.is_completed(first.instant)

    write(spark, local_frame(spark, _row(before, 5, "Eve")), uri, "upsert")
    model[5] = "Eve"
    assert _names(snapshot(uri)) == model
    assert _names(hudi_rs_table(uri)) == model
