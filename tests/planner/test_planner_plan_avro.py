"""Clustering plans are ``<ts>.replacecommit.requested`` files in Hudi 0.14's encoding:
the schema is the one Hudi itself embedded in a requested replacecommit of the fixture
table, fastavro reads our files with it, and writers leave pending plans alone."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import fastavro
import pytest
from fastavro.schema import to_parsing_canonical_form
from table.table_testkit import FIXTURES, Writer, hudi_rs_rows, people_config, rows

from tidemark.errors import ConflictError, FailedPreconditionError, InvalidArgumentError
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.metadata.actions import REPLACE_COMMIT
from tidemark.table.plans.clustering import (
    CLUSTER_OPERATION,
    EXECUTION_STRATEGY_CLASS,
    LAYOUT_PARAM,
    REQUESTED_REPLACE_SCHEMA,
    SORT_COLUMNS_PARAM,
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
    pending_plan,
    pending_plans,
    plan_of_request,
    save_plan,
)
from tidemark.table.timeline.instant import Instant, State, new_instant_time
from tidemark.table.writes.commit import rollback_failed_writes
from tidemark.table.writes.markers import StorageMarkerReader

HUDI_REQUEST = (
    FIXTURES
    / "v6_simplekeygen_nonhivestyle_overwritetable"
    / ".hoodie"
    / "20240707001303088.replacecommit.requested"
)


def hudi_schema() -> Any:
    """The HoodieRequestedReplaceMetadata schema Hudi 0.14 wrote into its own file."""
    with HUDI_REQUEST.open("rb") as stream:
        return fastavro.reader(stream).writer_schema


def read_record(data: bytes, schema: Any = None) -> dict[str, Any]:
    (record,) = fastavro.reader(io.BytesIO(data), reader_schema=schema)
    assert isinstance(record, dict)
    return record


def a_plan(partition: str = "eu", count: int = 3, layout: str = "zorder") -> ClusteringPlan:
    slices = tuple(
        SliceInfo(
            partition,
            f"fg-{i}-0",
            f"{partition}/fg-{i}-0_0-1-0_20240101000000000.parquet",
            1000 + i,
        )
        for i in range(count)
    )
    return ClusteringPlan(
        groups=(ClusteringGroup(slices, 2),),
        strategy=ClusteringStrategy(("name", "score"), layout, 64 * 1024 * 1024),
    )


def test_schema_is_the_one_hudi_embeds_in_its_requested_replacecommits() -> None:
    assert to_parsing_canonical_form(REQUESTED_REPLACE_SCHEMA) == to_parsing_canonical_form(
        hudi_schema()
    )


def test_round_trip_keeps_groups_sizes_and_strategy() -> None:
    plan = a_plan()
    decoded = ClusteringPlan.from_avro(plan.to_avro("s3://bucket/table"))
    assert decoded == plan
    assert decoded.size_bytes == 3003
    assert decoded.num_output_file_groups == 2


@pytest.mark.parametrize(
    ("layout", "hudi_value"), [("linear", "linear"), ("zorder", "z-order"), ("hilbert", "hilbert")]
)
def test_fastavro_reads_our_file_with_hudis_schema(layout: str, hudi_value: str) -> None:
    data = a_plan(layout=layout).to_avro("/data/people")
    record = read_record(data, hudi_schema())
    assert record["operationType"] == CLUSTER_OPERATION
    plan = record["clusteringPlan"]
    assert plan["preserveHoodieMetadata"] is True
    assert plan["strategy"]["strategyClassName"] == EXECUTION_STRATEGY_CLASS
    params = plan["strategy"]["strategyParams"]
    assert params[SORT_COLUMNS_PARAM] == "name,score"
    assert params[LAYOUT_PARAM] == hudi_value
    (group,) = plan["inputGroups"]
    assert group["numOutputFileGroups"] == 2
    assert group["metrics"]["TOTAL_IO_READ_MB"] == pytest.approx(3003 / 2**20)
    assert [s["dataFilePath"] for s in group["slices"]] == [
        f"/data/people/eu/fg-{i}-0_0-1-0_20240101000000000.parquet" for i in range(3)
    ]
    assert {s["partitionPath"] for s in group["slices"]} == {"eu"}


def test_a_merge_on_read_plan_names_each_slices_log_files_as_hudi_does() -> None:
    """``deltaFilePaths`` hold the logs' full paths (Hudi's ``HoodieSliceInfo``), decoded
    back to table-relative ones whatever the base's spelling; the group metrics count them."""
    logs = ("eu/.fg-1-0_20240101000000000.log.1_0-1-0", "eu/.fg-1-0_20240101000000000.log.2_0-1-0")
    plain = a_plan(count=2)
    first, second = plain.groups[0].slices
    plan = ClusteringPlan(
        (ClusteringGroup((first, second._replace(size_bytes=1301, logs=logs, log_bytes=300)), 1),),
        plain.strategy,
    )
    data = plan.to_avro("/data/people")
    (group,) = read_record(data, hudi_schema())["clusteringPlan"]["inputGroups"]
    assert [s["deltaFilePaths"] for s in group["slices"]] == [
        [],
        [f"/data/people/{log}" for log in logs],
    ]
    assert group["metrics"]["TOTAL_LOG_FILES"] == 2
    assert group["metrics"]["TOTAL_LOG_FILE_SIZE"] == 300
    assert ClusteringPlan.from_avro(data) == plan
    assert ClusteringPlan.from_avro(plan.to_avro("s3a://bucket/people")) == plan


def test_a_plan_hudi_wrote_without_our_metrics_decodes_with_size_zero() -> None:
    data = a_plan().to_avro("/t")
    record = read_record(data)
    record["clusteringPlan"]["inputGroups"][0]["metrics"] = {"TOTAL_IO_MB": 1.0}
    record["clusteringPlan"]["strategy"]["strategyParams"] = {}
    buffer = io.BytesIO()
    fastavro.writer(buffer, hudi_schema(), [record])
    plan = ClusteringPlan.from_avro(buffer.getvalue())
    assert [s.size_bytes for s in plan.groups[0].slices] == [0, 0, 0]
    assert plan.strategy.layout == "linear" and plan.strategy.sort_columns == ()
    assert plan.groups[0].slices[0].path == "eu/fg-0-0_0-1-0_20240101000000000.parquet"


def test_hudis_insert_overwrite_request_is_not_a_plan() -> None:
    assert plan_of_request(HUDI_REQUEST.read_bytes()) is None
    assert plan_of_request(b"") is None
    with pytest.raises(InvalidArgumentError, match="metadata"):
        ClusteringPlan.from_avro(HUDI_REQUEST.read_bytes())
    with pytest.raises(InvalidArgumentError, match="not Avro requested replace metadata"):
        plan_of_request(b"{}")


def test_invalid_plans_are_refused() -> None:
    piece = SliceInfo("eu", "a-0", "eu/a-0_0-1-0_20240101000000000.parquet", 1)
    other = SliceInfo("us", "b-0", "us/b-0_0-1-0_20240101000000000.parquet", 1)
    strategy = ClusteringStrategy((), "linear", 1)
    with pytest.raises(InvalidArgumentError, match="share one partition"):
        ClusteringGroup((piece, other), 1)
    with pytest.raises(InvalidArgumentError, match="num_output_file_groups"):
        ClusteringGroup((piece,), 0)
    with pytest.raises(InvalidArgumentError, match="more than one slice"):
        ClusteringPlan((ClusteringGroup((piece,), 1), ClusteringGroup((piece,), 1)), strategy)
    with pytest.raises(InvalidArgumentError, match="layout"):
        ClusteringStrategy((), "spiral", 1)
    with pytest.raises(InvalidArgumentError, match="target_file_bytes"):
        ClusteringStrategy((), "linear", 0)


def plan_of_table(table: HoodieTable) -> ClusteringPlan:
    """A plan over every live file group of ``table``, one group per partition."""
    groups = []
    for partition, files in sorted(table.view().file_groups_by_partition().items()):
        slices = tuple(SliceInfo(partition, f.file_id, f.path, f.size) for f in files)
        groups.append(ClusteringGroup(slices, 1))
    return ClusteringPlan(tuple(groups), ClusteringStrategy(("id",), "linear", 2**20))


@pytest.fixture
def written(table_uri: str) -> HoodieTable:
    writer = Writer(HoodieTable.create(table_uri, people_config()))
    writer.commit(rows((1, "ann", "eu", 1.0), (2, "bob", "us", 2.0)))
    writer.commit(rows((3, "cy", "eu", 3.0)))
    return writer.table


@pytest.fixture
def table_uri(tmp_path: Path) -> str:
    return str(tmp_path / "people")


def test_save_needs_the_lock_and_refuses_overlap(written: HoodieTable) -> None:
    before = sorted(p.name for p in Path(written.uri, ".hoodie").iterdir())
    with pytest.raises(FailedPreconditionError, match="lock"):
        save_plan(written, plan_of_table(written))
    assert sorted(p.name for p in Path(written.uri, ".hoodie").iterdir()) == before
    with StorageLease(written.storage, "test") as lock:
        written.timeline.fence = lock
        instant = save_plan(written, plan_of_table(written))
        with pytest.raises(ConflictError, match=f"pending clustering plan {instant.timestamp}"):
            save_plan(written, plan_of_table(written))
    assert instant == Instant(instant.timestamp, REPLACE_COMMIT, State.REQUESTED)
    (pending,) = pending_plans(HoodieTable.open(written.uri))
    assert pending.instant == instant
    assert pending.plan == plan_of_table(written)


def test_pending_plan_names_what_an_instant_is(written: HoodieTable) -> None:
    first = written.timeline.completed()[0].timestamp
    with pytest.raises(FailedPreconditionError, match=f"{first} is a completed commit"):
        pending_plan(written, first)


def test_writers_roll_back_failed_writes_but_leave_plans(written: HoodieTable) -> None:
    expected = hudi_rs_rows(written.uri)
    with StorageLease(written.storage, "test") as lock:
        written.timeline.fence = lock
        plan = save_plan(written, plan_of_table(written))
        failed = new_instant_time(after=plan.timestamp)
        written.timeline.create_requested(failed, REPLACE_COMMIT, HUDI_REQUEST.read_bytes())
        results = rollback_failed_writes(
            written, StorageMarkerReader(written.storage), lock_held=True
        )
    assert [r.rolled_back.timestamp for r in results] == [failed]
    assert [p.instant for p in pending_plans(written)] == [plan]
    assert hudi_rs_rows(written.uri) == expected
