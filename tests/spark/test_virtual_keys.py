"""Tables with virtual keys (``hoodie.populate.meta.fields=false``, written by Apache Hudi):
upsert, delete, insert of an existing key and reads by key use keys derived from the key
fields; hudi-rs reads every key exactly once with the values a dict model predicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import copy_fixture, hudi_rs_table, local_frame, snapshot
from tidemark.cli import main
from tidemark.jobs.write import WriteResult, write
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.records.keys import FILE_NAME, META_COLUMNS

FIXTURE = "v6_simplekeygen_hivestyle_no_metafields"


def _data(table: pa.Table) -> pa.Table:
    return table.drop_columns([n for n in META_COLUMNS if n in table.column_names]).sort_by("id")


def _with(row: pa.Table, **values: Any) -> pa.Table:
    for name, value in values.items():
        kind = row.schema.field(name).type
        row = row.set_column(row.schema.get_field_index(name), name, pa.array([value], kind))
    return row


class _Model:
    """id -> name of every live row, as the operations should leave them."""

    def __init__(self, table: pa.Table) -> None:
        self.names = {row["id"]: row["name"] for row in table.to_pylist()}

    def check(self, uri: str) -> None:
        theirs = hudi_rs_table(uri)
        assert theirs is not None
        ids = theirs.column("id").to_pylist()
        assert sorted(ids) == sorted(self.names)
        assert {row["id"]: row["name"] for row in theirs.to_pylist()} == self.names
        ours = _data(snapshot(uri))
        assert {row["id"]: row["name"] for row in ours.to_pylist()} == self.names
        _assert_meta_columns_null(uri)


def _assert_meta_columns_null(uri: str) -> None:
    """Like Hudi, every file of a virtual-key table carries null meta columns but the
    file name."""
    table = HoodieTable.open(uri)
    for base_file in table.view().latest_base_files():
        with table.storage.open_input(base_file.path) as stream:
            stored = pq.read_table(stream, columns=list(META_COLUMNS))
        for name in META_COLUMNS[:4]:
            assert stored.column(name).null_count == stored.num_rows, (base_file.path, name)
        names = set(stored.column(FILE_NAME).to_pylist())
        assert names == {base_file.path.rpartition("/")[2]}


def _write(spark: SparkSession, batch: pa.Table, uri: str, op: str) -> WriteResult:
    return write(spark, local_frame(spark, batch), uri, op)


@pytest.fixture
def hudi_table(tmp_path: Path) -> str:
    return copy_fixture(FIXTURE, tmp_path)


def test_upsert_delete_insert_and_read_by_key(
    spark: SparkSession, hudi_table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = hudi_table
    before = _data(snapshot(uri))
    model = _Model(before)
    assert model.names == {1: "Alice", 2: "Bob", 3: "Carol", 4: "Diana"}
    bob = before.filter(pc.equal(before.column("id"), 2))
    alice = before.filter(pc.equal(before.column("id"), 1))

    result = _write(
        spark,
        pa.concat_tables([_with(bob, name="Bobby"), _with(alice, id=5, name="Eve")]),
        uri,
        "upsert",
    )
    assert (result.rows_inserted, result.rows_updated) == (1, 1)
    model.names.update({2: "Bobby", 5: "Eve"})
    model.check(uri)

    carol = before.filter(pc.equal(before.column("id"), 3))
    result = _write(spark, carol, uri, "delete")
    assert result.rows_deleted == 1
    del model.names[3]
    model.check(uri)

    _write(spark, _with(alice, name="Alicia"), uri, "insert")
    model.names[1] = "Alicia"
    model.check(uri)
    assert HoodieTable.open(uri).config.populate_meta_fields is False

    for key, name in (("4", "Diana"), ("5", "Eve"), ("1", "Alicia")):
        by_key = read_snapshot(HoodieTable.open(uri), record_keys={key}, columns=["id", "name"])
        assert by_key.to_pylist() == [{"id": int(key), "name": name}]
        out = tmp_path / f"key{key}.json"
        assert main(["read", "--table", uri, "--where", f"id={key}", "--output", str(out)]) == 0
        assert [row["name"] for row in json.loads(out.read_text())] == [name]
    assert read_snapshot(HoodieTable.open(uri), record_keys={"3"}).num_rows == 0
    capsys.readouterr()


def test_hudi_written_rows_have_no_stored_keys(hudi_table: str) -> None:
    """The fixture really is a virtual-key table: its meta columns are null."""
    storage = open_storage(hudi_table)
    assert "hoodie.populate.meta.fields=false" in storage.read(".hoodie/hoodie.properties").decode()
    _assert_meta_columns_null(hudi_table)
