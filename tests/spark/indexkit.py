"""Equality of a table and its record index, as issue 9 states it: every key in the
snapshot hudi-rs reads maps to the file group that holds it, no other key is in the index
(every key any shard file ever held is looked up), and no key is in the snapshot twice."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from spark.sparkkit import SCHEMA, hudi_rs_table, local_frame
from tidemark.index import layout
from tidemark.index.block_cache import BlockCache
from tidemark.index.record_index import RecordIndex
from tidemark.index.shard_file import ShardReader
from tidemark.jobs.index_build import build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.tagging import file_keys
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.records.keys import stored_record_keys


def snapshot_locations(uri: str) -> dict[str, tuple[str, str]]:
    """Record key -> (partition path, file id) of every row in the latest base files, each
    key once; hudi-rs reads exactly these keys (tables with virtual keys: derived from the
    key fields, as hudi-rs returns no meta columns there)."""
    table = HoodieTable.open(uri)
    located: dict[str, tuple[str, str]] = {}
    for base in table.view().latest_base_files():
        for key in file_keys(table.storage, base.path, table.config).to_pylist():
            assert key not in located, f"key {key!r} in {located.get(key)} and {base.file_id}"
            located[key] = (base.partition_path, base.file_id)
    rows = hudi_rs_table(uri)
    read = stored_record_keys(rows, table.config).to_pylist() if rows is not None else []
    assert len(read) == len(set(read)) == len(located)
    assert set(read) == set(located)
    return located


def keys_in_shard_files(uri: str) -> set[str]:
    """Every key any base or delta file of the index holds, visible or not."""
    storage = open_storage(uri)
    cache = BlockCache()
    keys: set[str] = set()
    for info in storage.list(layout.SHARDS_DIR + "/"):
        if info.path.endswith(layout.SHARD_FILE_SUFFIX):
            encoded, _ = ShardReader.open(storage, info.path, cache).scan()
            keys.update(encoded.to_arrow().to_pylist())
    return keys


def assert_index_agrees(uri: str) -> dict[str, tuple[str, str]]:
    """The index answers for exactly the snapshot's keys, each with its file group;
    returns the snapshot's locations."""
    expected = snapshot_locations(uri)
    asked = sorted(set(expected) | keys_in_shard_files(uri))
    located = RecordIndex.open(open_storage(uri)).lookup(pa.array(asked, pa.string()))
    answers = {
        row["key"]: (row["partition"], row["file_id"])
        for row in located.to_pylist()
        if row["file_id"] is not None
    }
    assert answers == expected
    return expected


def rows(spark: SparkSession, *values: tuple[int, str, str, int]) -> DataFrame:
    return local_frame(spark, list(values), SCHEMA)


def indexed_table(spark: SparkSession, uri: str, shards: int = 3) -> dict[str, tuple[str, str]]:
    """Keys 0-11 over partitions a, b, c, then a record index of ``shards`` shards."""
    first = [(k, f"v{k}", "abc"[k % 3], 1) for k in range(12)]
    write(
        spark,
        rows(spark, *first),
        uri,
        "bulk_insert",
        WriteOptions(record_key_fields=["id"], partition_fields=["part"], precombine_field="ts"),
    )
    build_index(spark, HoodieTable.open(uri), IndexBuildOptions(shards=shards))
    return assert_index_agrees(uri)
