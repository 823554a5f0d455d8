"""Bad input is reported as a domain error naming the field, and the timeline is untouched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import SCHEMA, local_frame, timeline_listing
from tidemark.cli import main
from tidemark.errors import InvalidArgumentError, NotFoundError, TidemarkError
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions

CREATE: dict[str, Any] = {"record_key_fields": ["id"], "partition_fields": ["part"]}


@pytest.fixture
def existing(spark: SparkSession, table_uri: str) -> str:
    write(
        spark,
        local_frame(spark, [(1, "a", "p", 0)], SCHEMA),
        table_uri,
        "bulk_insert",
        WriteOptions(**CREATE),
    )
    return table_uri


@pytest.mark.parametrize(
    ("operation", "rows", "schema", "options", "field"),
    [
        ("upsert", [(None, "a", "p", 0)], SCHEMA, {}, "id"),
        ("bulk_insert", [(None, "a", "p", 0)], SCHEMA, {}, "id"),
        ("upsert", [(2, "a", "p", 0)], SCHEMA, {"precombine_field": "nope"}, "precombine_field"),
        ("upsert", [(2, "p", 0)], "id int, part string, ts long", {}, "name"),
        ("upsert", [(2, 5, "p", 0)], "id int, name int, part string, ts long", {}, "name"),
        ("merge", [(2, "a", "p", 0)], SCHEMA, {}, "operation"),
        (
            "upsert",
            [(2, "a", "p", 0)],
            SCHEMA,
            {"record_key_fields": ["name"]},
            "record_key_fields",
        ),
    ],
)
def test_bad_input_leaves_the_timeline_unchanged(
    spark: SparkSession,
    existing: str,
    operation: str,
    rows: list[tuple],
    schema: str,
    options: dict[str, Any],
    field: str,
) -> None:
    before = timeline_listing(existing)
    with pytest.raises(InvalidArgumentError) as raised:
        write(spark, local_frame(spark, rows, schema), existing, operation, WriteOptions(**options))
    assert raised.value.field == field
    assert timeline_listing(existing) == before


def test_unknown_fields_and_missing_tables(spark: SparkSession, tmp_path: Path) -> None:
    df = local_frame(spark, [(1, "a", "p", 0)], SCHEMA)
    missing = str(tmp_path / "missing")
    with pytest.raises(NotFoundError) as raised:
        write(spark, df, missing, "upsert")
    assert raised.value.field == "table"
    with pytest.raises(InvalidArgumentError) as unknown:
        write(spark, df, missing, "upsert", WriteOptions(record_key_fields=["nope"]))
    assert unknown.value.field == "record_key_fields"
    with pytest.raises(InvalidArgumentError) as inside:
        write(
            spark,
            df,
            str(tmp_path / "t" / ".hoodie" / "x"),
            "upsert",
            WriteOptions(record_key_fields=["id"]),
        )
    assert inside.value.field == "table"
    assert not (tmp_path / "missing").exists()


def test_cli_writes_csv_and_json_and_reports_errors_in_one_line(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "in.csv"
    csv.write_text("id,name,part,ts\n1,a,p,0\n2,b,q,0\n")
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"id": 3, "name": "b", "part": "q", "ts": 1}\n')
    table = str(tmp_path / "cli_table")
    base = ["write", "--table", table, "--master", "local[2]"]
    assert (
        main(
            [
                *base,
                "--input",
                str(csv),
                "--op",
                "insert",
                "--key",
                "name",
                "--partition",
                "part",
                "--precombine",
                "ts",
            ]
        )
        == 0
    )
    assert main([*base, "--input", str(jsonl), "--op", "upsert"]) == 0
    assert "1 updated" in capsys.readouterr().out
    before = timeline_listing(table)
    assert main([*base, "--input", str(jsonl), "--op", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tidemark write: error: operation:")
    assert timeline_listing(table) == before
    assert main([*base, "--input", str(tmp_path / "absent.csv"), "--op", "upsert"]) == 2


def test_domain_errors_from_executors_keep_their_class_without_a_trace(
    spark: SparkSession, capfd: pytest.CaptureFixture[str]
) -> None:
    """A task's domain error reaches the caller as itself; Spark's executor and task-set
    loggers print nothing (the trace goes to the debug log)."""

    def fail(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            raise InvalidArgumentError("bad value 'x'", field="col")
            yield batch

    df = spark.range(4)
    capfd.readouterr()
    with pytest.raises(TidemarkError) as raised:
        run_spark_action(df.mapInArrow(fail, df.schema).collect)
    assert isinstance(raised.value, InvalidArgumentError)
    assert raised.value.field == "col"
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ERROR" not in err, err
