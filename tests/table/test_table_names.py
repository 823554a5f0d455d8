"""Names Hudi readers accept: Avro names, partition folder names, Hudi's partition escaping."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tidemark.errors import InvalidArgumentError
from tidemark.table.records.avro_names import (
    avro_name,
    check_column_names,
    check_partition_nesting,
    check_partition_segment,
    table_name_from_uri,
)
from tidemark.table.records.keys import escape_partition_value


def test_avro_names_are_sanitised_as_hudi_does() -> None:
    assert avro_name("café") == "caf__"
    assert avro_name("1st-table") == "__st__table"
    assert avro_name("orders_2024") == "orders_2024"
    assert table_name_from_uri("s3://bucket/lake/café/") == "caf_"
    assert table_name_from_uri("/data/2024-sales") == "t_2024_sales"


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        (pa.schema([("id", pa.int64()), ("ID", pa.int64())]), "ID"),
        (pa.schema([("_Hoodie_Record_Key", pa.string())]), "_Hoodie_Record_Key"),
        (pa.schema([("_TM_hash", pa.int64())]), "_TM_hash"),
        (pa.schema([("s", pa.struct([("zip code", pa.string())]))]), "s.zip code"),
        (pa.schema([("l", pa.list_(pa.struct([("a-b", pa.int8())])))]), "l.a-b"),
        (pa.schema([("naïve", pa.int64())]), "naïve"),
    ],
)
def test_column_names_hudi_readers_cannot_read_are_refused(schema: pa.Schema, field: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        check_column_names(schema)
    assert refused.value.field == field


def test_valid_column_names_pass() -> None:
    check_column_names(pa.schema([("_hoodie_is_deleted", pa.bool_()), ("a_1", pa.int8())]))


def test_hudi_partition_escaping() -> None:
    """PartitionPathEncodeUtils.escapePathName: ASCII specials and controls only."""
    specials = "\"#%'*/:=?\\{[]^\x7f\x01\n"
    assert escape_partition_value(specials) == "".join(f"%{ord(c):02X}" for c in specials)
    assert escape_partition_value("São Paulo ~!@$&()+,;<>|`") == "São Paulo ~!@$&()+,;<>|`"


@pytest.mark.parametrize(
    ("segment", "problem"),
    [
        ("", "empty"),
        ("a//b", "empty"),
        ("..", "'..'"),
        ("p=x/.", "'.'"),
        (".hoodie_partition_metadata", ".hoodie"),
        ("a\tb", "control"),
        ("a\\b", "backslash"),
        ("é" * 128, "256 bytes"),
    ],
)
def test_partition_folders_that_cannot_be(segment: str, problem: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        check_partition_segment("p", "v", segment)
    assert refused.value.field == "p" and problem in str(refused.value)


def test_partition_nesting_against_batch_and_table() -> None:
    check_partition_nesting({"2024/01/01": "d", "2024/01/02": "d"}, ["2023/12/31", "x"])
    with pytest.raises(InvalidArgumentError, match="inside partition '2024/01'"):
        check_partition_nesting({"2024/01/01": "d"}, ["2024/01"])
    with pytest.raises(InvalidArgumentError, match="would contain the table's partition"):
        check_partition_nesting({"2024": "d"}, ["2024/01/01"])
    with pytest.raises(InvalidArgumentError) as refused:
        check_partition_nesting({"a": "p", "a/b": "q"}, [])
    assert refused.value.field == "q"
