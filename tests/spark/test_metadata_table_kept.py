"""Tables Hudi 1.0 and 1.1 wrote with their metadata table (copy-on-write and
merge-on-read, table versions 8 and 9) take an upsert and a delete from Tidemark, which
keeps the ``files`` partition: hudi-rs, listing through it, reads exactly the model, and
without the delete's metadata log file it would read the deleted row again (it lists
through the partition, not storage). The other metadata partitions are dropped; then
clustering and cleaning record their changes there too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf
from table.metadata_testkit import files_records, instant_log
from table.table_testkit import set_property
from table.v1x_testkit import unzip_fixture

import tidemark.spark
from spark.morkit import comparable, data_columns, spark_rows, upsert_and_delete, without_meta
from spark.sparkkit import hudi_rs_table
from tidemark.cli import main
from tidemark.faults import EXIT_AT_ENV, EXIT_CODE
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.maintenance.clean import clean
from tidemark.table.maintenance.clean_plan import CleanSettings
from tidemark.table.metadata.commit import WriteStat
from tidemark.table.metadata_table.files_records import ALL_PARTITIONS
from tidemark.table.metadata_table.partitions import INFLIGHT_KEY, PARTITIONS_KEY
from tidemark.table.properties.config import read_properties
from tidemark.table.records.keys import RECORD_KEY
from tidemark.table.writes.commit import METADATA_RECORDED_POINT

OPTIONS = WriteOptions(markers="direct")
TABLES = [
    ("cow", "v9_txns_simple_meta"),
    ("cow", "v9_txns_nonpart_meta"),
    ("mor", "v9_txns_simple_meta"),
    ("mor", "v8_trips_8i3u1d"),
]


def _copy(kind: str, name: str, mor_tables: Path, tmp_path: Path) -> Path:
    if kind == "cow":
        return unzip_fixture(name, tmp_path)
    return Path(shutil.copytree(mor_tables / name, tmp_path / name))


@pytest.mark.parametrize(("kind", "name"), TABLES, ids=[f"{k}-{n}" for k, n in TABLES])
def test_hudi_rs_reads_tidemark_writes_through_the_files_partition(
    spark: SparkSession, mor_tables: Path, tmp_path: Path, kind: str, name: str
) -> None:
    root = _copy(kind, name, mor_tables, tmp_path)
    uri = str(root)
    changed = upsert_and_delete(spark, uri, OPTIONS)
    upserted, deleted, columns = changed.upserted, changed.deleted, changed.columns
    expected = comparable(list(changed.rows.values()), columns)
    after = hudi_rs_table(uri)
    assert after is not None
    assert comparable(after.to_pylist(), columns) == expected
    assert comparable(spark_rows(tidemark.spark.read(spark, uri)), columns) == expected
    assert read_properties(HoodieTable.open(uri).storage)[PARTITIONS_KEY] == "files"
    table = HoodieTable.open(uri)
    for result in (upserted, deleted):
        written = table.timeline.read_metadata(table.timeline.find(result.instant)).write_stats
        assert written
        records = files_records(instant_log(root, result.instant))
        listed = {
            (partition, name): info["size"]
            for partition, record in records.items()
            if partition != ALL_PARTITIONS
            for name, info in record["filesystemMetadata"].items()
        }
        assert listed == {
            (stat.partition_path or ".", stat.path.rsplit("/")[-1]): stat.file_size_in_bytes
            for stat in written
        }
    # hudi-rs lists through the partition: without the delete's record the row is back
    instant_log(root, deleted.instant).unlink()
    again = hudi_rs_table(uri)
    assert again is not None
    assert changed.deleted_key in again.column(RECORD_KEY).to_pylist()


def _written_and_listed(root: Path, instant: str) -> list[WriteStat]:
    """The instant's write stats, after checking that its metadata deltacommit lists
    exactly their files."""
    table = HoodieTable.open(str(root))
    written = table.timeline.read_metadata(table.timeline.find(instant)).write_stats
    records = files_records(instant_log(root, instant))
    listed = {
        name
        for partition, record in records.items()
        if partition != ALL_PARTITIONS
        for name in record["filesystemMetadata"]
    }
    assert listed == {stat.path.rsplit("/")[-1] for stat in written}
    return written


def test_a_write_is_refused_while_hudi_builds_a_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unzip_fixture("v9_txns_simple_meta", tmp_path)
    set_property(root, INFLIGHT_KEY, "record_index")
    source = tmp_path / "batch.parquet"
    read = hudi_rs_table(str(root))
    assert read is not None
    pq.write_table(read.slice(0, 1), source)
    argv = ["write", "--table", str(root), "--input", str(source), "--op", "upsert"]
    assert main([*argv, "--markers", "direct"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"tidemark write: error: {INFLIGHT_KEY}:")


def test_clustering_and_cleaning_are_listed_through_the_files_partition(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Once a write dropped the partitions Tidemark does not keep, clustering records its
    replacecommit's new files and a clean its tombstones; hudi-rs reads the same rows."""
    root = unzip_fixture("v9_txns_simple_meta", tmp_path)
    uri = str(root)
    frame = tidemark.spark.read(spark, uri)
    key = sorted(row[RECORD_KEY] for row in spark_rows(frame))[0]
    update = without_meta(frame.where(sf.col(RECORD_KEY) == key))
    tidemark.spark.write(update, uri, "upsert", options=OPTIONS)
    before = hudi_rs_table(uri)
    assert before is not None
    columns = data_columns(before)
    expected = comparable(before.to_pylist(), columns)

    instant = tidemark.spark.cluster_schedule(uri)
    assert instant is not None
    [run] = tidemark.spark.cluster_run(spark, uri, instant, markers="direct")
    assert run.files_written
    written = _written_and_listed(root, instant)
    after = hudi_rs_table(uri)
    assert after is not None
    assert comparable(after.to_pylist(), columns) == expected
    assert {name.split("_")[0] for name in after.column("_hoodie_file_name").to_pylist()} >= {
        stat.file_id for stat in written
    }

    cleaned = clean(HoodieTable.open(uri), CleanSettings(retain_commits=1))
    [clean_instant] = cleaned.instants
    tombstones = files_records(instant_log(root, clean_instant))
    assert sum(len(r["filesystemMetadata"]) for r in tombstones.values()) == sum(
        len(paths) for paths in cleaned.deleted.values()
    )
    final = hudi_rs_table(uri)
    assert final is not None
    assert comparable(final.to_pylist(), columns) == expected


def test_a_writer_killed_after_the_metadata_deltacommit(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A writer killed between the metadata deltacommit and its commit leaves hudi-rs
    reading the table as it was; the next write rolls the dead one back with its metadata
    deltacommit, and hudi-rs reads that write."""
    root = unzip_fixture("v9_txns_simple_meta", tmp_path)
    uri = str(root)
    before = hudi_rs_table(uri)
    assert before is not None
    columns = data_columns(before)
    frame = without_meta(tidemark.spark.read(spark, uri))
    key = sorted(row[RECORD_KEY] for row in spark_rows(tidemark.spark.read(spark, uri)))[0]
    source = tmp_path / "killed.parquet"
    killed_rows = frame.where(sf.col("txn_id") == key).withColumn("currency", sf.lit("XXX"))
    pq.write_table(killed_rows.toArrow(), source)
    script = Path(__file__).with_name("killed_metadata_writer.py")
    killed = subprocess.run(
        [sys.executable, str(script), uri, str(source)],
        env={**os.environ, EXIT_AT_ENV: METADATA_RECORDED_POINT},
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert killed.returncode == EXIT_CODE, killed.stderr.decode()[-2000:]
    [pending] = HoodieTable.open(uri).timeline.pending()
    assert instant_log(root, pending.timestamp).exists()
    unchanged = hudi_rs_table(uri)
    assert unchanged is not None
    assert comparable(unchanged.to_pylist(), columns) == comparable(before.to_pylist(), columns)
    update = frame.where(sf.col("txn_id") == key).withColumn("currency", sf.lit("YYY"))
    tidemark.spark.write(update, uri, "upsert", options=OPTIONS)
    assert not list((root / ".hoodie/metadata/files").glob(f".files-*_{pending.timestamp}.*"))
    after = hudi_rs_table(uri)
    assert after is not None
    currencies = {row["txn_id"]: row["currency"] for row in after.to_pylist()}
    assert currencies[key] == "YYY"
    assert len(currencies) == before.num_rows


def test_a_compaction_is_listed_through_the_files_partition(
    spark: SparkSession, mor_tables: Path, tmp_path: Path
) -> None:
    """A compaction's commit records its new base files; hudi-rs reads the same rows."""
    root = _copy("mor", "v9_txns_simple_meta", mor_tables, tmp_path)
    uri = str(root)
    changed = upsert_and_delete(spark, uri, OPTIONS)
    expected = comparable(list(changed.rows.values()), changed.columns)
    instant = tidemark.spark.compaction_schedule(spark, uri, max_delta_commits=1)
    assert instant is not None
    [result] = tidemark.spark.compaction_run(spark, uri, markers="direct")
    assert result.rows > 0
    _written_and_listed(root, instant)
    after = hudi_rs_table(uri)
    assert after is not None
    assert comparable(after.to_pylist(), changed.columns) == expected


def test_a_table_a_write_creates_gets_one(spark: SparkSession, tmp_path: Path) -> None:
    """``WriteOptions(hudi_metadata_table=True)`` on a new merge-on-read table at version
    9: the bulk insert and the upsert after it are read by hudi-rs through the ``files``
    partition (without the upsert's metadata log it reads the old value)."""
    uri = str(tmp_path / "created")
    first = spark.createDataFrame([(1, "a", 1), (2, "b", 1)], "id long, name string, ts long")
    options = WriteOptions(
        record_key_fields=("id",),
        precombine_field="ts",
        table_version=9,
        table_type="MERGE_ON_READ",
        hudi_metadata_table=True,
        markers="direct",
    )
    tidemark.spark.write(first, uri, "bulk_insert", options=options)
    assert read_properties(HoodieTable.open(uri).storage)[PARTITIONS_KEY] == "files"
    update = spark.createDataFrame([(2, "B", 2)], "id long, name string, ts long")
    result = tidemark.spark.write(update, uri, "upsert", options=OPTIONS)
    assert names_read(uri) == {1: "a", 2: "B"}
    instant_log(Path(uri), result.instant).unlink()
    assert names_read(uri) == {1: "a", 2: "b"}


def names_read(uri: str) -> dict[int, str]:
    read = hudi_rs_table(uri)
    assert read is not None
    return dict(zip(read.column("id").to_pylist(), read.column("name").to_pylist(), strict=True))
