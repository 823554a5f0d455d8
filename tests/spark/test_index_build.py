"""``tidemark index build``: a record index bootstrapped from tables Apache Hudi wrote
(complex keys, non-partitioned, timestamp key generator, virtual keys, a replacecommit)
answers for exactly their keys; a table holding a key twice gets no index."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from services.index import layout
from services.index.record_index import RecordIndex
from spark.clikit import Cli, refused_in_one_line, table_state
from spark.indexkit import assert_index_agrees
from spark.sparkkit import copy_fixture
from spark_jobs.index_build import build_index
from spark_jobs.write import write
from tidemark.errors import FailedPreconditionError
from tidemark.storage import open_storage

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
    result = build_index(spark, uri, shards=3)
    located = assert_index_agrees(uri)
    assert result.entries == len(located) > 0
    assert result.shards == RecordIndex.open(open_storage(uri)).num_shards == 3
    with pytest.raises(FailedPreconditionError, match="already has a record index"):
        build_index(spark, uri)


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
    empty = copy_fixture("v6_empty", tmp_path)
    before = table_state(empty)
    code, err = cli.run("index", "build", "--table", empty)
    assert "no completed commit" in refused_in_one_line(code, err, "index")
    assert table_state(empty) == before


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
        record_key_fields=["id"],
        partition_fields=["p"],
        allow_duplicates=True,
    )
    with pytest.raises(FailedPreconditionError) as refused:
        build_index(spark, uri, shards=2)
    message = str(refused.value)
    assert "key 'k1' is in file group" in message
    assert "of partition 'a'" in message and "of partition 'b'" in message
    assert not RecordIndex.exists(open_storage(uri))
    assert list(open_storage(uri).list(layout.ROOT + "/")) == []
