"""Schema evolution Hudi accepts (issue 15): incoming int/long/float values promoted to the
table's wider type, struct fields added, and refusals naming the nested field with the
table left byte-identical. Read back by hudi-rs against a dict model, locally and on S3."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import tidemark.spark
from spark.sparkkit import (
    assert_readers_agree,
    cli_write,
    hudi_rs_table,
    local_frame,
    rows_by_key,
    table_bytes,
    write_csv,
)
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.records.schema import avro_to_arrow_schema

KEYED: dict[str, Any] = {"record_key_fields": ["id"], "partition_fields": ["part"]}


def latest_file_types(uri: str, column: str) -> set[pa.DataType]:
    """The type of ``column`` in every latest base file, and in the last commit's schema."""
    table = HoodieTable.open(uri)
    storage = open_storage(uri)
    types = set()
    for base in table.view().latest_base_files():
        with storage.open_input(base.path) as stream:
            types.add(pq.read_schema(stream).field(column).type)
    last = table.timeline.last_completed()
    assert last is not None
    schema = table.timeline.read_metadata(last).extra_metadata["schema"]
    types.add(avro_to_arrow_schema(schema).field(column).type)
    return types


def test_whole_numbers_in_csv_are_written_to_a_double_column_as_doubles(
    spark: SparkSession, local_or_s3_uri: str, tmp_path: Path
) -> None:
    df = local_frame(spark, [(1, 1.5, "p"), (2, 2.25, "q")], "id int, amount double, part string")
    write(spark, df, local_or_s3_uri, "bulk_insert", WriteOptions(**KEYED))
    batch = write_csv(
        tmp_path / "batch.csv",
        [{"id": 2, "amount": 3, "part": "q"}, {"id": 3, "amount": 4, "part": "p"}],
    )
    assert cli_write(local_or_s3_uri, batch, "upsert") == 0
    table = hudi_rs_table(local_or_s3_uri)
    assert table is not None
    assert table.schema.field("amount").type == pa.float64()
    amounts = {key: row["amount"] for key, row in rows_by_key(table).items()}
    assert amounts == {"1": 1.5, "2": 3.0, "3": 4.0}
    assert latest_file_types(local_or_s3_uri, "amount") == {pa.float64()}


def test_every_numeric_promotion_hudi_makes(spark: SparkSession, table_uri: str) -> None:
    columns = "l long, f float, d double, ld double, lf float, fd double"
    write(
        spark,
        local_frame(spark, [(1, 1, 1.5, 1.5, 1.5, 1.5, 1.5)], f"id int, {columns}"),
        table_uri,
        "bulk_insert",
        WriteOptions(record_key_fields=["id"]),
    )
    incoming = "id int, l int, f int, d int, ld long, lf long, fd float"
    write(
        spark,
        local_frame(spark, [(2, 7, 7, 7, 2**40, 2**20, 0.5)], incoming),
        table_uri,
        "upsert",
    )
    rows = assert_readers_agree(table_uri, ["id", "l", "f", "d", "ld", "lf", "fd"])
    values = {"l": 7, "f": 7.0, "d": 7.0, "ld": float(2**40), "lf": float(2**20), "fd": 0.5}
    assert {column: rows["2"][column] for column in values} == values
    expected = {"l": pa.int64(), "f": pa.float32(), "d": pa.float64(), "ld": pa.float64()}
    expected |= {"lf": pa.float32(), "fd": pa.float64()}
    for column, kind in expected.items():
        assert latest_file_types(table_uri, column) == {kind}


ADDRESS = "struct<city: string, n: bigint>"


@pytest.fixture
def nested(spark: SparkSession, local_or_s3_uri: str) -> str:
    df = local_frame(
        spark,
        [(1, ("Oslo", 10), "p"), (2, ("Rome", 20), "q")],
        f"id int, address {ADDRESS}, part string",
    )
    write(spark, df, local_or_s3_uri, "bulk_insert", WriteOptions(sort_mode="global_sort", **KEYED))
    return local_or_s3_uri


def test_a_field_added_inside_a_struct_is_accepted(spark: SparkSession, nested: str) -> None:
    df = local_frame(
        spark,
        [(2, ("Roma", 21, "00100"), "q"), (3, ("Bern", 30, "3000"), "q")],
        "id int, address struct<city: string, n: int, zip: string>, part string",
    )
    write(spark, df, nested, "upsert")
    table = hudi_rs_table(nested)
    assert table is not None
    addresses = {key: row["address"] for key, row in rows_by_key(table).items()}
    assert addresses == {
        "1": {"city": "Oslo", "n": 10, "zip": None},
        "2": {"city": "Roma", "n": 21, "zip": "00100"},
        "3": {"city": "Bern", "n": 30, "zip": "3000"},
    }


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ({"n": 1}, "address.city: column was dropped from the schema"),
        ({"city": "Oslo", "n": "ten"}, "address.n: type change long -> string is not allowed"),
    ],
)
def test_a_refused_nested_change_names_the_field_path(
    nested: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    address: dict[str, object],
    message: str,
) -> None:
    batch = tmp_path / "batch.jsonl"
    batch.write_text(json.dumps({"id": 4, "address": address, "part": "p"}) + "\n")
    before = table_bytes(nested)
    assert cli_write(nested, batch, "upsert") == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"tidemark write: error: {message}")  # then what to do
    assert table_bytes(nested) == before


def test_a_column_missing_from_a_write_is_refused_with_the_ways_on_or_written_as_null(
    spark: SparkSession, table_uri: str, tmp_path: Path
) -> None:
    """Issue 53: an upsert added ``extra`` by mistake; later batches without it are refused
    with what to do, and written with ``--set-null-for-missing-columns``."""
    write(
        spark,
        local_frame(spark, [(1, "a", "p"), (2, "b", "q")], "id int, name string, part string"),
        table_uri,
        "bulk_insert",
        WriteOptions(**KEYED),
    )
    with_extra = local_frame(
        spark, [(2, "b2", "x", "q")], "id int, name string, extra string, part string"
    )
    write(spark, with_extra, table_uri, "upsert")
    without = local_frame(spark, [(3, "c", "p")], "id int, name string, part string")
    before = table_bytes(table_uri)
    with pytest.raises(InvalidArgumentError) as refused:
        write(spark, without, table_uri, "upsert")
    assert refused.value.field == "extra"
    assert "set_null_for_missing_columns=True" in str(refused.value)
    assert table_bytes(table_uri) == before
    batch = write_csv(tmp_path / "batch.csv", [{"id": 3, "name": "c", "part": "p"}])
    assert cli_write(table_uri, batch, "upsert", "--set-null-for-missing-columns") == 0
    rows = assert_readers_agree(table_uri, ["id", "name", "extra", "part"])
    assert {key: row["extra"] for key, row in rows.items()} == {"1": None, "2": "x", "3": None}


def test_decimals_are_cast_up_to_the_table_or_widen_it_as_hudi_allows(
    spark: SparkSession, table_uri: str
) -> None:
    """Issue 53: a pandas-made decimal(4,2) into a decimal(12,2) column is written as
    decimal(12,2); a decimal(14,2) batch widens the column (Hudi's rule: more precision
    at the same scale); every file reads back exactly, by Spark and by hudi-rs."""
    write(
        spark,
        local_frame(
            spark, [(1, Decimal("1234567890.12"), "p")], "id int, amount decimal(12,2), part string"
        ),
        table_uri,
        "bulk_insert",
        WriteOptions(**KEYED),
    )
    narrow = local_frame(
        spark, [(2, Decimal("12.34"), "q")], "id int, amount decimal(4,2), part string"
    )
    write(spark, narrow, table_uri, "upsert")
    assert latest_file_types(table_uri, "amount") == {pa.decimal128(12, 2)}
    wide = local_frame(
        spark, [(3, Decimal("123456789012.34"), "q")], "id int, amount decimal(14,2), part string"
    )
    write(spark, wide, table_uri, "upsert")
    expected = {
        "1": Decimal("1234567890.12"),
        "2": Decimal("12.34"),
        "3": Decimal("123456789012.34"),
    }
    rows = assert_readers_agree(table_uri, ["id", "amount", "part"])
    assert {key: row["amount"] for key, row in rows.items()} == expected
    ours = tidemark.spark.read(spark, table_uri, reader="spark")
    assert ours.schema["amount"].dataType.simpleString() == "decimal(14,2)"
    assert {str(r["id"]): r["amount"] for r in ours.collect()} == expected
    with pytest.raises(
        InvalidArgumentError, match=r"type change decimal\(14,2\) -> decimal\(14,4\)"
    ):
        write(
            spark,
            local_frame(
                spark, [(4, Decimal("1.0000"), "q")], "id int, amount decimal(14,4), part string"
            ),
            table_uri,
            "upsert",
        )
