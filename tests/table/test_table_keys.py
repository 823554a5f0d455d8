"""Record keys, partition paths and meta columns as Hudi's key generators produce them."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from table.table_testkit import FIXTURES
from tidemark.errors import InvalidArgumentError
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import (
    base_file_name,
    new_file_id,
    parse_base_file_name,
    write_token,
)
from tidemark.table.files.reader import read_snapshot
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import (
    META_COLUMNS,
    partition_paths,
    record_keys,
    with_meta_columns,
)


def _config(keys: tuple[str, ...], partitions: tuple[str, ...], **kwargs: object) -> TableConfig:
    return TableConfig(
        name="t",
        record_key_fields=keys,
        partition_fields=partitions,
        precombine_field=None,
        hive_style=bool(kwargs.get("hive_style", False)),
        avro_schema="",
        key_generator_class=TableConfig.default_key_generator(keys, partitions),
        url_encode_partitions=bool(kwargs.get("url_encode", False)),
    )


@pytest.mark.parametrize(
    "name",
    [
        "v6_simplekeygen_nonhivestyle",
        "v6_complexkeygen_hivestyle",
        "v6_nonpartitioned",
        "v6_timebasedkeygen_nonhivestyle",
    ],
)
def test_keys_and_partitions_match_hudi_written_meta_columns(name: str) -> None:
    table = HoodieTable.open(str(FIXTURES / name))
    data = read_snapshot(HoodieTable.from_storage(table.storage))
    assert (
        record_keys(data, table.config).to_pylist() == data.column("_hoodie_record_key").to_pylist()
    )
    assert (
        partition_paths(data, table.config).to_pylist()
        == data.column("_hoodie_partition_path").to_pylist()
    )


def test_complex_keys_null_and_empty_parts() -> None:
    data = pa.table({"a": pa.array([1, None, 3]), "b": pa.array(["x", "y", ""])})
    config = _config(("a", "b"), ("b",), hive_style=True)
    assert record_keys(data, config).to_pylist() == ["a:1,b:x", "a:__null__,b:y", "a:3,b:__empty__"]
    assert partition_paths(data, config).to_pylist() == [
        "b=x",
        "b=y",
        "b=__HIVE_DEFAULT_PARTITION__",
    ]


def test_null_or_empty_simple_key_names_the_field() -> None:
    config = _config(("id",), ("p",))
    for bad in (pa.array(["1", None]), pa.array(["1", ""])):
        with pytest.raises(InvalidArgumentError) as error:
            record_keys(pa.table({"id": bad, "p": ["a", "b"]}), config)
        assert error.value.field == "id"
    with pytest.raises(InvalidArgumentError) as missing:
        record_keys(pa.table({"p": ["a"]}), config)
    assert missing.value.field == "id"
    with pytest.raises(InvalidArgumentError) as wrong_type:
        record_keys(pa.table({"id": [1.5], "p": ["a"]}), config)
    assert wrong_type.value.field == "id"


def test_partition_value_types_and_url_encoding() -> None:
    data = pa.table(
        {
            "id": [1, 2],
            "day": pa.array([datetime.date(2024, 1, 2), None]),
            "flag": [True, False],
            "city": ["São Paulo/x", "Oslo"],
        }
    )
    multi = _config(("id",), ("day", "flag"))
    assert partition_paths(data, multi).to_pylist() == [
        "2024-01-02/true",
        "__HIVE_DEFAULT_PARTITION__/false",
    ]
    encoded = _config(("id",), ("city",), url_encode=True)
    assert partition_paths(data, encoded).to_pylist() == ["São Paulo%2Fx", "Oslo"]
    assert partition_paths(data, _config(("id",), ())).to_pylist() == ["", ""]


def test_vectorised_on_a_million_rows() -> None:
    n = 1_000_000
    data = pa.table({"id": pa.array(range(n)), "region": pa.array(["eu", "us"] * (n // 2))})
    config = _config(("id",), ("region",), hive_style=True)
    keys = record_keys(data, config)
    paths = partition_paths(data, config)
    assert len(keys) == n and keys[n - 1].as_py() == str(n - 1)
    assert paths[1].as_py() == "region=us"


def test_meta_columns_come_first_in_hudi_order() -> None:
    data = pa.table({"id": [7, 8], "_hoodie_record_key": ["stale", "stale"]})
    out = with_meta_columns(
        data,
        instant="20240101000000000",
        task_partition_id=3,
        keys=pa.array(["7", "8"]),
        partition_path="p",
        file_name="f.parquet",
    )
    assert tuple(out.column_names[:5]) == META_COLUMNS
    assert out.column_names[5:] == ["id"]
    assert out.column("_hoodie_commit_seqno").to_pylist() == [
        "20240101000000000_3_0",
        "20240101000000000_3_1",
    ]
    assert out.column("_hoodie_record_key").to_pylist() == ["7", "8"]


def test_file_names() -> None:
    file_id = new_file_id()
    assert file_id.endswith("-0") and len(file_id) == 38
    name = base_file_name(file_id, write_token(1, 98, 142), "20240418172802262")
    assert name == f"{file_id}_1-98-142_20240418172802262.parquet"
    parsed = parse_base_file_name(name)
    assert (parsed.file_id, parsed.write_token, parsed.instant) == (
        file_id,
        "1-98-142",
        "20240418172802262",
    )
    for bad in (
        "x.parquet",
        f"{file_id}_1-2_20240418172802262.parquet",
        f"{file_id}_1-2-3_2024.parquet",
    ):
        with pytest.raises(InvalidArgumentError) as error:
            parse_base_file_name(bad)
        assert error.value.field == "file_name"
    with pytest.raises(InvalidArgumentError) as token:
        write_token(-1, 0, 0)
    assert token.value.field == "task_partition_id"
