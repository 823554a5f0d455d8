"""HoodieTable create/open: layout, readable by hudi-rs, refusals that write nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from table.table_testkit import Writer, copy_fixture, hudi_rs_rows, people_config, rows
from tidemark.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.leases.table_lock import changing
from tidemark.table.properties.config import PROPERTIES_PATH, parse_properties


def test_create_writes_hudi_properties_and_hudi_rs_opens_it(any_table_uri: str) -> None:
    table = HoodieTable.create(any_table_uri, people_config())
    props = parse_properties(open_storage(any_table_uri).read(PROPERTIES_PATH).decode())
    assert props["hoodie.table.name"] == "people"
    assert props["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.SimpleKeyGenerator"
    assert HoodieTable.open(any_table_uri).config == table.config
    with pytest.raises(AlreadyExistsError) as error:
        HoodieTable.create(any_table_uri, people_config(hive_style=True))
    assert error.value.field == "table"
    assert HoodieTable.open(any_table_uri).config.hive_style is False


def test_empty_created_table_reads_empty_with_hudi_rs(table_uri: str) -> None:
    HoodieTable.create(table_uri, people_config())
    assert hudi_rs_rows(table_uri) == []


def test_partition_metadata_matches_hudi(people: Writer) -> None:
    instant = people.commit(rows((1, "a", "eu", 1.0)))
    props = parse_properties(people.table.storage.read("eu/.hoodie_partition_metadata").decode())
    assert props == {"commitTime": instant, "partitionDepth": "1"}
    assert people.table.write_partition_metadata("eu", "20300101000000000") is False


def test_open_refuses_non_tables(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as missing:
        HoodieTable.open(str(tmp_path))
    assert missing.value.field == "table"
    assert "not a Hudi table" in str(missing.value)
    uri = copy_fixture("v6_nonpartitioned", tmp_path)
    for bad in (f"{uri}/.hoodie", f"{uri}/.hoodie/archived"):
        with pytest.raises(InvalidArgumentError) as inside:
            HoodieTable.open(bad)
        assert inside.value.field == "table"
        with pytest.raises(InvalidArgumentError):
            HoodieTable.create(bad, people_config())
    assert not (Path(uri) / ".hoodie" / ".hoodie").exists()


def test_open_takes_merge_on_read_and_a_change_refuses_it(tmp_path: Path) -> None:
    uri = copy_fixture("v6_empty", tmp_path)
    path = Path(uri) / ".hoodie" / "hoodie.properties"
    path.write_text(path.read_text().replace("COPY_ON_WRITE", "MERGE_ON_READ"))
    table = HoodieTable.open(uri)
    with pytest.raises(FailedPreconditionError) as error, changing(table, "write"):
        pass
    assert error.value.field == "hoodie.table.type"
