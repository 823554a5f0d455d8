"""History and time travel (issue 53): a write's result names its requested and completion
times, ``history`` and ``tidemark show --json`` list them, either time reads that write's
snapshot as hudi-rs reads it, a time before the first commit is refused, and the retention
floor is the oldest instant whose files the cleaner kept."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hudi import HudiReadOptions
from pyspark.sql import SparkSession
from table.table_testkit import hudi_rs_builder

import tidemark.spark
from spark.sparkkit import local_frame, rows_by_key
from tidemark.cli import main
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.jobs.write import WriteResult
from tidemark.spark import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.files.view import earliest_readable, last_clean

SCHEMA = "id long, name string"


def _write(
    spark: SparkSession, uri: str, rows: list[tuple[int, str]], options: WriteOptions
) -> WriteResult:
    frame = local_frame(spark, rows, SCHEMA)
    return tidemark.spark.write(frame, uri, "upsert", options=options)


def _names(rows: pa.Table | None) -> dict[str, str]:
    return {key: row["name"] for key, row in rows_by_key(rows).items()}


def _ours(spark: SparkSession, uri: str, as_of: str) -> dict[str, str]:
    return _names(tidemark.spark.read(spark, uri, as_of=as_of).toArrow())


def _hudi_rs(uri: str, as_of: str) -> dict[str, str]:
    options = HudiReadOptions().with_as_of_timestamp(as_of)
    batches = hudi_rs_builder(uri).build().read(options)
    return _names(pa.Table.from_batches(batches) if batches else None)


@pytest.mark.parametrize("version", [6, 9])
def test_a_writes_requested_and_completion_times_read_its_snapshot_as_hudi_rs(
    spark: SparkSession, table_uri: str, version: int
) -> None:
    options = WriteOptions(record_key_fields=["id"], table_version=version, auto_clean=False)
    batches = [[(1, "ann"), (2, "bob")], [(2, "bo"), (3, "cy")], [(1, "an")]]
    results = [_write(spark, table_uri, rows, options) for rows in batches]
    expected: dict[str, str] = {}
    for result, rows in zip(results, batches, strict=True):
        expected.update({str(key): name for key, name in rows})
        assert result.completion_time >= result.instant
        for as_of in (result.instant, result.completion_time):
            assert _ours(spark, table_uri, as_of) == expected == _hudi_rs(table_uri, as_of)
    if version == 9:  # completion times are recorded, after the requested times
        assert all(r.completion_time > r.instant for r in results)
    else:
        assert all(r.completion_time == r.instant for r in results)


def test_as_of_before_the_first_commit_is_an_error(
    spark: SparkSession, table_uri: str, table_version: int
) -> None:
    options = WriteOptions(record_key_fields=["id"], table_version=table_version)
    result = _write(spark, table_uri, [(1, "ann")], options)
    with pytest.raises(InvalidArgumentError, match="before the table's first commit") as error:
        tidemark.spark.read(spark, table_uri, as_of="20000101000000000")
    assert error.value.field == "as_of"
    assert result.instant in str(error.value) or result.completion_time in str(error.value)


def test_history_and_show_json_list_each_write(
    spark: SparkSession, table_uri: str, table_version: int, capsys: pytest.CaptureFixture[str]
) -> None:
    options = WriteOptions(record_key_fields=["id"], table_version=table_version)
    first = _write(spark, table_uri, [(1, "ann"), (2, "bob"), (3, "cy")], options)
    second = _write(spark, table_uri, [(2, "bo")], options)
    rows = [row.asDict() for row in tidemark.spark.history(spark, table_uri).collect()]
    writes = [row for row in rows if row["action"] == "commit"]
    assert [(w["requested"], w["completed"]) for w in writes] == [
        (first.instant, first.completion_time),
        (second.instant, second.completion_time),
    ]
    assert [(w["operation"], w["rows_written"], w["files_written"]) for w in writes] == [
        ("UPSERT", 3, first.files_written),
        ("UPSERT", 3, second.files_written),  # the file group rewritten whole
    ]
    assert {w["state"] for w in writes} == {"COMPLETED"} and not any(w["archived"] for w in rows)
    capsys.readouterr()  # the writes' log lines
    assert main(["show", "--table", table_uri, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["instants"] == rows
    assert shown["table_version"] == table_version
    assert {g["file_id"] for g in shown["file_groups"]} == {
        f.file_id for f in HoodieTable.open(table_uri).view().latest_base_files()
    }


@pytest.mark.parametrize("version", [6, 9])
def test_the_retention_floor_is_the_oldest_instant_whose_files_are_kept(
    spark: SparkSession, table_uri: str, version: int
) -> None:
    """Every write rewrites the one file group; cleaning with two commits retained keeps
    the slice of the write before the earliest commit to retain, so that write's snapshot
    is whole and reads as hudi-rs reads it; the one before it is refused."""
    options = WriteOptions(record_key_fields=["id"], table_version=version, retain_commits=2)
    results = [_write(spark, table_uri, [(1, f"v{n}")], options) for n in range(5)]
    timeline = HoodieTable.open(table_uri).timeline
    floor = earliest_readable(timeline)
    done = [r.completion_time for r in results]
    assert floor is not None and floor in done
    boundary = done.index(floor)
    clean = last_clean(timeline)
    assert clean is not None and clean.earliest_commit_to_retain == results[boundary + 1].instant
    assert boundary > 0
    for as_of in (results[boundary].instant, floor):
        assert _ours(spark, table_uri, as_of) == {"1": f"v{boundary}"} == _hudi_rs(table_uri, as_of)
    with pytest.raises(FailedPreconditionError, match="retention") as refused:
        tidemark.spark.read(spark, table_uri, as_of=results[boundary - 1].instant)
    assert refused.value.field == "as_of"
