"""Issue 21: no input loses, merges or relabels a value without saying so. Each case is
either written exactly (read back with hudi-rs against a model of the rows sent) or
refused in one line, leaving the table byte-identical. Local file system and local S3."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark.clikit import Cli, Row, refused_in_one_line, table_state
from spark.sparkkit import hudi_rs_table, rows_by_key
from tidemark.table import HoodieTable
from tidemark.table.records.keys import IS_DELETED


@pytest.fixture
def cli(tmp_path: Path, capfd: pytest.CaptureFixture[str], spark: SparkSession) -> Cli:
    return Cli(tmp_path, capfd)


def table_rows(uri: str, columns: list[str]) -> dict[str, dict[str, Any]]:
    """hudi-rs's rows by record key, with ``columns`` only."""
    return {
        key: {name: row[name] for name in columns}
        for key, row in rows_by_key(hudi_rs_table(uri)).items()
    }


def created(cli: Cli, uri: str, rows: list[Row], *options: str) -> dict[str, bytes]:
    """A table made from ``rows`` (key ``id``, partition ``p``); its bytes."""
    code, err = cli.write(uri, rows, "--op", "bulk_insert", "--key", "id", *options)
    assert code == 0, err
    return table_state(uri)


BASE: list[Row] = [{"id": 1, "v": "a", "p": "x"}, {"id": 2, "v": "b", "p": "y"}]


MALFORMED_JSON_LINES = {
    "two": ('{"id": 5, "v": "e", "p": "x"} {"id": 6, "v": "f", "p": "x"}\n', 1),
    "comma": ('{"id": 5, "v": "e", "p": "x"},{"id": 6, "v": "f", "p": "x"}\n', 1),
    "closing-bracket": ('{"id": 5, "v": "e", "p": "x"}]\n', 1),
    "trailing-text": ('{"id": 5, "v": "e", "p": "x"} trailing\n', 1),
    "array": ('\n{"id": 5, "v": "e", "p": "x"}\n[{"id": 6}, {"id": 7}]\n', 3),
    "array-of-one": ('{"id": 5, "v": "e", "p": "x"}\n[{"id": 6}]\n', 2),
    "number": ('{"id": 5, "v": "e", "p": "x"}\n7\n', 2),
    "field-twice": ('{"id": 5, "v": "e", "V": "f", "p": "x"}\n', 1),
}
"""Input text whose JSON lines are not one object each, by name: (text, first bad line)."""


def test_case1_a_json_line_not_one_object_is_refused(cli: Cli, local_or_s3_uri: str) -> None:
    """Every malformed input is refused against one table (a refusal changes nothing, so
    the cases need not each make their own), then well-formed lines are written."""
    before = created(cli, local_or_s3_uri, BASE, "--partition", "p")
    for name, (text, line) in MALFORMED_JSON_LINES.items():
        message = refused_in_one_line(*cli.write_text(local_or_s3_uri, text, "--op", "upsert"))
        assert message.startswith(f"input: malformed JSON record at line {line} of "), (
            name,
            message,
        )
        assert table_state(local_or_s3_uri) == before, name
    # one object per line, spaces and blank lines around it, strings holding braces: written
    good = '  {"id": 5, "v": "} {", "p": "x"}  \n\n{"id": 6, "v": "[1]", "p": "y"}\n'
    assert cli.write_text(local_or_s3_uri, good, "--op", "upsert")[0] == 0
    assert table_rows(local_or_s3_uri, ["id", "v"]) == {
        "1": {"id": 1, "v": "a"},
        "2": {"id": 2, "v": "b"},
        "5": {"id": 5, "v": "} {"},
        "6": {"id": 6, "v": "[1]"},
    }


def test_case2_csv_inference_never_changes_a_key_or_partition_value(
    cli: Cli, local_or_s3_uri: str
) -> None:
    """``007``, ``7``, ``07`` and ``1e1`` stay four keys (inferred as doubles they would be
    7.0 three times); partition values ``TRUE``, ``true`` and ``True`` stay three folders
    (inferred as booleans they would be one); a key column whose inferred type keeps every
    value's text stays typed (``n`` is an int), and other columns are inferred as before."""
    rows = [
        {"code": "007", "p": "TRUE", "v": "1e3"},
        {"code": "7", "p": "true", "v": "2"},
        {"code": "07", "p": "True", "v": "3"},
        {"code": "1e1", "p": "false", "v": "4"},
    ]
    options = ("--op", "upsert", "--key", "code", "--partition", "p")
    assert cli.write(local_or_s3_uri, rows, *options, fmt="csv")[0] == 0
    table = hudi_rs_table(local_or_s3_uri)
    assert table is not None
    assert table.schema.field("code").type == pa.string()
    assert table.schema.field("p").type == pa.string()
    assert table.schema.field("v").type == pa.float64()
    assert table_rows(local_or_s3_uri, ["code", "p", "_hoodie_partition_path"]) == {
        row["code"]: {"code": row["code"], "p": row["p"], "_hoodie_partition_path": row["p"]}
        for row in rows
    }
    second = f"{local_or_s3_uri}-typed"
    typed = [{"n": 1, "v": "a"}, {"n": 2, "v": "b"}]
    assert cli.write(second, typed, "--op", "upsert", "--key", "n", fmt="csv")[0] == 0
    table = hudi_rs_table(second)
    assert table is not None and table.schema.field("n").type == pa.int32()


def _parquet(folder: Path, name: str, table: pa.Table) -> Path:
    path = folder / name
    pq.write_table(table, path)
    return path


def _utc(value: dt.datetime) -> dt.datetime:
    """An instant as a naive UTC datetime, however a reader labels it."""
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


def test_case3_naive_timestamps_are_refused_never_relabelled(
    cli: Cli, local_or_s3_uri: str, tmp_path: Path
) -> None:
    """Naive timestamps would be local-timestamp-micros (unreadable by hudi-rs) or
    relabelled instants: refused. Zoned ones are the same instants through Parquet, JSON
    and CSV, whatever zone the text gives."""
    wall = [dt.datetime(2024, 3, 1, 9, 30), dt.datetime(1999, 12, 31, 23, 59, 59, 123456)]
    ids = pa.array([1, 2], pa.int32())
    naive = pa.table({"id": ids, "at": pa.array(wall, pa.timestamp("us"))})
    path = _parquet(tmp_path, "naive.parquet", naive)
    missing = f"{local_or_s3_uri}-naive"
    message = refused_in_one_line(*cli.write_file(missing, path, "--op", "upsert", "--key", "id"))
    assert message.startswith("at: timestamps without a time zone cannot be written"), message
    assert table_state(missing) == {}
    zoned = pa.table({"id": ids, "at": pa.array(wall, pa.timestamp("us", tz="UTC"))})
    zoned_path = _parquet(tmp_path, "zoned.parquet", zoned)
    assert cli.write_file(local_or_s3_uri, zoned_path, "--op", "upsert", "--key", "id")[0] == 0
    table = HoodieTable.open(local_or_s3_uri)
    fields = {f["name"]: f["type"][1] for f in json.loads(table.current_avro_schema())["fields"]}
    assert fields["at"]["logicalType"] == "timestamp-micros"
    before = table_state(local_or_s3_uri)
    message = refused_in_one_line(*cli.write_file(local_or_s3_uri, path, "--op", "upsert"))
    assert message.startswith("at: timestamps without a time zone"), message
    assert table_state(local_or_s3_uri) == before
    text = '{"id": 3, "at": "2024-03-01T10:00:00+02:00"}\n'
    assert cli.write_text(local_or_s3_uri, text, "--op", "upsert")[0] == 0
    csv_text = "id,at\r\n4,2024-03-01T10:00:00Z\r\n"
    assert cli.write_text(local_or_s3_uri, csv_text, "--op", "upsert", fmt="csv")[0] == 0
    read = table_rows(local_or_s3_uri, ["at"])
    assert {key: _utc(row["at"]) for key, row in read.items()} == {
        "1": wall[0],
        "2": wall[1],
        "3": dt.datetime(2024, 3, 1, 8),
        "4": dt.datetime(2024, 3, 1, 10),
    }


def _flagged(key: int, value: str, partition: str, deleted: bool | None) -> Row:
    return {"id": key, "v": value, "p": partition, IS_DELETED: deleted}


def test_case4_hoodie_is_deleted_rows_delete_their_keys(cli: Cli, local_or_s3_uri: str) -> None:
    """A flagged row deletes its key where the table holds it (upsert; moving partition
    too) and is not written where nothing is looked up (bulk_insert, insert without an
    index, insert_overwrite); a null flag is false; the last row of a key decides."""
    rows = [_flagged(i, f"v{i}", "x", False) for i in (1, 2, 3)]
    created(cli, local_or_s3_uri, [*rows, _flagged(9, "gone", "x", True)], "--partition", "p")
    revived = [
        _flagged(1, "z", "x", False),
        _flagged(1, "z", "x", True),
        _flagged(6, "no", "x", True),
        _flagged(6, "v6", "x", False),
    ]
    steps: list[tuple[str, list[Row], dict[str, str]]] = [
        ("bulk_insert", [], {"1": "v1", "2": "v2", "3": "v3"}),
        (
            "upsert",
            [
                _flagged(2, "w", "x", True),
                _flagged(3, "new", "y", None),
                _flagged(4, "never", "x", True),
                _flagged(5, "v5", "y", False),
            ],
            {"1": "v1", "3": "new", "5": "v5"},
        ),
        ("insert", revived, {"1": "v1", "3": "new", "5": "v5", "6": "v6"}),
        ("insert_overwrite", revived, {"3": "new", "5": "v5", "6": "v6"}),
    ]
    for operation, batch, expected in steps:
        if batch:
            code, err = cli.write(local_or_s3_uri, batch, "--op", operation)
            assert code == 0, err
        read = table_rows(local_or_s3_uri, ["v", IS_DELETED])
        assert {key: row["v"] for key, row in read.items()} == expected, operation
    assert read["3"][IS_DELETED] is None and read["5"][IS_DELETED] is False
    missing = f"{local_or_s3_uri}-new"
    flag_as_text = [{"id": 7, "v": "t", "p": "x", IS_DELETED: "yes"}]
    message = refused_in_one_line(
        *cli.write(missing, flag_as_text, "--op", "upsert", "--key", "id")
    )
    assert message.startswith(f"{IS_DELETED}: "), message
    assert table_state(missing) == {}


@pytest.mark.parametrize("uri_kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_case5_a_partition_path_longer_than_the_storage_allows_is_refused(
    cli: Cli, uri_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    uri = request.getfixturevalue("s3_bucket") if uri_kind == "s3" else str(tmp_path / "t")
    before = created(cli, uri, BASE, "--partition", "p")
    folders = 17 if uri_kind == "local" else 5
    deep = "/".join(["f" * 250] * folders)
    message = refused_in_one_line(
        *cli.write(uri, [{"id": 3, "v": "c", "p": deep}], "--op", "upsert")
    )
    assert message.startswith("p: partition path ") and "too long for the storage" in message
    assert table_state(uri) == before
    fits = "/".join(["f" * 250] * 2)
    assert cli.write(uri, [{"id": 3, "v": "c", "p": fits}], "--op", "upsert")[0] == 0
    assert table_rows(uri, ["id", "_hoodie_partition_path"])["3"] == {
        "id": 3,
        "_hoodie_partition_path": fits,
    }


@pytest.mark.parametrize(
    ("header", "field"),
    [
        pytest.param("id,v,v", "v", id="repeated"),
        pytest.param("id,v,V", "V", id="repeated-in-another-case"),
        pytest.param("id,,v", "input", id="empty"),
    ],
)
def test_case6_a_csv_header_spark_would_rename_is_refused(
    cli: Cli, local_or_s3_uri: str, header: str, field: str
) -> None:
    before = created(cli, local_or_s3_uri, BASE)
    text = f"{header}\r\n3,c,d\r\n"
    code, err = cli.write_text(local_or_s3_uri, text, "--op", "upsert", fmt="csv")
    message = refused_in_one_line(code, err)
    assert message.startswith(f"{field}: the CSV header of "), message
    assert table_state(local_or_s3_uri) == before
    assert table_rows(local_or_s3_uri, ["id", "v"]) == {
        "1": {"id": 1, "v": "a"},
        "2": {"id": 2, "v": "b"},
    }


def test_case8_insert_overwrite_of_a_key_held_elsewhere_is_refused_before_writing(
    cli: Cli, table_uri: str
) -> None:
    """With a record index, an insert_overwrite of a key another partition holds is
    refused before any file is written: no pending instant is left behind."""
    created(cli, table_uri, BASE, "--partition", "p")
    assert cli.run("index", "build", "--table", table_uri, "--master", "local[2]")[0] == 0
    before = table_state(table_uri)
    moved = [{"id": 3, "v": "c", "p": "x"}, {"id": 2, "v": "moved", "p": "x"}]
    message = refused_in_one_line(*cli.write(table_uri, moved, "--op", "insert_overwrite"))
    assert message.startswith("key: key '2' is already in the table"), message
    assert table_state(table_uri) == before
    assert table_rows(table_uri, ["v"]) == {"1": {"v": "a"}, "2": {"v": "b"}}


def test_case8_index_build_and_cluster_run_check_arguments_before_spark_starts(
    cli: Cli, table_uri: str
) -> None:
    """Run as a user runs them (a fresh process): refused in one line, and no JVM started
    (Spark logs its log4j profile when it starts)."""
    created(cli, table_uri, BASE)
    before = table_state(table_uri)
    root = Path(__file__).parents[2]
    for command, argv in (
        ("index build", ["--shards", "0"]),
        ("cluster run", ["--instant", "20990101000000000"]),
        ("cluster run", ["--row-group-mb", "0"]),
        ("cluster run", ["--row-group-mb", "nan"]),
    ):
        finished = subprocess.run(
            [sys.executable, "-m", "tidemark.cli", *command.split(), "--table", table_uri, *argv],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(root)},
            check=False,
        )
        refused_in_one_line(finished.returncode, finished.stderr, command.split()[0])
        assert "log4j" not in finished.stderr, finished.stderr
    assert table_state(table_uri) == before


def test_case7_smaller_items_from_the_first_round(cli: Cli, table_uri: str, tmp_path: Path) -> None:
    """Size options by their CLI names (``--small-file-mb 0`` turns the top-up off); a
    missing table says ``--key`` creates it; an empty column name says where it is; ``read
    --where`` takes ``+1`` for an integer and keeps a column only later files have; ``read
    --output x.json`` writes binary as base64 and maps as objects."""
    message = refused_in_one_line(*cli.write(table_uri, BASE, "--op", "upsert"))
    assert message.startswith("table: ") and "(--key)" in message, message
    assert table_state(table_uri) == {}
    message = refused_in_one_line(
        *cli.write(table_uri, BASE, "--op", "upsert", "--key", "id", "--target-file-mb", "0")
    )
    assert message == "target_file_mb: must be > 0, got 0", message
    created(cli, table_uri, BASE, "--small-file-mb", "0")
    before = table_state(table_uri)
    unnamed = pa.table({"id": pa.array([3], pa.int32()), "": ["?"], "v": ["c"], "p": ["x"]})
    message = refused_in_one_line(
        *cli.write_file(table_uri, _parquet(tmp_path, "unnamed.parquet", unnamed), "--op", "upsert")
    )
    assert message.startswith("column 2: has an empty name (after 'id', before 'v')"), message
    assert table_state(table_uri) == before
    later = pa.table(
        {
            "id": pa.array([3], pa.int32()),
            "v": ["c"],
            "p": ["x"],
            "raw": [b"\x00\xff"],
            "attrs": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        }
    )
    added = _parquet(tmp_path, "later.parquet", later)
    assert cli.write_file(table_uri, added, "--op", "upsert", "--small-file-mb", "0")[0] == 0
    assert len(HoodieTable.open(table_uri).view().latest_base_files()) == 2  # no top-up
    output = tmp_path / "rows.json"
    for where, expected in (
        ("id=+1", [{"id": 1, "raw": None, "attrs": None}]),
        ("id=3", [{"id": 3, "raw": "AP8=", "attrs": {"k": 1}}]),
    ):
        code, _ = cli.output(
            "read", "--table", table_uri, "--where", where, "--output", str(output)
        )
        assert code == 0
        rows = json.loads(output.read_text())
        assert [{name: row[name] for name in ("id", "raw", "attrs")} for row in rows] == expected
    assert table_rows(table_uri, ["raw", "attrs"])["1"] == {"raw": None, "attrs": None}
