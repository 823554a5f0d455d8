"""Partition paths of the timestamp-based and custom key generators, from the options
Hudi stores in hoodie.properties (the Hudi-written fixture is checked in test_table_keys)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from table.table_testkit import people_config
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.table.properties.config import (
    CUSTOM_KEY_GENERATOR,
    TIMESTAMP_KEY_GENERATOR,
    TableConfig,
)
from tidemark.table.records.keys import partition_paths, record_keys

MS_2023_04_03_12_01 = 1_680_523_260_123


def _config(partition_fields: str, generator: str, **options: str) -> TableConfig:
    props = people_config().to_properties() | {
        "hoodie.table.partition.fields": partition_fields,
        "hoodie.table.keygenerator.class": generator,
    }
    props |= {f"hoodie.keygen.timebased.{key.replace('_', '.')}": v for key, v in options.items()}
    return TableConfig.from_properties(props)


@pytest.mark.parametrize(
    ("kind", "value", "unit"),
    [
        ("EPOCHMILLISECONDS", MS_2023_04_03_12_01, None),
        ("UNIX_TIMESTAMP", MS_2023_04_03_12_01 // 1000, None),
        ("SCALAR", MS_2023_04_03_12_01 // 3_600_000, "HOURS"),
    ],
)
def test_numeric_types(kind: str, value: int, unit: str | None) -> None:
    options = {"timestamp_type": kind, "output_dateformat": "yyyy/MM/dd/HH"}
    if unit:
        options["timestamp_scalar_time_unit"] = unit
    config = _config("ts", TIMESTAMP_KEY_GENERATOR, **options)
    data = pa.table({"id": [1, 2], "ts": pa.array([value, None], pa.int64())})
    assert partition_paths(data, config).to_pylist() == ["2023/04/03/12", "1970/01/01/00"]
    assert record_keys(data, config).to_pylist() == ["1", "2"]


def test_date_strings_output_zone_literals_and_hive_style() -> None:
    config = _config(
        "ts",
        TIMESTAMP_KEY_GENERATOR,
        input_dateformat="yyyy-MM-dd'T'HH:mm:ss.SSSZ",
        output_dateformat="'day='yyyyMMdd",
        output_timezone="Asia/Kolkata",
    )
    data = pa.table({"id": [1, 2], "ts": ["2023-04-03T20:01:00.123Z", "2023-04-03T12:01:00.5Z"]})
    assert partition_paths(data, config).to_pylist() == ["day=20230404", "day=20230403"]
    hive = TableConfig(**{**config.__dict__, "hive_style": True})
    assert partition_paths(data, hive).to_pylist() == ["ts=day=20230404", "ts=day=20230403"]


def test_custom_key_generator_mixes_simple_and_timestamp_fields() -> None:
    config = _config(
        "region:SIMPLE,ts:TIMESTAMP",
        CUSTOM_KEY_GENERATOR,
        timestamp_type="EPOCHMILLISECONDS",
        output_dateformat="yyyy-MM",
    )
    assert config.partition_fields == ("region", "ts")
    data = pa.table({"id": [7], "region": ["eu"], "ts": [MS_2023_04_03_12_01]})
    assert partition_paths(data, config).to_pylist() == ["eu/2023-04"]
    assert record_keys(data, config).to_pylist() == ["7"]


@pytest.mark.parametrize(
    ("fields", "generator", "options", "column", "field"),
    [
        ("region,ts", CUSTOM_KEY_GENERATOR, {}, ["x"], "hoodie.table.partition.fields"),
        (
            "ts",
            TIMESTAMP_KEY_GENERATOR,
            {"output_dateformat": "yyyy"},
            [1],
            "hoodie.keygen.timebased.timestamp.type",
        ),
        (
            "ts",
            TIMESTAMP_KEY_GENERATOR,
            {"timestamp_type": "EPOCHMILLISECONDS", "output_dateformat": "yyyy-ww"},
            [1],
            "hoodie.keygen.timebased.output.dateformat",
        ),
    ],
)
def test_unusable_options_are_refused_naming_the_key(
    fields: str, generator: str, options: dict[str, str], column: list[object], field: str
) -> None:
    config = _config(fields, generator, **options)
    data = pa.table({"id": [1], "region": ["eu"], "ts": column})
    with pytest.raises(FailedPreconditionError) as refused:
        partition_paths(data, config)
    assert refused.value.field == field


def test_a_string_not_matching_the_input_format_names_the_field() -> None:
    config = _config(
        "ts", TIMESTAMP_KEY_GENERATOR, input_dateformat="yyyy-MM-dd", output_dateformat="yyyy"
    )
    with pytest.raises(InvalidArgumentError) as bad:
        partition_paths(pa.table({"id": [1], "ts": ["03/04/2023"]}), config)
    assert bad.value.field == "ts"
