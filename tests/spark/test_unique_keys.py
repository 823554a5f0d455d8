"""Keys are unique (issue 9): within a batch every operation keeps one row per record key,
the largest precombine value, ties to the last row in input order; ``--allow-duplicates``
keeps every row for bulk_insert and insert. hudi-rs reads each key once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark.clikit import Cli, Row, refused_in_one_line, table_state
from spark.sparkkit import hudi_rs_table, local_frame
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.validation import InputCounts, input_checks
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import RECORD_KEY


@pytest.fixture
def cli(tmp_path: Path, capfd: pytest.CaptureFixture[str], spark: SparkSession) -> Cli:
    return Cli(tmp_path, capfd)


def read_back(uri: str, *columns: str) -> dict[str, tuple[object, ...]]:
    """Record key -> the columns, as hudi-rs reads them; each key must come once."""
    table = hudi_rs_table(uri)
    assert table is not None
    keys = table.column(RECORD_KEY).to_pylist()
    assert [key for key, n in Counter(keys).items() if n > 1] == []
    return {row[RECORD_KEY]: tuple(row[c] for c in columns) for row in table.to_pylist()}


def test_every_operation_keeps_the_winning_row_per_key(cli: Cli, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    layout = ("--key", "id", "--partition", "p", "--precombine", "ts")
    first: list[Row] = [
        {"id": 1, "name": "low", "p": "a", "ts": 1},
        {"id": 1, "name": "tie-first", "p": "a", "ts": 3},
        {"id": 1, "name": "tie-last", "p": "a", "ts": 3},
        {"id": 2, "name": "high", "p": "a", "ts": 9},
        {"id": 2, "name": "lower", "p": "a", "ts": 2},
        {"id": 3, "name": "in-a", "p": "a", "ts": 5},
        {"id": 3, "name": "in-b", "p": "b", "ts": 5},
    ]
    assert cli.write(uri, first, "--op", "bulk_insert", *layout)[0] == 0
    assert read_back(uri, "name", "p") == {
        "1": ("tie-last", "a"),
        "2": ("high", "a"),
        "3": ("in-b", "b"),
    }
    insert: list[Row] = [
        {"id": 4, "name": "old", "p": "b", "ts": 7},
        {"id": 4, "name": "new", "p": "c", "ts": 8},
    ]
    assert cli.write(uri, insert, "--op", "insert")[0] == 0
    upsert: list[Row] = [
        {"id": 2, "name": "up-late", "p": "a", "ts": 4},
        {"id": 2, "name": "up-early", "p": "a", "ts": 4},
        {"id": 3, "name": "back-to-a", "p": "a", "ts": 6},
        {"id": 3, "name": "stale", "p": "c", "ts": 1},
    ]
    assert cli.write(uri, upsert, "--op", "upsert")[0] == 0
    assert read_back(uri, "name", "p") == {
        "1": ("tie-last", "a"),
        "2": ("up-early", "a"),
        "3": ("back-to-a", "a"),
        "4": ("new", "c"),
    }
    overwrite: list[Row] = [
        {"id": 5, "name": "x", "p": "c", "ts": 2},
        {"id": 5, "name": "y", "p": "c", "ts": 1},
    ]
    assert cli.write(uri, overwrite, "--op", "insert_overwrite")[0] == 0
    code, out = cli.output(
        "write", "--table", uri, "--input", _jsonl(tmp_path, [{"id": 1}, {"id": 1}, {"id": 9}]),
        "--op", "delete", "--markers", "direct", "--master", "local[2]",
    )  # fmt: skip
    assert code == 0 and "1 deleted" in out
    assert read_back(uri, "name", "p") == {
        "2": ("up-early", "a"),
        "3": ("back-to-a", "a"),
        "5": ("x", "c"),
    }


def test_composite_keys_and_allow_duplicates(cli: Cli, tmp_path: Path) -> None:
    uri = str(tmp_path / "c")
    layout = ("--key", "k1,k2", "--precombine", "ts")
    rows: list[Row] = [
        {"k1": "a", "k2": 1, "v": "first", "ts": 1},
        {"k1": "a", "k2": 1, "v": "second", "ts": 1},
        {"k1": "a", "k2": 2, "v": "other", "ts": 1},
    ]
    assert cli.write(uri, rows, "--op", "bulk_insert", *layout)[0] == 0
    assert read_back(uri, "v") == {"k1:a,k2:1": ("second",), "k1:a,k2:2": ("other",)}

    kept = str(tmp_path / "kept")
    assert cli.write(kept, rows, "--op", "bulk_insert", "--allow-duplicates", *layout)[0] == 0
    twice = [{**row, "k2": 3} for row in rows[:2]]
    assert cli.write(kept, twice, "--op", "insert", "--allow-duplicates")[0] == 0
    table = hudi_rs_table(kept)
    assert table is not None
    assert Counter(table.column(RECORD_KEY).to_pylist()) == {
        "k1:a,k2:1": 2,
        "k1:a,k2:2": 1,
        "k1:a,k2:3": 2,
    }

    before = table_state(uri)
    code, err = cli.write(uri, rows, "--op", "upsert", "--allow-duplicates")
    assert refused_in_one_line(code, err) == (
        "allow_duplicates: only bulk_insert and insert can keep duplicate keys, not upsert"
    )
    assert table_state(uri) == before


def test_validation_counts_distinct_keys_across_partitions(spark: SparkSession) -> None:
    """A key that comes in two partitions is a duplicate; the partition values of all its
    rows are still checked (``a/`` is refused even though its row loses)."""
    config = TableConfig(
        name="t",
        record_key_fields=("id",),
        partition_fields=("p",),
        precombine_field="ts",
        hive_style=False,
        avro_schema="",
        key_generator_class=TableConfig.default_key_generator(("id",), ("p",)),
    )
    schema = "id int, p string, ts long"
    unique = local_frame(spark, [(1, "a", 1), (2, "a", 1), (3, "b", 1)], schema)
    assert input_checks(unique, config, "upsert", None).run() == InputCounts(3, 3, frozenset("ab"))
    spread = local_frame(spark, [(1, "a", 1), (1, "b", 2), (2, "b", 1)], schema)
    assert input_checks(spread, config, "upsert", None).run() == InputCounts(3, 2, frozenset("ab"))
    bad = local_frame(spark, [(1, "a", 1), (1, "a/", 0)], schema)
    with pytest.raises(InvalidArgumentError) as refused:
        input_checks(bad, config, "upsert", None).run()
    assert refused.value.field == "p"


def _jsonl(folder: Path, rows: list[Row]) -> str:
    path = folder / "keys.jsonl"
    path.write_text("".join(f'{{"id": {r["id"]}}}\n' for r in rows))
    return str(path)
