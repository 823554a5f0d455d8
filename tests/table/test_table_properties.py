"""hoodie.properties: Hudi's keys, escaping and checksum; unsupported tables rejected."""

from __future__ import annotations

import pytest

from table.table_testkit import FIXTURE_NAMES, FIXTURES, people_config
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.table.properties.config import (
    TableConfig,
    format_properties,
    parse_properties,
    table_checksum,
)
from tidemark.table.writes.checks import check_writable


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_properties_parse_and_checksum_matches_hudi(name: str) -> None:
    text = (FIXTURES / name / ".hoodie" / "hoodie.properties").read_text()
    props = parse_properties(text)
    config = TableConfig.from_properties(props)
    assert config.name == name
    assert props["hoodie.table.create.schema"].startswith('{"type":"record"')
    assert config.to_properties()["hoodie.table.checksum"] == props["hoodie.table.checksum"]
    assert table_checksum("default", name) == int(props["hoodie.table.checksum"])


def test_complex_fixture_config() -> None:
    text = (FIXTURES / "v6_complexkeygen_hivestyle" / ".hoodie" / "hoodie.properties").read_text()
    config = TableConfig.from_properties(parse_properties(text))
    assert config.record_key_fields == ("id", "name")
    assert config.partition_fields == ("byteField", "shortField")
    assert config.hive_style
    assert config.precombine_field == "longField"
    assert config.key_generator_class == "org.apache.hudi.keygen.ComplexKeyGenerator"


def test_round_trip_with_special_characters() -> None:
    props = {"a.key": "x=y:z #!\\ é\t\n", "schema": '{"type":"record"}', "emoji": "\U0001f600"}
    text = format_properties(props).decode("latin-1")
    assert "\\:" in text
    assert "\\u00E9" in text
    assert "\\uD83D\\uDE00" in text
    parsed = parse_properties(text)
    assert parsed["a.key"] == props["a.key"]
    assert parsed["schema"] == props["schema"]
    assert parsed["emoji"] == props["emoji"]


def test_written_config_round_trips() -> None:
    config = people_config(hive_style=True)
    props = config.to_properties()
    assert props["hoodie.table.type"] == "COPY_ON_WRITE"
    assert props["hoodie.table.version"] == "6"
    assert props["hoodie.timeline.layout.version"] == "1"
    assert (
        TableConfig.from_properties(parse_properties(format_properties(props).decode())) == config
    )


def test_unsupported_tables_are_rejected() -> None:
    props = people_config().to_properties() | {"hoodie.table.version": "5"}
    with pytest.raises(FailedPreconditionError) as error:
        TableConfig.from_properties(props)
    assert error.value.field == "hoodie.table.version"
    assert "'5'" in str(error.value)


def test_merge_on_read_tables_of_virtual_keys_refuse_writes() -> None:
    props = people_config().to_properties() | {
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.populate.meta.fields": "false",
    }
    config = TableConfig.from_properties(props)
    assert config.merge_on_read
    with pytest.raises(FailedPreconditionError) as error:
        check_writable(config, disable_hudi_metadata_table=False)
    assert error.value.field == "hoodie.populate.meta.fields"


def test_invalid_config_fields() -> None:
    with pytest.raises(InvalidArgumentError) as name:
        TableConfig("bad name", ("id",), (), None, False, "", "")
    assert name.value.field == "name"
    with pytest.raises(InvalidArgumentError) as key:
        TableConfig("t", (), (), None, False, "", "")
    assert key.value.field == "key"
