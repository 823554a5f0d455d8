"""Merge-on-read writes: upserts and deletes appended as log files to the file groups that
hold their keys (no base file rewritten), inserts in new base files, deltacommits on the
timeline; hudi-rs and ``tidemark.spark.read`` read exactly what a model of the writes
expects, at table versions 6, 8 and 9, tagged by a join or by the record index."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import tidemark.spark
from spark.morkit import MOR, hudi_rs_rows, mor_frame, mor_options, our_rows
from spark.sparkkit import assert_readers_agree, local_frame, snapshot
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import is_base_file_name
from tidemark.table.logfiles.file_names import is_log_file_name, parse_log_file_name
from tidemark.table.metadata.actions import DELTA_COMMIT
from tidemark.table.properties.config import load_table_config


def _files(root: Path) -> tuple[list[Path], list[Path]]:
    data = [p for p in root.rglob("*") if p.is_file() and ".hoodie" not in p.parts]
    return (
        sorted(p for p in data if is_base_file_name(p.name)),
        sorted(p for p in data if is_log_file_name(p.name)),
    )


@pytest.mark.parametrize("index", [None, "record"])
def test_upserts_and_deletes_append_logs_that_every_reader_merges(
    spark: SparkSession, tmp_path: Path, table_version: int, index: str | None
) -> None:
    root = tmp_path / "t"
    uri = str(root)
    model = {
        f"k{i:03}": (f"k{i:03}", f"n{i}", float(i), 1, "eu" if i % 2 else "us") for i in range(60)
    }
    first = tidemark.spark.write(
        mor_frame(spark, list(model.values())),
        uri,
        "upsert",
        options=mor_options(table_version, index=index),
    )
    assert load_table_config(HoodieTable.open(uri).storage).table_type == MOR
    base_before, logs_before = _files(root)
    assert logs_before == []

    updates = [(f"k{i:03}", f"u{i}", i * 10.0, 2, "eu" if i % 2 else "us") for i in range(0, 60, 7)]
    second = tidemark.spark.write(
        mor_frame(spark, updates), uri, "upsert", options=mor_options(table_version)
    )
    model.update({row[0]: row for row in updates})
    deleted = [f"k{i:03}" for i in range(3, 60, 11)]
    gone = mor_frame(spark, [model[key] for key in deleted])
    third = tidemark.spark.write(gone, uri, "delete", options=mor_options(table_version))
    for key in deleted:
        del model[key]
    inserts = [(f"k{i:03}", f"n{i}", float(i), 3, "eu") for i in range(60, 70)]
    tidemark.spark.write(
        mor_frame(spark, inserts), uri, "upsert", options=mor_options(table_version)
    )
    model.update({row[0]: row for row in inserts})

    base_after, logs_after = _files(root)
    assert set(base_before) < set(base_after)  # inserts made new groups; none rewritten
    assert len(logs_after) == second.files_written + third.files_written
    names = [parse_log_file_name(p.name) for p in logs_after]
    base_instants = {p.name.rpartition("_")[2].removesuffix(".parquet") for p in base_before}
    if table_version == 6:
        assert {n.instant for n in names} <= base_instants | {first.instant}
        assert sorted({n.version for n in names}) == [1, 2]
    else:
        assert {n.instant for n in names} == {second.instant, third.instant}
        assert {n.version for n in names} == {1}
    timeline = HoodieTable.open(uri).timeline
    assert {i.action for i in timeline.completed()} == {DELTA_COMMIT}
    assert hudi_rs_rows(uri) == model
    assert our_rows(spark, uri) == model


def test_a_table_type_other_than_the_tables_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    rows = [("k1", "a", 1.0, 1, "eu")]
    tidemark.spark.write(mor_frame(spark, rows), uri, "upsert", options=mor_options(6))
    with pytest.raises(InvalidArgumentError) as refused:
        tidemark.spark.write(
            mor_frame(spark, rows),
            uri,
            "upsert",
            options=WriteOptions(table_type="COPY_ON_WRITE", markers="direct"),
        )
    assert refused.value.field == "table_type"


@pytest.mark.s3
def test_a_merge_on_read_table_on_s3_with_service_markers(
    spark: SparkSession, s3_bucket: str
) -> None:
    """On the S3 server (moto, an emulator): log files are whole objects (no append), their
    markers go through the embedded marker service, and hudi-rs reads the merged rows."""
    model = {f"k{i}": (f"k{i}", "a", float(i), 1, "eu" if i % 2 else "us") for i in range(20)}
    options = mor_options(9, markers="service")
    tidemark.spark.write(
        mor_frame(spark, list(model.values())), s3_bucket, "upsert", options=options
    )
    updates = [(f"k{i}", "b", -1.0, 2, "eu" if i % 2 else "us") for i in range(0, 20, 3)]
    result = tidemark.spark.write(mor_frame(spark, updates), s3_bucket, "upsert", options=options)
    model.update({row[0]: row for row in updates})
    stats = (
        HoodieTable.open(s3_bucket)
        .timeline.read_metadata(HoodieTable.open(s3_bucket).timeline.find(result.instant))
        .write_stats
    )
    assert stats and all(stat.is_delta for stat in stats)
    assert hudi_rs_rows(s3_bucket) == model
    assert our_rows(spark, s3_bucket) == model


def _keyed_by_id(version: int) -> WriteOptions:
    """A merge-on-read table keyed by ``id``, partitioned by ``part``, ordered by ``ts``."""
    return WriteOptions(
        record_key_fields=["id"],
        partition_fields=["part"],
        precombine_field="ts",
        table_version=version,
        table_type="MERGE_ON_READ",
    )


@pytest.mark.parametrize("version", [6, 8])
def test_a_key_moved_away_and_back_without_an_index_is_written_once(
    spark: SparkSession, table_uri: str, version: int
) -> None:
    """Without a record index, upserts are tagged by the keys the latest slices hold: a key
    moved to another partition is deleted by a log block of its old group, whose base file
    still holds it, so tagging must read that slice merged. Reading base files only (as
    the model test found) tagged key 10 in both partitions when it moved back, and both
    readers then saw it twice."""
    options = _keyed_by_id(version)
    schema = "id long, name string, part string, ts long"
    batches = [
        [(10, "a", "x", 0)],
        [(10, "b", "z", 0)],
        [(0, "c", "x", 0), (0, "c", "x", 0), (11, "c", "x", 0), (10, "c", "x", 0)],
    ]
    for batch in batches:
        frame = local_frame(spark, batch, schema)
        tidemark.spark.write(frame, table_uri, "upsert", options=options)
    rows = assert_readers_agree(table_uri, ["id", "name", "part", "ts"])
    assert snapshot(table_uri).num_rows == 3
    assert {key: (row["part"], row["name"]) for key, row in rows.items()} == {
        "0": ("x", "c"),
        "10": ("x", "c"),
        "11": ("x", "c"),
    }


@pytest.mark.parametrize("version", [6, 8])
def test_a_later_write_with_a_smaller_ordering_value_wins_for_every_reader(
    spark: SparkSession, table_uri: str, version: int
) -> None:
    """Tidemark's tables let the later write win (commit time ordering) and say so: on
    version 6 in ``hoodie.compaction.payload.class`` (Hudi 0.x's default payload), without
    which hudi-rs ordered a log's record against its base file's by the precombine field
    (the model test found key 5 read as its first write by hudi-rs, its second by us)."""
    options = _keyed_by_id(version)
    schema = "id long, name string, part string, ts long"
    for batch in ([(5, "a", "z", 1), (0, "a", "x", 0)], [(5, "c", "z", 0)]):
        tidemark.spark.write(
            local_frame(spark, batch, schema), table_uri, "upsert", options=options
        )
    rows = assert_readers_agree(table_uri, ["id", "name", "part", "ts"])
    assert (rows["5"]["name"], rows["5"]["ts"]) == ("c", 0)
    assert not HoodieTable.open(table_uri).config.orders_by_event_time
