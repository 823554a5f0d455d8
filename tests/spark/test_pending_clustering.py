"""Writers vs a pending clustering plan: asked to reject (Hudi's copy-on-write rule),
updates and deletes of its file groups are refused naming the plan (or roll it back first
when asked), inserts elsewhere proceed and leave the plan pending, and hudi-rs reads the
table unchanged while the plan waits. By default a write takes the file groups from the
plan, records what it took, and a plan scheduled after two were given up makes writers
wait for its run."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from structlog.testing import capture_logs

import tidemark.spark
from spark.clikit import Cli, refused_in_one_line
from spark.sparkkit import SCHEMA, assert_readers_agree, local_frame, timeline_listing
from tidemark.clustering.strategy import PartitionFilter, PlanOptions
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.services.planner.config import PlannerConfig
from tidemark.services.planner.engine import PlannerEngine
from tidemark.table import HoodieTable
from tidemark.table.plans.clustering import PendingPlan, pending_plans
from tidemark.table.writes.pending_clustering import (
    GIVEN_UP_KEY,
    GivenUp,
    given_up_since_clustering,
    is_protected,
)

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
        result = engine.schedule(HoodieTable.open(uri), options)
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
        table_uri,
        [{"id": 1, "name": "changed", "part": "a", "ts": 1}],
        "--op",
        "upsert",
        "--on-pending-clustering",
        "reject",
    )
    refusal = refused_in_one_line(code, err)
    assert refusal.startswith("clustering: Not allowed to update the clustering file group")
    assert f"pending clustering plan {plan.timestamp}" in refusal
    with pytest.raises(FailedPreconditionError, match=plan.timestamp):
        _write(spark, table_uri, "delete", [(2, "x", "a", 1)], on_pending_clustering="reject")
    with pytest.raises(FailedPreconditionError, match=plan.timestamp):
        _write(
            spark, table_uri, "insert_overwrite", [(3, "x", "a", 1)], on_pending_clustering="reject"
        )
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
        table_uri,
        [{"id": 4, "name": "cli", "part": "a", "ts": 2}],
        "--op",
        "upsert",
        "--on-pending-clustering",
        "reject",
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


def _given_up_in_last_commit(uri: str) -> list[GivenUp]:
    table = HoodieTable.open(uri)
    last = table.timeline.last_completed()
    assert last is not None
    extra = table.timeline.read_metadata(last).extra_metadata
    return GivenUp.decode_all(extra.get(GIVEN_UP_KEY, ""))


def _waiting_for(logs: Sequence[Mapping[str, Any]], plan: str) -> bool:
    return any(
        entry["event"] == "write.waiting_for_clustering" and entry["plan"] == plan
        for entry in list(logs)
    )


def test_plans_given_up_to_writers_are_told_and_the_third_is_waited_for(
    spark: SparkSession, table_uri: str
) -> None:
    """By default a write takes a pending plan's file groups and its commit says so;
    running the plan then explains what became of it; the planner lists and counts it;
    after two plans given up the next is protected: a write with nobody running it gives
    it up only at the end of its lock wait, and a write beside a runner waits for the
    clustering to commit."""
    _write(spark, table_uri, "bulk_insert", [(i, f"n{i}", "a", 0) for i in range(5)], **CREATE)
    _write(spark, table_uri, "bulk_insert", [(i, f"n{i}", "a", 0) for i in range(10, 15)])
    engine = PlannerEngine(PlannerConfig())
    options = PlanOptions(partitions=PartitionFilter.listed(["a"]))
    try:
        given_up = []
        for round_ in range(2):
            scheduled = engine.schedule(HoodieTable.open(table_uri), options).plan
            assert scheduled is not None and not is_protected(scheduled.plan)
            every_key = [(i, f"r{round_}", "a", 1) for i in (*range(5), *range(10, 15))]
            _write(spark, table_uri, "upsert", every_key)
            taken = len(scheduled.plan.file_groups())
            assert _given_up_in_last_commit(table_uri) == [
                GivenUp(scheduled.timestamp, taken, None)
            ]
            given_up.append(scheduled.timestamp)
        with pytest.raises(FailedPreconditionError, match="nothing was left to run") as told:
            tidemark.spark.cluster_run(spark, table_uri, given_up[0])
        assert f"{given_up[0]} was given up to writers" in str(told.value)
        pending, listed = engine.list_plans(HoodieTable.open(table_uri))
        assert pending == [] and [gone.record.plan for gone in listed] == given_up
        assert engine.counts["given_up"] == 2

        unrun = engine.schedule(HoodieTable.open(table_uri), options).plan
        assert unrun is not None and is_protected(unrun.plan)
        _write(spark, table_uri, "upsert", [(2, "late", "a", 2)], lock_wait_s=1.0)
        assert _given_up_in_last_commit(table_uri) == [GivenUp(unrun.timestamp, 1, None)]
        assert pending_plans(HoodieTable.open(table_uri)) == []

        waited_for = engine.schedule(HoodieTable.open(table_uri), options).plan
        assert waited_for is not None and is_protected(waited_for.plan)
        outcome: list[WriteResult | BaseException] = []

        def upsert() -> None:
            try:
                outcome.append(_write(spark, table_uri, "upsert", [(3, "waited", "a", 3)]))
            except BaseException as error:
                outcome.append(error)

        with capture_logs() as logs:
            writer = threading.Thread(target=upsert)
            writer.start()
            while not _waiting_for(logs, waited_for.timestamp) and writer.is_alive():
                writer.join(0.2)
            assert _waiting_for(logs, waited_for.timestamp), outcome
            (clustered,) = tidemark.spark.cluster_run(spark, table_uri, waited_for.timestamp)
            writer.join()
        (written,) = outcome
        assert isinstance(written, WriteResult), written
        assert written.instant > clustered.instant
        assert _given_up_in_last_commit(table_uri) == []
        assert given_up_since_clustering(HoodieTable.open(table_uri)) == []
    finally:
        engine.close()
    rows = assert_readers_agree(table_uri, DATA)
    assert [rows[k]["name"] for k in ("1", "2", "3", "11")] == ["r1", "late", "waited", "r1"]
