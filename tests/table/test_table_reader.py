"""Snapshot reads: Hudi-written fixtures and our own commits, checked against hudi-rs."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from table.table_testkit import (
    FIXTURE_NAMES,
    Writer,
    copy_fixture,
    hudi_rs_rows,
    hudi_rs_table,
    rows,
    sorted_rows,
    upload_fixture,
)
from tidemark.errors import InvalidArgumentError, NotFoundError
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.filters.partitions import parse_partition_path
from tidemark.table.properties.config import TableConfig


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_snapshot_equals_hudi_rs(name: str, tmp_path: Path) -> None:
    uri = copy_fixture(name, tmp_path)
    theirs = hudi_rs_table(uri)
    expected = sorted_rows(theirs)
    ours = sorted_rows(read_snapshot(HoodieTable.open(uri)), theirs.column_names)
    assert ours == expected
    assert len(ours) == {"v6_empty": 0, "v6_simplekeygen_nonhivestyle_overwritetable": 1}.get(
        name, 4
    )


def test_fixture_snapshot_over_s3_equals_local(s3_bucket: str, tmp_path: Path) -> None:
    name = "v6_complexkeygen_hivestyle"
    local = read_snapshot(HoodieTable.open(copy_fixture(name, tmp_path)))
    remote = read_snapshot(HoodieTable.open(upload_fixture(name, s3_bucket)))
    assert sorted_rows(remote) == sorted_rows(local)


def test_replacecommit_hides_replaced_file_groups(tmp_path: Path) -> None:
    uri = copy_fixture("v6_simplekeygen_nonhivestyle_overwritetable", tmp_path)
    result = read_snapshot(HoodieTable.open(uri))
    assert result.column("_hoodie_record_key").to_pylist() == ["4"]
    before_replace = read_snapshot(HoodieTable.open(uri), as_of="20240707001302376")
    assert sorted(before_replace.column("_hoodie_record_key").to_pylist()) == ["1", "2", "3", "4"]


def test_time_travel_sees_first_commit_only(tmp_path: Path) -> None:
    uri = copy_fixture("v6_simplekeygen_nonhivestyle", tmp_path)
    first = read_snapshot(HoodieTable.open(uri), as_of="20240418172802262")
    assert sorted(first.column("id").to_pylist()) == [1, 2, 3]
    assert set(first.column("_hoodie_commit_time").to_pylist()) == {"20240418172802262"}


def test_filters_record_keys_partitions_and_columns(tmp_path: Path) -> None:
    uri = copy_fixture("v6_complexkeygen_hivestyle", tmp_path)
    by_key = read_snapshot(
        HoodieTable.open(uri), record_keys={"id:2,name:Bob"}, columns=["id", "name"]
    )
    assert by_key.to_pylist() == [{"id": 2, "name": "Bob"}]
    by_partition = read_snapshot(
        HoodieTable.open(uri), partition_filter={"byteField": 10}, columns=["id"]
    )
    assert sorted(by_partition.column("id").to_pylist()) == [1, 3]
    by_callable = read_snapshot(
        HoodieTable.open(uri), partition_filter=lambda p: p.startswith("byteField=20")
    )
    assert by_callable.column("id").to_pylist() == [2]
    by_filter = read_snapshot(
        HoodieTable.open(uri), filters=[("intField", ">=", "30000")], columns=["id"]
    )
    assert sorted(by_filter.column("id").to_pylist()) == [3, 4]
    in_filter = read_snapshot(
        HoodieTable.open(uri), filters=[("name", "in", ["Alice", "Diana"])], columns=["id"]
    )
    assert sorted(in_filter.column("id").to_pylist()) == [1, 4]
    nothing = read_snapshot(HoodieTable.open(uri), record_keys={"id:9,name:Nobody"})
    assert nothing.num_rows == 0
    assert nothing.schema.names[:3] == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
    ]


def test_our_commits_read_the_same_by_hudi_rs(people: Writer) -> None:
    people.commit(rows((1, "ann", "eu", 1.0), (2, "bob", "us", 2.0), (3, "cid", "eu", 3.0)))
    people.commit(rows((1, "ann", "eu", 10.0), (4, "dan", "asia", 4.0)))
    uri = people.table.uri
    ours = sorted_rows(read_snapshot(HoodieTable.open(uri)))
    assert ours == hudi_rs_rows(uri)
    assert [(r["id"], r["score"]) for r in ours] == [(1, 10.0), (2, 2.0), (3, 3.0), (4, 4.0)]
    assert {r["_hoodie_partition_path"] for r in ours} == {"eu", "us", "asia"}


def test_bad_inputs_are_rejected(tmp_path: Path) -> None:
    uri = copy_fixture("v6_nonpartitioned", tmp_path)
    with pytest.raises(InvalidArgumentError) as unknown_op:
        read_snapshot(HoodieTable.open(uri), filters=[("id", "~", 1)])
    assert unknown_op.value.field == "filters"
    with pytest.raises(InvalidArgumentError) as unknown_column:
        read_snapshot(HoodieTable.open(uri), filters=[("nope", "=", 1)])
    assert unknown_column.value.field == "nope"
    with pytest.raises(InvalidArgumentError) as bad_value:
        read_snapshot(HoodieTable.open(uri), filters=[("id", "=", "one")])
    assert bad_value.value.field == "id"
    with pytest.raises(InvalidArgumentError) as bad_as_of:
        read_snapshot(HoodieTable.open(uri), as_of="yesterday")
    assert bad_as_of.value.field == "as_of"
    with pytest.raises(NotFoundError) as not_a_table:
        read_snapshot(HoodieTable.open(str(tmp_path)))
    assert not_a_table.value.field == "table"


def test_parse_partition_path(tmp_path: Path) -> None:
    hive = HoodieTable.open(copy_fixture("v6_complexkeygen_hivestyle", tmp_path)).config
    assert parse_partition_path("byteField=10/shortField=300", hive) == {
        "byteField": "10",
        "shortField": "300",
    }
    assert parse_partition_path("10/300", hive) is None
    timed = HoodieTable.open(copy_fixture("v6_timebasedkeygen_nonhivestyle", tmp_path)).config
    assert parse_partition_path("2023/04/01/12", timed) is None


def test_empty_table_has_schema_and_checks_columns(tmp_path: Path) -> None:
    uri = copy_fixture("v6_empty", tmp_path)
    empty = read_snapshot(HoodieTable.open(uri))
    assert empty.num_rows == 0
    assert empty.schema.names == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
        "id",
        "name",
        "isActive",
    ]
    assert read_snapshot(HoodieTable.open(uri), columns=["name"]).schema.names == ["name"]
    with pytest.raises(InvalidArgumentError) as error:
        read_snapshot(HoodieTable.open(uri), columns=["nope"])
    assert error.value.field == "nope"


def test_added_column_reads_as_null_in_older_files(people: Writer) -> None:
    people.commit(rows((1, "ann", "eu", 1.0)))
    evolved = rows((2, "bob", "us", 2.0)).append_column("team", pa.array(["red"]))
    people.commit(evolved)
    ours = sorted_rows(read_snapshot(HoodieTable.open(people.table.uri)))
    assert [(r["id"], r["team"]) for r in ours] == [(1, None), (2, "red")]
    assert ours == hudi_rs_rows(people.table.uri)


def test_url_encoded_partition_values_are_decoded() -> None:
    config = TableConfig(
        name="t",
        record_key_fields=("id",),
        partition_fields=("city",),
        precombine_field=None,
        hive_style=True,
        avro_schema="",
        key_generator_class=TableConfig.default_key_generator(("id",), ("city",)),
        url_encode_partitions=True,
    )
    assert parse_partition_path("city=S%C3%A3o%20Paulo", config) == {"city": "São Paulo"}
