"""Writers vs a pending clustering plan: updates and deletes of its file groups are
refused naming the plan (or roll it back first when asked), inserts elsewhere proceed and
leave the plan pending, and hudi-rs reads the table unchanged while the plan waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark.clikit import Cli, refused_in_one_line
from spark.sparkkit import SCHEMA, assert_readers_agree, local_frame, timeline_listing
from tidemark.clustering.strategy import PartitionFilter, PlanOptions
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.services.planner.config import PlannerConfig
from tidemark.services.planner.engine import PlannerEngine
from tidemark.table.clustering_plan import PendingPlan, pending_plans
from tidemark.table.table import HoodieTable

DATA = ["id", "name", "part", "ts"]
CREATE: dict[str, Any] = {
    "record_key_fields": ["id"],
    "partition_fields": ["part"],
    "precombine_field": "ts",
    "sort_mode": "global_sort",
}


def _write(
    spark: SparkSession, uri: str, op: str, rows: list[tuple], **options: Any
) -> WriteResult:
    return write(spark, local_frame(spark, rows, SCHEMA), uri, op, WriteOptions(**options))


def _schedule(uri: str, partition: str) -> PendingPlan:
    engine = PlannerEngine(PlannerConfig())
    try:
        options = PlanOptions(partitions=PartitionFilter.listed([partition]))
        result = engine.schedule(uri, options)
    finally:
        engine.close()
    assert result.plan is not None, result.reason
    return result.plan


def test_writers_and_a_pending_plan(
    spark: SparkSession, table_uri: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _write(
        spark,
        table_uri,
        "bulk_insert",
        [(i, f"n{i}", "a" if i < 5 else "b", 0) for i in range(10)],
        **CREATE,
    )
    _write(
        spark,
        table_uri,
        "bulk_insert",
        [(i, f"n{i}", "a" if i < 15 else "b", 0) for i in range(10, 20)],
        sort_mode="global_sort",
    )
    before = assert_readers_agree(table_uri, DATA)
    plan = _schedule(table_uri, "a")
    assert {p for p, _ in plan.plan.file_groups()} == {"a"} and plan.plan.num_slices == 2
    assert assert_readers_agree(table_uri, DATA) == before

    timeline = timeline_listing(table_uri)
    cli = Cli(tmp_path, capfd)
    code, err = cli.write(
        table_uri, [{"id": 1, "name": "changed", "part": "a", "ts": 1}], "--op", "upsert"
    )
    refusal = refused_in_one_line(code, err)
    assert refusal.startswith("clustering: Not allowed to update the clustering file group")
    assert f"pending clustering plan {plan.timestamp}" in refusal
    with pytest.raises(FailedPreconditionError, match=plan.timestamp):
        _write(spark, table_uri, "delete", [(2, "x", "a", 1)])
    with pytest.raises(FailedPreconditionError, match=plan.timestamp):
        _write(spark, table_uri, "insert_overwrite", [(3, "x", "a", 1)])
    assert [p for p in timeline_listing(table_uri) if "/" not in p.removeprefix(".hoodie/")] == [
        p for p in timeline if "/" not in p.removeprefix(".hoodie/")
    ]
    assert assert_readers_agree(table_uri, DATA) == before

    inserted = _write(
        spark,
        table_uri,
        "upsert",
        [(100, "new-a", "a", 1), (101, "new-b", "b", 1), (17, "b-update", "b", 1)],
    )
    assert (inserted.rows_inserted, inserted.rows_updated) == (2, 1)
    (still,) = pending_plans(HoodieTable.open(table_uri))
    assert still == plan
    live = {
        (f.partition_path, f.file_id): f.instant
        for f in HoodieTable.open(table_uri).view().latest_base_files()
    }
    assert all(live[key] < plan.timestamp for key in plan.plan.file_groups())
    rows = assert_readers_agree(table_uri, DATA)
    assert [rows[k]["name"] for k in ("100", "101", "17")] == ["new-a", "new-b", "b-update"]

    with pytest.raises(InvalidArgumentError, match="on_pending_clustering"):
        _write(spark, table_uri, "upsert", [(1, "x", "a", 1)], on_pending_clustering="ignore")

    cli = Cli(tmp_path, capfd)
    code, err = cli.write(
        table_uri, [{"id": 4, "name": "cli", "part": "a", "ts": 2}], "--op", "upsert"
    )
    assert f"pending clustering plan {plan.timestamp}" in refused_in_one_line(code, err)
    code, err = cli.write(
        table_uri,
        [{"id": 4, "name": "cli", "part": "a", "ts": 2}],
        "--op",
        "upsert",
        "--on-pending-clustering",
        "rollback",
    )
    assert code == 0, err
    table = HoodieTable.open(table_uri)
    assert pending_plans(table) == []
    (undone,) = [
        metadata
        for _, metadata in table.timeline.rollbacks()
        if metadata.instants_rollback[0].commit_time == plan.timestamp
    ]
    assert undone.instants_rollback[0].action == "replacecommit"
    assert assert_readers_agree(table_uri, DATA)["4"]["name"] == "cli"
