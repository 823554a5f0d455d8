"""Inputs are read as their formats say (issue 15): CSV as RFC 4180 and Python's csv module
write it, and malformed CSV/JSON records or a non-Parquet ``.parquet`` file refused in one
line naming the line, with the table left byte-identical. Local filesystem and S3."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import (
    cli_write,
    hudi_rs_table,
    local_frame,
    rows_by_key,
    table_bytes,
    write_csv,
)
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions

TRICKY_ROWS: list[dict[str, Any]] = [
    {"id": 1, "name": 'say "hi"', "note": "comma, inside", "part": "p"},
    {"id": 2, "name": "line1\nline2", "note": '"', "part": "q"},
    {"id": 3, "name": "  padded  ", "note": 'ends in a quote"', "part": "p"},
]


def test_csv_from_pythons_csv_module_round_trips_exactly(
    spark: SparkSession, local_or_s3_uri: str, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "tricky.csv", TRICKY_ROWS)
    assert b'"say ""hi"""' in source.read_bytes()
    assert cli_write(local_or_s3_uri, source, "upsert", "--key", "id", "--partition", "part") == 0
    table = hudi_rs_table(local_or_s3_uri)
    assert table is not None
    assert str(table.schema.field("id").type) == "int32"
    columns = list(TRICKY_ROWS[0])
    assert rows_by_key(table, ["_hoodie_record_key", *columns]) == {
        str(row["id"]): {"_hoodie_record_key": str(row["id"]), **row} for row in TRICKY_ROWS
    }


def test_csv_and_json_values_are_read_as_the_tables_column_types(
    spark: SparkSession, local_or_s3_uri: str, tmp_path: Path
) -> None:
    """A zip code column stays a string (inference would make 02134 the int 2134), a JSON
    number lands in the int key as an int (inference says long), text in a binary column
    is written as its UTF-8 bytes."""
    df = local_frame(
        spark, [(1, "0150", 1.5, b"\x00")], "id int, zip string, amount double, raw binary"
    )
    write(spark, df, local_or_s3_uri, "bulk_insert", WriteOptions(record_key_fields=["id"]))
    batch = write_csv(
        tmp_path / "batch.csv", [{"id": 2, "zip": "02134", "amount": 3, "raw": "abc"}]
    )
    assert cli_write(local_or_s3_uri, batch, "upsert") == 0
    lines = tmp_path / "batch.jsonl"
    lines.write_text('{"id": 3, "zip": "10115", "amount": 4, "raw": "de"}\n')
    assert cli_write(local_or_s3_uri, lines, "upsert") == 0
    table = hudi_rs_table(local_or_s3_uri)
    assert table is not None
    assert table.schema.field("id").type == pa.int32()
    rows = rows_by_key(table)
    columns = ("id", "zip", "amount", "raw")
    assert {key: {c: row[c] for c in columns} for key, row in rows.items()} == {
        "1": {"id": 1, "zip": "0150", "amount": 1.5, "raw": b"\x00"},
        "2": {"id": 2, "zip": "02134", "amount": 3.0, "raw": b"abc"},
        "3": {"id": 3, "zip": "10115", "amount": 4.0, "raw": b"de"},
    }


@pytest.fixture
def existing(spark: SparkSession, local_or_s3_uri: str) -> str:
    df = local_frame(spark, [(1, "a", "p")], "id int, name string, part string")
    write(spark, df, local_or_s3_uri, "bulk_insert", WriteOptions(record_key_fields=["id"]))
    return local_or_s3_uri


@pytest.mark.parametrize(
    ("file_name", "content", "expected"),
    [
        pytest.param(
            "short.csv",
            'id,name,part\r\n2,b,p\r\n3,"two\r\nlines",q\r\n4,d\r\n',
            "malformed CSV record at line 5 of ",
            id="csv-row-missing-a-field-after-a-quoted-newline",
        ),
        pytest.param(
            "long.csv",
            "id,name,part\n2,b,p\n3,c,q,extra\n",
            "malformed CSV record at line 3 of ",
            id="csv-row-with-an-extra-field",
        ),
        pytest.param(
            "not_an_int.csv",
            "id,name,part\n2,b,p\n2.5,c,p\n",
            "malformed CSV record at line 3 of ",
            id="csv-value-not-of-the-tables-type",
        ),
        pytest.param(
            "bad.jsonl",
            '{"id": 2, "name": "b", "part": "p"}\n{"id": 3, "name": "c"\n',
            "malformed JSON record at line 2 of ",
            id="json-line-not-closed",
        ),
        pytest.param(
            "all_bad.jsonl",
            '\n{"id": 2,\n',
            "malformed JSON record at line 2 of ",
            id="json-no-line-parses",
        ),
        pytest.param(
            "rows.parquet",
            "id,name,part\n2,b,p\n",
            "as parquet: ",
            id="csv-named-parquet",
        ),
    ],
)
def test_unreadable_input_is_refused_in_one_line_naming_where(
    existing: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    file_name: str,
    content: str,
    expected: str,
) -> None:
    source = tmp_path / file_name
    source.write_bytes(content.encode())
    before = table_bytes(existing)
    assert cli_write(existing, source, "upsert") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    message = err.strip().splitlines()[-1]
    assert message.startswith("tidemark write: error: input: ")
    assert expected in message
    assert "null" not in message and "dropped" not in message
    if file_name.endswith(".parquet"):
        assert "is not a Parquet file" in message
    assert table_bytes(existing) == before
