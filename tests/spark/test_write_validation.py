"""Issue 15's awkward inputs through the CLI, on the local file system and the local S3
server: each is refused in one line naming the column and a value, leaving the table (or
its absence) byte-identical, or written so that hudi-rs reads exactly the rows sent."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark.clikit import Cli, Row, refused_in_one_line, table_state
from spark.sparkkit import hudi_rs_table
from tidemark.cli import main
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.read import read_dataframe
from tidemark.storage.s3 import s3_client
from tidemark.table import HoodieTable

BASE_ROWS: list[Row] = [
    {"id": 1, "name": "one", "p": "x", "ts": 1},
    {"id": 2, "name": "two", "p": "a/b", "ts": 1},
    {"id": 3, "name": "three", "p": None, "ts": 1},
]
COMPOSITE_ROWS: list[Row] = [{"k1": "a", "k2": "b", "p": "x", "ts": 1}]


def readable_rows(uri: str, columns: list[str]) -> list[tuple[Any, ...]]:
    table = hudi_rs_table(uri)
    assert table is not None
    return sorted(tuple(row[c] for c in columns) for row in table.to_pylist())


@pytest.fixture(scope="module", params=["local", "s3"])
def root(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, s3_server: str
) -> str:
    if request.param == "local":
        return str(tmp_path_factory.mktemp("validation"))
    bucket = f"tm-{uuid.uuid4().hex[:16]}"
    s3_client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}"


@pytest.fixture
def cli(tmp_path: Path, capfd: pytest.CaptureFixture[str], spark: SparkSession) -> Cli:
    return Cli(tmp_path, capfd)


@pytest.fixture(scope="module")
def tables(
    root: str, tmp_path_factory: pytest.TempPathFactory, spark: SparkSession
) -> Iterator[dict[str, str]]:
    """A simple-key table (partitions ``x``, ``a/b`` and the default one) and a
    composite-key table, written once per storage."""
    folder = tmp_path_factory.mktemp("inputs")
    made = {"simple": f"{root}/simple", "composite": f"{root}/composite"}
    for name, rows, key in (
        ("simple", BASE_ROWS, "id"),
        ("composite", COMPOSITE_ROWS, "k1,k2"),
    ):
        source = folder / f"{name}.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in rows))
        argv = ["write", "--table", made[name], "--input", str(source), "--op", "bulk_insert"]
        argv += ["--key", key, "--partition", "p", "--precombine", "ts", "--markers", "direct"]
        assert main(argv) == 0
    yield made


def _row(**changes: Any) -> Row:
    return {"id": 7, "name": "n", "p": "y", "ts": 2} | changes


REFUSED_ON_SIMPLE: dict[str, tuple[list[Row], tuple[str, ...], str, str]] = {
    # item 1: a partition folder inside another (of the table or the batch)
    "1_nests_under_table_partition": ([_row(p="x/y")], (), "p", "'x/y'"),
    "1_nests_over_table_partition": ([_row(p="a")], (), "p", "'a'"),
    "1_nests_inside_the_batch": ([_row(p="m"), _row(id=8, p="m/n")], (), "p", "'m/n'"),
    # item 2: the metadata folder
    "2_hoodie": ([_row(p=".hoodie")], (), "p", "'.hoodie'"),
    "2_hoodie_archived": ([_row(p=".hoodie/archived")], (), "p", "'.hoodie/archived'"),
    # item 3 and 10: column names that are not Avro names
    "3_space": ([_row() | {"unit price": 1.5}], (), "unit price", "Avro"),
    "3_dash": ([_row() | {"order-date": "d"}], (), "order-date", "Avro"),
    "3_digit": ([_row() | {"1st": 1}], (), "1st", "Avro"),
    "3_non_ascii": ([_row() | {"prix_€": 1}], (), "prix_€", "Avro"),
    "10_dot": ([_row() | {"a.b": 1}], (), "a.b", "Avro"),
    "3_nested": ([_row() | {"s": {"zip code": 1}}], (), "s.zip code", "Avro"),
    # item 6: layout flags against hoodie.properties
    "6_precombine": ([_row() | {"o": 1}], ("--precombine", "o"), "precombine_field", "'ts'"),
    "6_hive_style": ([_row()], ("--hive-style",), "hive_style", "hive-style"),
    "6_urlencode": ([_row()], ("--urlencode-partitions",), "url_encode_partitions", "URL"),
    # item 9: values that cannot be folders
    "9_dot": ([_row(p=".")], (), "p", "'.'"),
    "9_dotdot": ([_row(p="..")], (), "p", "'..'"),
    "9_trailing_slash": ([_row(p="q/")], (), "p", "'q/'"),
    "9_backslash": ([_row(p="a\\b")], (), "p", "backslash"),
    "9_newline": ([_row(p="a\nb")], (), "p", "control character"),
    "9_long_segment": ([_row(p="s" * 300)], (), "p", "300 bytes"),
    # issue 21: Hudi's changelog column
    "21_hoodie_operation": (
        [_row() | {"_hoodie_operation": "D"}],
        (),
        "_hoodie_operation",
        "changelog",
    ),
    # precombine: Hudi refuses a null ordering value
    "null_precombine": ([_row(ts=None), _row(id=8)], (), "ts", "null in 1 rows"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_ON_SIMPLE))
def test_refused_before_the_table_changes(cli: Cli, tables: dict[str, str], case: str) -> None:
    rows, options, field, value = REFUSED_ON_SIMPLE[case]
    before = table_state(tables["simple"])
    code, err = cli.write(tables["simple"], rows, "--op", "upsert", *options)
    message = refused_in_one_line(code, err)
    assert message.startswith(f"{field}") and value in message, message
    assert table_state(tables["simple"]) == before


INTERNAL_COLUMNS = ["_tm_arrival", "_tm_bucket", "_tm_delete", "_tm_hash", "_tm_old_file_id"]


@pytest.mark.parametrize(
    ("operation", "column"),
    [(op, column) for op in ("upsert", "insert", "delete") for column in ("id", "_tm_rank")]
    + [("delete", column) for column in INTERNAL_COLUMNS],
)
def test_null_keys_and_internal_column_names_per_operation(
    cli: Cli, tables: dict[str, str], operation: str, column: str
) -> None:
    """Items 8 and 10: one line for every operation, not an executor trace."""
    rows = [_row(id=None), _row(id=8)] if column == "id" else [_row() | {column: 1}]
    before = table_state(tables["simple"])
    message = refused_in_one_line(*cli.write(tables["simple"], rows, "--op", operation))
    expected = "null in 1 rows" if column == "id" else "reserved"
    assert message.startswith(f"{column}: ") and expected in message, message
    assert table_state(tables["simple"]) == before


@pytest.mark.parametrize("value", ["a,b", "x:y", "__null__", "__empty__"])
def test_composite_key_values_hudi_cannot_separate(
    cli: Cli, tables: dict[str, str], value: str
) -> None:
    """Item 5: such values would merge distinct rows in field:value,field:value."""
    before = table_state(tables["composite"])
    rows = [{"k1": "a", "k2": "c", "p": "x", "ts": 1}, {"k1": "a", "k2": value, "p": "x", "ts": 1}]
    message = refused_in_one_line(*cli.write(tables["composite"], rows, "--op", "upsert"))
    assert message.startswith("k2: ") and repr(value) in message, message
    assert table_state(tables["composite"]) == before


def test_a_bad_first_write_creates_no_table(cli: Cli, root: str) -> None:
    uri = f"{root}/never-{uuid.uuid4().hex[:6]}"
    for rows, field in (
        ([_row(p="..")], "p"),
        ([_row(id=None), _row(id=8)], "id"),
        ([_row() | {"unit price": 1}], "unit price"),
        ([_row(id=1.5)], "id"),  # item 10: a key of an unsupported type
    ):
        code, err = cli.write(uri, rows, "--op", "upsert", "--key", "id", "--partition", "p")
        assert refused_in_one_line(code, err).startswith(f"{field}: ")
        assert table_state(uri) == {}


def test_non_ascii_table_folder_gets_a_valid_avro_name(cli: Cli, root: str) -> None:
    """Item 3: ``café`` as a folder is fine; the record name is sanitised as Hudi does."""
    uri = f"{root}/café-{uuid.uuid4().hex[:6]}"
    code, err = cli.write(uri, [_row()], "--op", "insert", "--key", "id", "--partition", "p")
    assert code == 0, err
    table = HoodieTable.open(uri)
    assert table.config.name.startswith("caf_")
    assert readable_rows(uri, ["id", "p"]) == [(7, "y")]


def test_create_refuses_a_non_ascii_name_and_bad_columns(
    cli: Cli, root: str, tmp_path: Path
) -> None:
    uri = f"{root}/created-{uuid.uuid4().hex[:6]}"
    schema = json.dumps({"id": "int64", "p": "string"})
    base = ["create", "--table", uri, "--key", "id", "--partition", "p"]
    message = refused_in_one_line(*cli.run(*base, "--schema", schema, "--name", "tàble"), "create")
    assert message.startswith("name: ") and "'tàble'" in message
    bad = json.dumps({"id": "int64", "p": "string", "unit price": "double"})
    message = refused_in_one_line(*cli.run(*base, "--schema", bad), "create")
    assert message.startswith("unit price: ")
    assert table_state(uri) == {}
    code, err = cli.run(*base, "--schema", schema, "--urlencode-partitions")
    assert code == 0, err
    assert HoodieTable.open(uri).config.url_encode_partitions


def test_url_encoded_partitions_store_what_plain_folders_cannot(cli: Cli, root: str) -> None:
    """Deliver 2: with the table's urlencode setting, '/', '\\', control characters and ':'
    are escaped as Hudi's PartitionPathEncodeUtils does; hudi-rs reads every row."""
    uri = f"{root}/encoded-{uuid.uuid4().hex[:6]}"
    values = ["a/b", "a", "c\\d", "e\nf", "g:h", "100%", "café"]
    rows = [_row(id=i, p=v) for i, v in enumerate(values)]
    options = ("--key", "id", "--partition", "p", "--urlencode-partitions")
    code, err = cli.write(uri, rows, "--op", "insert", *options)
    assert code == 0, err
    assert readable_rows(uri, ["id", "p"]) == sorted(enumerate(values))
    partitions = {f.partition_path for f in HoodieTable.open(uri).view().latest_base_files()}
    assert partitions == {"a%2Fb", "a", "c%5Cd", "e%0Af", "g%3Ah", "100%25", "café"}
    message = refused_in_one_line(*cli.write(uri, [_row(p="..")], "--op", "upsert"))
    assert message.startswith("p: ") and "'..'" in message


def test_read_where_matches_values_as_typed(cli: Cli, tables: dict[str, str]) -> None:
    """Item 12: ``p=`` finds the default partition, ``id=01`` the int key 1, ``id=abc``
    is an error; ``--output`` into a missing folder is one line."""
    uri = tables["simple"]
    code, out = cli.output("read", "--table", uri, "--where", "p=")
    assert code == 0 and "three" in out and "one" not in out and "1 rows" in out
    code, out = cli.output("read", "--table", uri, "--where", "id=01")
    assert code == 0 and "one" in out and "1 rows" in out
    message = refused_in_one_line(*cli.run("read", "--table", uri, "--where", "id=abc"), "read")
    assert message.startswith("id: ") and "'abc'" in message
    missing = "/nonexistent-folder/out.parquet"
    message = refused_in_one_line(*cli.run("read", "--table", uri, "--output", missing), "read")
    assert message.startswith("output: ") and "does not exist" in message


def test_read_dataframe_where_matches_values_as_typed(
    spark: SparkSession, tables: dict[str, str]
) -> None:
    """Item 12 for the Spark reader: the same typing and default partition."""
    uri = tables["simple"]
    assert [
        r["id"] for r in read_dataframe(spark, HoodieTable.open(uri), where={"p": ""}).collect()
    ] == [3]
    assert [
        r["name"]
        for r in read_dataframe(spark, HoodieTable.open(uri), where={"id": "01"}).collect()
    ] == ["one"]
    with pytest.raises(InvalidArgumentError) as refused:
        read_dataframe(spark, HoodieTable.open(uri), where={"id": "abc"})
    assert refused.value.field == "id"
