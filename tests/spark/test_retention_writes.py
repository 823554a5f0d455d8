"""Writes clean and archive inline (Hudi's default), reads within the retention keep
working (hudi-rs, the data source, ``tidemark read --as-of``) and older ones are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark.clikit import Cli, refused_in_one_line
from spark.sparkkit import SCHEMA, assert_readers_agree, data_files, local_frame
from tidemark import spark as api
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import CLEAN

DATA = ["id", "name", "part", "ts"]
CREATE: dict[str, Any] = {
    "record_key_fields": ["id"],
    "partition_fields": ["part"],
    "precombine_field": "ts",
    "markers": "direct",
    "sort_mode": "global_sort",
}


def _write(
    spark: SparkSession, uri: str, op: str, rows: list[tuple], **options: Any
) -> WriteResult:
    return write(spark, local_frame(spark, rows, SCHEMA), uri, op, WriteOptions(**options))


def test_every_write_cleans_outside_its_retention_and_reads_stay_exact(
    spark: SparkSession, table_uri: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first = _write(spark, table_uri, "bulk_insert", [(1, "a", "p", 0), (2, "b", "q", 0)], **CREATE)
    instants = [first.instant]
    for n in range(1, 3):
        result = _write(
            spark, table_uri, "upsert", [(1, f"a{n}", "p", n)], markers="direct", retain_commits=1
        )
        instants.append(result.instant)
    assert result.retention is not None
    assert result.retention.clean.earliest_to_retain == instants[-1]
    # p: the slice of the earliest commit to retain and the one visible before it; q: one
    assert len(data_files(table_uri)) == 2 + 1
    rows = assert_readers_agree(table_uri, DATA)
    assert rows["1"]["name"] == "a2"
    table = HoodieTable.open(table_uri)
    assert table.timeline.completed(frozenset({CLEAN}))

    at_retain = spark.read.format("tidemark").option("as_of", instants[-1]).load(table_uri)
    assert {r["name"] for r in at_retain.collect()} == {"a2", "b"}
    cli = Cli(tmp_path, capfd)
    code, out = cli.output("read", "--table", table_uri, "--as-of", instants[-1])
    assert code == 0 and "a2" in out
    before_retain = api.read(spark, table_uri, as_of=instants[1])  # its slice is kept
    assert {r["name"] for r in before_retain.collect()} == {"a1", "b"}
    code, err = cli.run("read", "--table", table_uri, "--as-of", instants[0])
    assert f"earliest instant still readable is {instants[1]}" in refused_in_one_line(
        code, err, "read"
    )

    kept = _write(
        spark, table_uri, "upsert", [(1, "off", "p", 9)], markers="direct", auto_clean=False
    )
    assert kept.retention is None
    assert len(data_files(table_uri)) == 4
    dry = api.clean(table_uri, api.CleanSettings(retain_commits=1), dry_run=True)
    assert dry.files_deleted == 1 and len(data_files(table_uri)) == 4
    assert api.clean(table_uri, api.CleanSettings(retain_commits=1)).files_deleted == 1
    assert api.archive(table_uri).archived == []  # 4 writes: far below keep.max
    assert assert_readers_agree(table_uri, DATA)["1"]["name"] == "off"


def test_replaced_file_groups_go_once_the_overwrite_leaves_the_retention(
    spark: SparkSession, table_uri: str
) -> None:
    first = _write(spark, table_uri, "bulk_insert", [(1, "a", "p", 0)], **CREATE).instant
    two: dict[str, Any] = {"markers": "direct", "retain_commits": 2}
    _write(spark, table_uri, "insert_overwrite", [(2, "b", "p", 0)], **two)
    _write(spark, table_uri, "upsert", [(3, "c", "q", 0)], **two)
    replaced = [path for path in data_files(table_uri) if path.endswith(f"_{first}.parquet")]
    assert replaced  # the overwrite is the earliest commit to retain: its old group stays
    _write(spark, table_uri, "upsert", [(4, "d", "q", 0)], **two)
    assert not set(replaced) & data_files(table_uri)
    rows = assert_readers_agree(table_uri, DATA)
    assert {row["name"] for row in rows.values()} == {"b", "c", "d"}


def test_a_retention_the_archiver_cannot_keep_is_refused_before_writing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], table_uri: str
) -> None:
    cli = Cli(tmp_path, capfd)
    code, err = cli.write(
        table_uri, [{"id": 1, "part": "p"}], "--op", "bulk_insert", "--key", "id",
        "--retain-commits", "25",
    )  # fmt: skip
    assert "keep_min (20) must be greater" in refused_in_one_line(code, err)
    assert not Path(table_uri).exists()
