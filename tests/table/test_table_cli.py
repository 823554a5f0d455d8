"""``tidemark create|read|show|rollback`` in-process through tidemark.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from table.table_testkit import Writer, copy_fixture, create_people_cli, hudi_rs_rows, rows
from tidemark.cli import main
from tidemark.table import HoodieTable


def test_create_from_parquet_schema_then_read_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, uri = create_people_cli(tmp_path)
    assert code == 0
    assert "created table people" in capsys.readouterr().out
    config = HoodieTable.open(uri).config
    assert config.hive_style and config.partition_fields == ("region",)
    assert hudi_rs_rows(uri) == []
    assert main(["read", "--table", uri]) == 0
    assert "0 rows" in capsys.readouterr().out


def test_create_from_json_schema(tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    schema = json.dumps({"id": "string", "day": "date32", "n": "int64"})
    assert (
        main(["create", "--table", uri, "--schema", schema, "--key", "id,day", "--precombine", "n"])
        == 0
    )
    config = HoodieTable.open(uri).config
    assert config.record_key_fields == ("id", "day")
    assert config.key_generator_class == "org.apache.hudi.keygen.NonpartitionedKeyGenerator"


def test_read_with_where_limit_columns_and_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = copy_fixture("v6_complexkeygen_hivestyle", tmp_path)
    assert main(["read", "--table", uri, "--where", "byteField=10", "--columns", "id", "name"]) == 0
    out = capsys.readouterr().out
    assert "Alice" in out and "Carol" in out and "Bob" not in out and "2 rows" in out
    target = tmp_path / "out.json"
    assert (
        main(
            [
                "read",
                "--table",
                uri,
                "--where",
                "id=2",
                "--where",
                "name=Bob",
                "--output",
                str(target),
            ]
        )
        == 0
    )
    exported = json.loads(target.read_text())
    assert [r["_hoodie_record_key"] for r in exported] == ["id:2,name:Bob"]
    parquet = tmp_path / "out.parquet"
    assert main(["read", "--table", uri, "--limit", "3", "--output", str(parquet)]) == 0
    assert pq.read_table(parquet).num_rows == 3


def test_show_prints_timeline_and_file_groups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = copy_fixture("v6_simplekeygen_nonhivestyle_overwritetable", tmp_path)
    assert main(["show", "--table", uri]) == 0
    out = capsys.readouterr().out
    assert "20240707001303088" in out and "replacecommit" in out and "COMPLETED" in out
    assert "ebcb261d-62d3-4895-90ec-5b3c9622dff4-0" in out
    assert "88163884-fef0-4aab-865d-c72327a8a1d5-0" not in out


def test_rollback_command(people: Writer, capsys: pytest.CaptureFixture[str]) -> None:
    people.commit(rows((1, "ann", "eu", 1.0)))
    instant = people.begin()
    people.write_files(instant, rows((2, "bob", "us", 2.0)))
    assert main(["rollback", "--table", people.table.uri, "--instant", instant]) == 0
    assert f"rolled back commit {instant}" in capsys.readouterr().out
    assert [r["id"] for r in hudi_rs_rows(people.table.uri)] == [1]
    assert not list(people.table.storage.list("us/"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["read", "--table", "{tmp}"], "not a Hudi table"),
        (["read", "--table", "s3://"], "s3 URI has no bucket"),
        (["show", "--table", "s3://Bad_Bucket/t"], "uri"),
        (["show", "--table", "gs://bucket/t"], "unsupported scheme"),
        (["show", "--table", "{tmp}/t/.hoodie"], "inside a .hoodie folder"),
        (["rollback", "--table", "{fixture}", "--instant", "nope"], "instant"),
        (["rollback", "--table", "{fixture}", "--instant", "20240418173551906"], "only pending"),
        (["read", "--table", "{fixture}", "--where", "nope"], "COLUMN=VALUE"),
        (["read", "--table", "{fixture}", "--where", "missing=1"], "no such column"),
        (["read", "--table", "{fixture}", "--output", "{tmp}/x.csv"], ".parquet or .json"),
        (
            ["create", "--table", "{fixture}", "--schema", '{"id": "int64"}', "--key", "id"],
            "already exists",
        ),
        (
            ["create", "--table", "{tmp}/n", "--schema", '{"id": "int64"}', "--key", "nope"],
            "not a column",
        ),
        (["create", "--table", "{tmp}/n", "--schema", "[1", "--key", "id"], "not JSON"),
        (
            ["create", "--table", "{tmp}/n", "--schema-from", "{tmp}/none.parquet", "--key", "id"],
            "no such file",
        ),
    ],
)
def test_errors_exit_2_with_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = copy_fixture("v6_nonpartitioned", tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    args = [a.replace("{tmp}", str(tmp_path)).replace("{fixture}", fixture) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert message in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as error:
        main(["read", "--table", str(tmp_path), "--limit", "0"])
    assert error.value.code == 2
