"""The clustering executor (spark_jobs/cluster.py): rows unchanged (ours and hudi-rs),
files ordered as the layout says and sized as planned, Hudi fixtures clustered, failed
and killed runs rolled back to their plan and re-run, bad instants refused untouched, and
an index build and a run on S3 through storage faults."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark.indexkit import assert_index_agrees
from spark.sparkkit import (
    copy_fixture,
    data_files,
    files_in_view,
    hudi_rs_table,
    local_frame,
    table_bytes,
)
from tidemark.cli import main
from tidemark.clustering.curves import layout_order
from tidemark.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from tidemark.faults import EXIT_AT_ENV, EXIT_CODE, FAIL_TASK_ATTEMPT_PROPERTY
from tidemark.jobs.cluster import (
    ClusterResult,
    arrow_threads,
    group_tasks,
    mostly_distinct,
    run_clustering,
    split_groups,
)
from tidemark.jobs.cluster_options import MIN_SLICE_INPUT_BYTES, ClusterOptions
from tidemark.jobs.index_build import build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.services.marker.embedded import start_embedded_marker_service
from tidemark.table import HoodieTable
from tidemark.table.files.view import BaseFile
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.metadata.actions import REPLACE_COMMIT, ROLLBACK
from tidemark.table.plans.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
    save_plan,
)
from tidemark.table.records.keys import FILE_NAME, META_COLUMNS, PARTITION_PATH, RECORD_KEY
from tidemark.table.timeline.instant import State
from tidemark.testing.s3local import FaultProxy

ROWS = 3000
SORT = ("a", "b")
GIB = 1024**3
KILLED_LEASE_S = 2.0


@pytest.fixture(scope="module")
def source_table(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two partitions of six small files each, rows in no useful order; ``b`` are
    strings sharing a 20-character prefix."""
    uri = str(tmp_path_factory.mktemp("cluster") / "source")
    rows = [
        (i, (i * 7919) % 1000 - 500, f"shared-prefix-00000/{(i * 104729) % 977:05d}", f"p{i % 2}")
        for i in range(ROWS)
    ]
    df = local_frame(spark, rows, "id long, a int, b string, part string").repartition(6)
    write(
        spark,
        df,
        uri,
        "bulk_insert",
        WriteOptions(record_key_fields=["id"], partition_fields=["part"]),
    )
    return uri


@pytest.fixture
def table(source_table: str, tmp_path: Path) -> str:
    target = tmp_path / "table"
    shutil.copytree(source_table, target)
    return str(target)


def schedule(
    uri: str,
    sort_columns: Sequence[str] = SORT,
    layout: str = "linear",
    *,
    output_files: int = 2,
    groups_per_partition: int = 1,
) -> str:
    """Save a plan over every file group: per partition ``groups_per_partition`` groups
    of ``output_files`` output files each."""
    table = HoodieTable.open(uri)
    groups = []
    for files in table.view().file_groups_by_partition().values():
        for part in range(groups_per_partition):
            chosen = files[part::groups_per_partition]
            groups.append(ClusteringGroup(tuple(map(_slice, chosen)), output_files))
    plan = ClusteringPlan(
        groups=tuple(groups),
        strategy=ClusteringStrategy(tuple(sort_columns), layout, GIB),
    )
    with StorageLease(table.storage, "test-scheduler") as lock:
        table.timeline.fence = lock
        return save_plan(table, plan).timestamp


def _slice(base: BaseFile) -> SliceInfo:
    return SliceInfo(base.partition_path, base.file_id, base.path, base.size)


def rows_without_file_name(uri: str) -> dict[Any, dict[str, Any]]:
    """What hudi-rs reads, by id (virtual-key tables have no stored key): every column
    but the file name, which clustering changes (it names the new file)."""
    read = hudi_rs_table(uri)
    assert read is not None
    kept = read.select([name for name in read.column_names if name != FILE_NAME])
    rows = {row["id"]: row for row in kept.to_pylist()}
    assert len(rows) == read.num_rows
    return rows


def cluster(
    spark: SparkSession,
    uri: str,
    instant: str | None = None,
    *,
    min_slice_bytes: int = MIN_SLICE_INPUT_BYTES,
) -> list[ClusterResult]:
    """Run the pending plans; groups are cut across tasks only into slices of at least
    ``min_slice_bytes`` of input (the tests' small groups: never, unless asked)."""
    options = ClusterOptions(row_group_bytes=4096, min_slice_bytes=min_slice_bytes)
    return run_clustering(spark, HoodieTable.open(uri), instant, options)


@pytest.mark.parametrize("layout", ["linear", "zorder", "hilbert"])
def test_clustering_keeps_rows_and_orders_files_by_layout(
    spark: SparkSession, table: str, layout: str
) -> None:
    before = rows_without_file_name(table)
    plan_inputs = HoodieTable.open(table).view().file_groups_by_partition()
    instant = schedule(table, SORT, layout, output_files=3)
    [result] = cluster(spark, table)
    assert (result.instant, result.groups, result.rows) == (instant, 2, ROWS)
    assert (result.files_replaced, result.files_written) == (12, 6)
    assert rows_without_file_name(table) == before
    metadata = _completed_metadata(table, instant)
    assert metadata.operation_type == "CLUSTER"
    assert {p: sorted(ids) for p, ids in metadata.partition_to_replace_file_ids.items()} == {
        p: sorted(f.file_id for f in files) for p, files in plan_inputs.items()
    }
    view = HoodieTable.open(table).view().file_groups_by_partition()
    for partition, inputs in plan_inputs.items():
        expected = _expected_files(table, inputs, layout, 3)
        written = sorted(
            view[partition], key=lambda f: _read(table, f.path).column("id")[0].as_py()
        )
        written_ids = [_read(table, f.path).column("id").to_pylist() for f in written]
        assert sorted(written_ids) == sorted(expected)
        for base in written:
            file_rows = _read(table, base.path)
            assert set(file_rows.column(FILE_NAME).to_pylist()) == {base.path.rpartition("/")[2]}
            assert pq.ParquetFile(Path(table) / base.path).metadata.num_row_groups > 1
            assert _dictionary_encoded(Path(table) / base.path) == {
                "id": False,  # distinct in every row: plain
                RECORD_KEY: False,
                PARTITION_PATH: True,  # one value
                FILE_NAME: True,
            }


@pytest.mark.parametrize("layout", ["linear", "hilbert"])
def test_a_group_split_across_tasks_writes_the_rows_and_order_of_the_whole_group(
    spark: SparkSession, table: str, layout: str
) -> None:
    """One group and several cores, slices of any size allowed: its 5 output files are
    written by several tasks, yet every file holds exactly the rows, in exactly the
    order, that the whole group's layout order puts there. Left to the default minimum
    slice size, the small group is one task."""
    hoodie = HoodieTable.open(table)
    inputs = hoodie.view().file_groups_by_partition()["p0"]
    plan = ClusteringPlan(
        groups=(ClusteringGroup(tuple(map(_slice, inputs)), 5),),
        strategy=ClusteringStrategy(SORT, layout, GIB),
    )
    with StorageLease(hoodie.storage, "test-scheduler") as lock:
        hoodie.timeline.fence = lock
        instant = save_plan(hoodie, plan).timestamp
    parallelism = spark.sparkContext.defaultParallelism
    tasks = group_tasks(hoodie, instant, plan)
    assert [(s.first_file, s.stop_file) for s in split_groups(tasks, parallelism)] == [(0, 5)]
    cuts = [(s.first_file, s.stop_file) for s in split_groups(tasks, parallelism, 1)]
    assert len(cuts) == min(5, parallelism) > 1
    assert [first for first, _ in cuts[1:]] == [stop for _, stop in cuts[:-1]]
    assert (cuts[0][0], cuts[-1][1]) == (0, 5)
    [result] = cluster(spark, table, min_slice_bytes=1)
    assert (result.groups, result.files_written, result.rows) == (1, 5, ROWS // 2)
    expected = _expected_files(table, inputs, layout, 5)
    written = [
        _read(table, f.path).column("id").to_pylist()
        for f in HoodieTable.open(table).view().file_groups_by_partition()["p0"]
        if f.file_id not in {i.file_id for i in inputs}
    ]
    assert sorted(written) == sorted(expected)


def test_a_plan_without_sort_columns_stitches_files_in_plan_order(
    spark: SparkSession, table: str
) -> None:
    """No sort columns: the output file holds its group's files' rows one file after
    another in plan order (the files are decoded in one multi-threaded Arrow scan)."""
    inputs = HoodieTable.open(table).view().file_groups_by_partition()
    schedule(table, (), output_files=1)
    [result] = cluster(spark, table)
    assert (result.groups, result.files_written, result.rows) == (2, 2, ROWS)
    view = HoodieTable.open(table).view().file_groups_by_partition()
    for partition, files in inputs.items():
        assert len(files) > 1
        [written] = view[partition]
        expected = pa.concat_tables([_read(table, f.path) for f in files]).column("id")
        assert _read(table, written.path).column("id").to_pylist() == expected.to_pylist()


def _dictionary_encoded(path: Path) -> dict[str, bool]:
    """Whether the file's first row group stores each of a few columns with a dictionary."""
    metadata = pq.ParquetFile(path).metadata
    names = [metadata.schema.column(i).name for i in range(metadata.num_columns)]
    return {
        name: "RLE_DICTIONARY" in metadata.row_group(0).column(names.index(name)).encodings
        for name in ("id", RECORD_KEY, PARTITION_PATH, FILE_NAME)
    }


def test_a_job_of_fewer_tasks_than_cores_gives_each_task_their_share_of_arrow_threads() -> None:
    assert arrow_threads(4, 1) == 4
    assert arrow_threads(4, 2) == 2
    assert arrow_threads(4, 3) == 1
    assert arrow_threads(2, 8) == 1


def test_mostly_distinct_columns_are_the_ones_written_plain() -> None:
    sample = pa.table(
        {
            "unique": pa.array(range(10)),
            "half": pa.array([i // 2 for i in range(10)]),
            "six": pa.array([i % 6 for i in range(10)]),
            "nulls": pa.nulls(10, pa.string()),
            "listed": pa.array([[i] for i in range(10)]),
            "tagged": pa.array([str(i) for i in range(10)]).dictionary_encode(),
        }
    )
    assert mostly_distinct(sample) == {"unique", "six"}  # nested and dictionaries: kept


def _expected_files(uri: str, inputs: list[BaseFile], layout: str, files: int) -> list[list[int]]:
    """The ids of each output file, from the layout order of the inputs in plan order."""
    rows = pa.concat_tables([_read(uri, f.path) for f in inputs])
    ordered = rows.take(layout_order(rows, SORT, layout)).column("id").to_pylist()
    bounds = [len(ordered) * i // files for i in range(files + 1)]
    return [ordered[start:stop] for start, stop in itertools.pairwise(bounds)]


def _read(uri: str, path: str) -> pa.Table:
    return pq.read_table(Path(uri) / path)


def _completed_metadata(uri: str, instant: str) -> Any:
    table = HoodieTable.open(uri)
    return table.timeline.read_metadata(table.timeline.find(instant))


def test_linear_files_have_disjoint_ranges_and_meta_columns_are_kept(
    spark: SparkSession, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI, as a user runs it."""
    before = {
        row[RECORD_KEY]: row
        for row in hudi_rs_table(table).select(list(META_COLUMNS)).to_pylist()  # type: ignore[union-attr]
    }
    instant = schedule(table, ("a",), "linear", output_files=4)
    argv = ["cluster", "run", "--table", table, "--markers", "direct", "--json"]
    assert main([*argv, "--master", str(spark.sparkContext.master)]) == 0
    [reported] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["plans"]
    assert (reported["instant"], reported["files_written"], reported["rows"]) == (instant, 8, ROWS)
    view = HoodieTable.open(table).view().file_groups_by_partition()
    for files in view.values():
        ranges = sorted(
            (pc.min(col).as_py(), pc.max(col).as_py())
            for col in (_read(table, f.path).column("a") for f in files)
        )
        assert len(ranges) == 4
        assert all(high <= low for (_, high), (low, _) in itertools.pairwise(ranges))
    after = hudi_rs_table(table)
    assert after is not None
    for row in after.select(list(META_COLUMNS)).to_pylist():
        kept = before[row[RECORD_KEY]]
        assert {k: row[k] for k in META_COLUMNS if k != FILE_NAME} == {
            k: kept[k] for k in META_COLUMNS if k != FILE_NAME
        }


def test_retried_task_attempts_leave_no_stray_files(spark: SparkSession, table: str) -> None:
    before = rows_without_file_name(table)
    schedule(table)
    spark.sparkContext.setLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY, "0")
    try:
        [result] = cluster(spark, table)
    finally:
        spark.sparkContext.setLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY, None)  # type: ignore[arg-type]
    assert rows_without_file_name(table) == before
    committed = {s.path for s in _completed_metadata(table, result.instant).write_stats}
    assert data_files(table) - _paths_before(table) == committed


def _paths_before(uri: str) -> set[str]:
    """Data files of the bulk insert (the clustered table keeps them until a clean)."""
    table = HoodieTable.open(uri)
    first = table.timeline.completed(frozenset({"commit"}))[0]
    return {s.path for s in table.timeline.read_metadata(first).write_stats}


def test_failed_run_is_rolled_back_to_its_plan_and_reruns(spark: SparkSession, table: str) -> None:
    build_index(spark, HoodieTable.open(table), IndexBuildOptions(shards=3))
    before_files = data_files(table)
    before = rows_without_file_name(table)
    instant = schedule(table, groups_per_partition=2)
    plan_bytes = _requested_bytes(table, instant)
    victim = sorted(files_in_view(table))[-1]  # not the file the schema is read from
    good = (Path(table) / victim).read_bytes()
    (Path(table) / victim).write_bytes(b"not parquet")
    with pytest.raises(Exception, match="rolled back; its plan stays pending"):
        cluster(spark, table)
    (Path(table) / victim).write_bytes(good)
    assert data_files(table) == before_files
    hudi = HoodieTable.open(table)
    assert hudi.timeline.find(instant).state is State.REQUESTED
    assert _requested_bytes(table, instant) == plan_bytes
    assert [i.action for i in hudi.timeline.completed()][-1] == ROLLBACK
    assert rows_without_file_name(table) == before
    [result] = cluster(spark, table, instant)
    assert result.files_written == 8
    assert rows_without_file_name(table) == before
    assert_index_agrees(table)


def _requested_bytes(uri: str, instant: str) -> bytes:
    return (Path(uri) / ".hoodie" / f"{instant}.{REPLACE_COMMIT}.requested").read_bytes()


KILL_STAGES = ("cluster_started", "cluster_files_written", "cluster_before_commit")


@pytest.mark.parametrize("stage", [*KILL_STAGES, "cluster_committed"])
def test_killed_run_is_rolled_back_and_rerun(spark: SparkSession, table: str, stage: str) -> None:
    """A run killed (no clean-up) once inflight, once its files are written, once it
    staged its index changes, and once committed: the next run rolls the first three back
    (their files and staged index changes go) and commits the plan; after the last one
    there is nothing left to run. Either way the rows and the index are exact."""
    build_index(spark, HoodieTable.open(table), IndexBuildOptions(shards=3))
    before_files = data_files(table)
    before = rows_without_file_name(table)
    instant = schedule(table)
    env = {**os.environ, EXIT_AT_ENV: stage}
    command = [sys.executable, "-m", "tidemark.jobs.cluster", "--table", table]
    killed = subprocess.run(
        [
            *command,
            "--markers",
            "direct",
            "--master",
            "local[2]",
            "--lock-lease-s",
            str(KILLED_LEASE_S),
        ],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == EXIT_CODE, killed.stderr.decode()[-2000:]
    state = HoodieTable.open(table).timeline.find(instant).state
    assert state is (State.INFLIGHT if stage in KILL_STAGES else State.COMPLETED)
    if stage != "cluster_started":
        assert data_files(table) > before_files
    assert rows_without_file_name(table) == before
    time.sleep(KILLED_LEASE_S * 1.5)  # the killed run's lock lease runs out
    results = cluster(spark, table)
    if stage in KILL_STAGES:
        [result] = results
        assert result.rolled_back_earlier_run
    else:
        assert results == []
    assert rows_without_file_name(table) == before
    committed = {s.path for s in _completed_metadata(table, instant).write_stats}
    assert data_files(table) == before_files | committed
    assert_index_agrees(table)


def test_bad_instants_are_refused_without_touching_the_table(
    spark: SparkSession, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    written = HoodieTable.open(table).timeline.completed()[0].timestamp
    untouched = table_bytes(table)
    with pytest.raises(FailedPreconditionError, match=f"{written} is a completed commit"):
        cluster(spark, table, written)
    with pytest.raises(NotFoundError, match="no instant 20200101000000000"):
        cluster(spark, table, "20200101000000000")
    with pytest.raises(InvalidArgumentError, match="not an instant time"):
        cluster(spark, table, "yesterday")
    assert cluster(spark, table) == []
    assert table_bytes(table) == untouched
    code = main(["cluster", "run", "--table", table, "--instant", written, "--markers", "direct"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert lines == [
        f"tidemark cluster: error: instant: instant {written} is a completed commit, "
        "not a pending clustering plan"
    ]
    assert table_bytes(table) == untouched


def test_plan_with_an_unknown_sort_column_is_refused(spark: SparkSession, table: str) -> None:
    instant = schedule(table, ("a", "nope"))
    untouched = table_bytes(table)
    with pytest.raises(InvalidArgumentError, match=f"'nope'.*in plan {instant}"):
        cluster(spark, table)
    assert table_bytes(table) == untouched


@pytest.mark.parametrize(
    "fixture",
    [
        "v6_simplekeygen_nonhivestyle",
        "v6_simplekeygen_hivestyle_no_metafields",
        "v6_nonpartitioned",
    ],
)
def test_hudi_written_tables_cluster_with_the_same_rows(
    spark: SparkSession, tmp_path: Path, fixture: str
) -> None:
    uri = copy_fixture(fixture, tmp_path)
    before = rows_without_file_name(uri)
    schedule(
        uri, ("name",), "hilbert" if fixture == "v6_nonpartitioned" else "linear", output_files=1
    )
    [result] = cluster(spark, uri)
    assert result.rows == len(before) == 4
    assert rows_without_file_name(uri) == before
    assert len(files_in_view(uri)) == result.files_written


def bulk_insert_four_files(spark: SparkSession, uri: str, *, rows: int, partitions: int) -> None:
    """``rows`` rows keyed by ``id`` over ``partitions`` partitions, in four tasks' files."""
    data = [(i, i % 7, f"name-{i}", f"p{i % partitions}") for i in range(rows)]
    df = local_frame(spark, data, "id long, a int, b string, part string").repartition(4)
    options = WriteOptions(record_key_fields=["id"], partition_fields=["part"])
    write(spark, df, uri, "bulk_insert", options)


def test_clustering_on_s3_with_service_markers(spark: SparkSession, s3_bucket: str) -> None:
    """Through the local S3 server, markers batched by an embedded marker service."""
    bulk_insert_four_files(spark, s3_bucket, rows=200, partitions=1)
    before = rows_without_file_name(s3_bucket)
    schedule(s3_bucket, ("a",), "hilbert", output_files=2)
    with start_embedded_marker_service() as service:
        options = ClusterOptions(markers="service", marker_service_address=service.address)
        [result] = run_clustering(spark, HoodieTable.open(s3_bucket), options=options)
    assert (result.files_replaced, result.files_written, result.rows) == (4, 2, 200)
    assert rows_without_file_name(s3_bucket) == before
    assert len(files_in_view(s3_bucket)) == 2


def test_planned_by_the_planner_service_and_run_from_the_cli(
    spark: SparkSession, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tidemark cluster schedule`` (an embedded planner service) then ``cluster run``."""
    before = rows_without_file_name(table)
    schedule_argv = ["cluster", "schedule", "--table", table, "--sort-columns", "b,a"]
    assert main([*schedule_argv, "--layout", "hilbert", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    run_argv = ["cluster", "run", "--table", table, "--markers", "direct", "--json"]
    assert main([*run_argv, "--master", str(spark.sparkContext.master)]) == 0
    [ran] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["plans"]
    assert ran["instant"] == planned["instant"]
    assert (
        (ran["groups"], ran["files_replaced"]) == (planned["groups"], planned["files"]) == (2, 12)
    )
    assert rows_without_file_name(table) == before
    assert len(files_in_view(table)) == ran["files_written"] == 2


JOB_TIMEOUT_S = 600


def run_job(proxy: FaultProxy, *args: str) -> subprocess.CompletedProcess[str]:
    """A ``tidemark`` job whose storage (driver and executors) goes through ``proxy``."""
    env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}
    command = [sys.executable, "-m", "tidemark.cli", *args, "--master", "local[2]"]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False
    )


def test_index_build_and_cluster_run_through_storage_faults(
    spark: SparkSession, s3_server: str, s3_bucket: str
) -> None:
    bulk_insert_four_files(spark, s3_bucket, rows=400, partitions=2)
    before = rows_without_file_name(s3_bucket)
    with FaultProxy(s3_server) as proxy:
        proxy.fail_next(3, method="PUT", path_pattern=r"record-index/shards/.*/base_")
        proxy.fail_next(
            1, method="PUT", path_pattern="record-index/index.properties", forward=True, reset=True
        )
        proxy.delay(300, method="PUT")
        built = run_job(proxy, "index", "build", "--table", s3_bucket, "--shards", "3")
        assert built.returncode == 0, built.stderr[-3000:]
        assert proxy.injected == 4
        proxy.clear()
        assert_index_agrees(s3_bucket)
        instant = schedule(s3_bucket, ("a",))
        proxy.fail_next(3, method="PUT", path_pattern=r"\.parquet")
        proxy.fail_next(
            1, method="PUT", path_pattern=rf"{instant}\.replacecommit$", forward=True, reset=True
        )
        proxy.delay(300, method="PUT")
        ran = run_job(proxy, "cluster", "run", "--table", s3_bucket, "--markers", "direct")
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert proxy.injected == 8
    assert HoodieTable.open(s3_bucket).timeline.find(instant).state is State.COMPLETED
    assert rows_without_file_name(s3_bucket) == before
    assert_index_agrees(s3_bucket)
