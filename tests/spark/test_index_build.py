"""``tidemark index build``: a record index bootstrapped from tables Apache Hudi wrote
(complex keys, non-partitioned, timestamp key generator, virtual keys, a replacecommit)
answers for exactly their keys; a table holding a key twice gets no index."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from spark.clikit import Cli, refused_in_one_line, table_state
from spark.indexkit import assert_index_agrees
from spark.sparkkit import copy_fixture
from tidemark.errors import FailedPreconditionError
from tidemark.index import layout
from tidemark.index.record_index import RecordIndex
from tidemark.jobs.index_build import build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.storage import open_storage
from tidemark.table import HoodieTable

HUDI_TABLES = [
    "v6_simplekeygen_nonhivestyle",
    "v6_complexkeygen_hivestyle",
    "v6_nonpartitioned",
    "v6_simplekeygen_nonhivestyle_overwritetable",
    "v6_timebasedkeygen_nonhivestyle",
    "v6_simplekeygen_hivestyle_no_metafields",
]


@pytest.mark.parametrize("name", HUDI_TABLES)
def test_build_over_hudi_written_tables(spark: SparkSession, tmp_path: Path, name: str) -> None:
    uri = copy_fixture(name, tmp_path)
    result = build_index(spark, HoodieTable.open(uri), IndexBuildOptions(shards=3))
    located = assert_index_agrees(uri)
    assert result.entries == len(located) > 0
    assert result.shards == RecordIndex.open(open_storage(uri)).num_shards == 3
    with pytest.raises(FailedPreconditionError, match="already has a record index"):
        build_index(spark, HoodieTable.open(uri))


def test_cli_default_shards_and_refusals(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cli = Cli(tmp_path, capfd)
    uri = copy_fixture("v6_nonpartitioned", tmp_path)
    code, err = cli.run("index", "build", "--table", uri, "--shards", "0")
    assert refused_in_one_line(code, err, "index") == "shards: must be 1 to 10000, got 0"
    code, out = cli.output("index", "build", "--table", uri, "--master", "local[2]")
    assert code == 0
    assert out.startswith("record index built as of 20") and "4 keys in 10 shards" in out
    assert RecordIndex.open(open_storage(uri)).num_shards == 10  # Hudi's minimum
    before = table_state(uri)
    code, err = cli.run("index", "build", "--table", uri)
    assert "already has a record index (use --rebuild" in refused_in_one_line(code, err, "index")
    assert table_state(uri) == before


def test_a_table_without_a_commit_gets_an_empty_index_that_writes_fill(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    uri = copy_fixture("v6_empty", tmp_path)
    code, out = Cli(tmp_path, capfd).output("index", "build", "--table", uri, "--shards", "4")
    assert code == 0 and "0 keys in 4 shards" in out
    assert RecordIndex.open(open_storage(uri)).stats().entries == 0
    rows = pa.table(
        {"id": pa.array([1, 2], pa.int32()), "name": ["x", "y"], "isActive": [True, False]}
    )
    write(spark, spark.createDataFrame(rows.to_pandas()), uri, "upsert")
    assert sorted(assert_index_agrees(uri)) == ["1", "2"]


def test_rebuild_replaces_a_damaged_index_with_one_that_agrees(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    uri = copy_fixture("v6_nonpartitioned", tmp_path)
    build_index(spark, HoodieTable.open(uri), IndexBuildOptions(shards=2))
    storage = open_storage(uri)
    stray = f"{layout.STAGED_DIR}/20000101000000000_stray.json"
    storage.write(stray, b"{}")
    for info in storage.list(layout.SHARDS_DIR + "/"):
        storage.delete(info.path)
    code, out = Cli(tmp_path, capfd).output(
        "index", "build", "--table", uri, "--rebuild", "--shards", "3"
    )
    assert code == 0 and "4 keys in 3 shards" in out
    assert not storage.exists(stray)
    assert RecordIndex.open(storage).num_shards == 3
    assert len(assert_index_agrees(uri)) == 4


def test_a_key_held_twice_is_named_and_nothing_is_published(
    spark: SparkSession, tmp_path: Path
) -> None:
    uri = str(tmp_path / "dup")
    rows = pa.table({"id": ["k1", "k1", "k2"], "p": ["a", "b", "a"], "ts": [1, 2, 3]})
    write(
        spark,
        spark.createDataFrame(rows.to_pandas()),
        uri,
        "bulk_insert",
        WriteOptions(record_key_fields=["id"], partition_fields=["p"], allow_duplicates=True),
    )
    with pytest.raises(FailedPreconditionError) as refused:
        build_index(spark, HoodieTable.open(uri), IndexBuildOptions(shards=2))
    message = str(refused.value)
    assert "key 'k1' is in file group" in message
    assert "of partition 'a'" in message and "of partition 'b'" in message
    assert not RecordIndex.exists(open_storage(uri))
    assert list(open_storage(uri).list(layout.ROOT + "/")) == []
