"""Compaction of merge-on-read tables: scheduled and run on tables Tidemark wrote at versions
6, 8 and 9 and on a copy of a table Hudi wrote; hudi-rs and ``tidemark.spark.read`` read the
same rows before, while the plan is pending and after, the latest slices have no logs, and
writes after the compaction are read right. A run killed with its files written is rolled
back and run again by the next run; bad input is refused naming the field."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from table.log_testkit import extract_mor_fixtures

import tidemark.spark
from spark.morkit import hudi_rs_rows, mor_frame, mor_options, our_rows
from spark.sparkkit import data_files, hudi_rs_table, table_bytes
from tidemark.cli import main
from tidemark.errors import ConflictError, FailedPreconditionError, NotFoundError
from tidemark.faults import EXIT_AT_ENV, EXIT_CODE
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import parse_base_file_name
from tidemark.table.leases.plan_run import RUNS_DIR
from tidemark.table.metadata.actions import COMMIT, COMPACTION
from tidemark.table.metadata.commit import COMPACT_OPERATION
from tidemark.table.plans.compaction import pending_compactions
from tidemark.table.records.keys import FILE_NAME, META_COLUMNS
from tidemark.table.timeline.instant import State
from tidemark.testing.leases import outlive_lease


def _assert_read(spark: SparkSession, uri: str, model: dict[str, tuple]) -> None:
    assert hudi_rs_rows(uri) == model
    assert our_rows(spark, uri) == model


def _written(spark: SparkSession, uri: str, version: int) -> dict[str, tuple]:
    """A table of 40 rows in two partitions, then an upsert and a delete (log files)."""
    model = {
        f"k{i:03}": (f"k{i:03}", f"n{i}", float(i), 1, "eu" if i % 2 else "us") for i in range(40)
    }
    options = mor_options(version)
    tidemark.spark.write(mor_frame(spark, list(model.values())), uri, "upsert", options=options)
    updates = [(f"k{i:03}", f"u{i}", i * 10.0, 2, "eu" if i % 2 else "us") for i in range(0, 40, 3)]
    tidemark.spark.write(mor_frame(spark, updates), uri, "upsert", options=options)
    model.update({row[0]: row for row in updates})
    deleted = [f"k{i:03}" for i in range(1, 40, 7)]
    tidemark.spark.write(
        mor_frame(spark, [model[k] for k in deleted]), uri, "delete", options=options
    )
    for key in deleted:
        del model[key]
    return model


def _slices_with_logs(uri: str) -> int:
    return sum(1 for s in HoodieTable.open(uri).view().latest_file_slices() if s.logs)


def test_compaction_folds_the_logs_and_every_reader_reads_the_same_rows(
    spark: SparkSession, tmp_path: Path, table_version: int
) -> None:
    uri = str(tmp_path / "t")
    model = _written(spark, uri, table_version)
    groups_with_logs = {
        (s.partition_path, s.file_id)
        for s in HoodieTable.open(uri).view().latest_file_slices()
        if s.logs
    }
    assert groups_with_logs
    assert tidemark.spark.compaction_schedule(spark, uri) is None  # 2 deltacommits < 5
    instant = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=2)
    assert instant is not None
    [pending] = pending_compactions(HoodieTable.open(uri))
    assert pending.plan.file_groups() == groups_with_logs
    _assert_read(spark, uri, model)  # a pending plan changes no read

    [result] = tidemark.spark.compaction_run(spark, uri, markers="direct")
    assert result.instant == instant
    assert result.file_groups == len(groups_with_logs)
    table = HoodieTable.open(uri)
    done = table.timeline.find(instant)
    assert (done.action, done.state) == (COMMIT, State.COMPLETED)
    assert table.timeline.requested(done).action == COMPACTION
    metadata = table.timeline.read_metadata(done)
    assert metadata.operation_type == COMPACT_OPERATION
    new_bases = {(s.partition_path, s.file_id) for s in metadata.write_stats}
    assert new_bases == groups_with_logs  # the same file ids
    names = [s.path.rpartition("/")[2] for s in metadata.write_stats]
    assert {parse_base_file_name(name).instant for name in names} == {instant}
    assert _slices_with_logs(uri) == 0
    _assert_read(spark, uri, model)
    assert tidemark.spark.compaction_run(spark, uri) == []

    later = [("k000", "after", -1.0, 9, "us"), ("k005", "after", -5.0, 9, "eu")]
    tidemark.spark.write(mor_frame(spark, later), uri, "upsert", options=mor_options(table_version))
    model.update({row[0]: row for row in later})
    assert _slices_with_logs(uri) == 2
    _assert_read(spark, uri, model)


def test_writes_beside_a_pending_compaction(
    spark: SparkSession, tmp_path: Path, table_version: int
) -> None:
    """On versions 8 and 9 an upsert appends to a group being compacted and is read right
    after the compaction (its log belongs to the new slice by completion time); on version
    6, where Hudi's readers would place such a log wrong, the write is refused."""
    uri = str(tmp_path / "t")
    model = _written(spark, uri, table_version)
    instant = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=1)
    assert instant is not None
    update = [("k000", "beside", 0.5, 5, "us")]
    if table_version == 6:
        with pytest.raises(ConflictError, match=f"pending compaction {instant}") as refused:
            tidemark.spark.write(mor_frame(spark, update), uri, "upsert", options=mor_options(6))
        assert refused.value.field == "compaction"
    else:
        tidemark.spark.write(
            mor_frame(spark, update), uri, "upsert", options=mor_options(table_version)
        )
        model.update({row[0]: row for row in update})
    _assert_read(spark, uri, model)
    tidemark.spark.compaction_run(spark, uri, instant, markers="direct")
    _assert_read(spark, uri, model)
    if table_version == 6:  # now the write goes through
        tidemark.spark.write(mor_frame(spark, update), uri, "upsert", options=mor_options(6))
        model.update({row[0]: row for row in update})
        _assert_read(spark, uri, model)


def test_a_table_hudi_wrote_is_compacted(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(extract_mor_fixtures(tmp_path) / "v6_trips_8i1u")

    def hudi_rs_sorted() -> list[str]:
        read = hudi_rs_table(uri)
        assert read is not None
        return sorted(map(repr, read.select(columns).to_pylist()))

    first = hudi_rs_table(uri)
    assert first is not None
    columns = [c for c in first.column_names if c != FILE_NAME]
    before = hudi_rs_sorted()
    instant = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=1)
    assert instant is not None
    [result] = tidemark.spark.compaction_run(spark, uri, markers="direct")
    assert result.rows > 0
    assert _slices_with_logs(uri) == 0
    assert hudi_rs_sorted() == before
    ours = tidemark.spark.read(spark, uri).toArrow()
    assert sorted(map(repr, ours.select(columns).to_pylist())) == before
    assert set(META_COLUMNS) <= set(ours.column_names)


def test_a_killed_run_is_rolled_back_and_run_again(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    model = _written(spark, uri, 9)
    instant = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=1)
    assert instant is not None
    files_before = data_files(uri)
    command = [sys.executable, "-m", "tidemark.jobs.compaction", "--table", uri]
    killed = subprocess.run(
        [*command, "--markers", "direct", "--master", "local[2]"],
        env={**os.environ, EXIT_AT_ENV: "compaction_files_written"},
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == EXIT_CODE, killed.stderr.decode()[-2000:]
    assert HoodieTable.open(uri).timeline.find(instant).state is State.INFLIGHT
    assert data_files(uri) > files_before  # its files are there, and invisible
    _assert_read(spark, uri, model)
    outlive_lease(open_storage(uri), lock_dir=f"{RUNS_DIR}/{instant}")
    [result] = tidemark.spark.compaction_run(spark, uri, markers="direct")
    assert result.rolled_back_earlier_run
    committed = {
        s.path
        for s in HoodieTable.open(uri)
        .timeline.read_metadata(HoodieTable.open(uri).timeline.find(instant))
        .write_stats
    }
    assert data_files(uri) == files_before | committed
    _assert_read(spark, uri, model)


def test_bad_input_is_refused_naming_the_field(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "t")
    _written(spark, uri, 8)
    instant = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=1)
    assert instant is not None
    tidemark.spark.compaction_run(spark, uri, markers="direct")
    untouched = table_bytes(uri)
    with pytest.raises(FailedPreconditionError, match="is a completed compaction") as done:
        tidemark.spark.compaction_run(spark, uri, instant)
    assert done.value.field == "instant"
    with pytest.raises(NotFoundError, match="no instant 20200101000000000"):
        tidemark.spark.compaction_run(spark, uri, "20200101000000000")
    code = main(["compaction", "run", "--table", uri, "--instant", instant])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"tidemark compaction: error: instant: instant {instant} is a completed "
        "compaction, not a pending compaction plan"
    )
    assert table_bytes(uri) == untouched
    cow = str(tmp_path / "cow")
    row = mor_frame(spark, [("a", "n", 1.0, 1, "eu")])
    tidemark.spark.write(row, cow, "upsert", options=mor_options(8, table_type="COPY_ON_WRITE"))
    assert main(["compaction", "schedule", "--table", cow]) == 2
    assert "error: table: table" in capsys.readouterr().err
