"""Table properties Tidemark cannot honour in a write: ``tidemark write`` exits 2 with one
line naming the key and value, and no file under the table is created or changed."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from table.table_testkit import file_tree, set_property

from spark.sparkkit import copy_fixture, snapshot
from tidemark.cli import main
from tidemark.table.records.keys import META_COLUMNS

FIXTURE = "v6_simplekeygen_nonhivestyle"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hoodie.compaction.payload.class", "com.example.MyPayload"),
        ("hoodie.compaction.record.merger.strategy", "00000000-0000-0000-0000-000000000000"),
        ("hoodie.table.cdc.enabled", "true"),
        ("hoodie.partition.metafile.use.base.format", "true"),
        ("hoodie.table.secondary.indexes.metadata", '{"indexes": []}'),
        ("hoodie.allow.operation.metadata.field", "true"),
        ("hoodie.table.keygenerator.class", "com.example.MyKeyGenerator"),
        ("hoodie.table.base.file.format", "ORC"),
    ],
)
def test_refused_property_stops_the_write(
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    key: str,
    value: str,
) -> None:
    root = Path(copy_fixture(FIXTURE, tmp_path))
    source = tmp_path / "batch.parquet"
    pq.write_table(snapshot(str(root)).drop_columns(list(META_COLUMNS)), source)
    set_property(root, key, value)
    before = file_tree(root)
    argv = ["write", "--table", str(root), "--input", str(source), "--op", "upsert"]
    assert main([*argv, "--markers", "direct"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert errors == [errors[0]]
    assert errors[0].startswith(f"tidemark write: error: {key}: value {value!r}")
    assert file_tree(root) == before
