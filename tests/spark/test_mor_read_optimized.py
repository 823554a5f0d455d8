"""Hudi's read-optimized query of merge-on-read tables Apache Hudi wrote, through every
reader: ``tidemark.spark.read``, ``lookup``, ``register_view``, the data source (Hudi's
``hoodie.datasource.query.type`` option) and ``tidemark read --query-type`` return each
file group's latest base file, logs ignored, as hudi-rs reads in its read-optimized mode;
the snapshot differs where a log changed a row."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from table.table_testkit import hudi_rs_read_optimized

import tidemark.spark
from spark.morkit import comparable, data_columns, spark_rows
from tidemark.cli import main
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.read_options import LookupOptions, ReadOptions
from tidemark.table.records.keys import RECORD_KEY

CHANGED_BY_LOGS = [
    ("v6_trips_8i1u", None),
    ("v8_trips_8i3u1d", None),
    ("v9_txns_simple_nometa", "20260307135839403"),
]
"""Hudi-written tables and times (None: the latest) where logs change rows of the base
files (the latest v9_txns_simple_nometa is compacted and clustered: no logs)."""
V8_BEFORE_COMPACTION = "20251220210127601"
"""v8_trips_8i3u1d after its second update (a log), before the compaction."""
RO = "read_optimized"


def _source(spark: SparkSession, uri: str, **options: str) -> DataFrame:
    tidemark.spark.register(spark)
    return spark.read.format("tidemark").options(**options).load(uri)


@pytest.mark.parametrize(("name", "as_of"), CHANGED_BY_LOGS)
def test_every_reader_reads_what_hudi_rs_reads_read_optimized(
    spark: SparkSession, mor_tables: Path, tmp_path: Path, name: str, as_of: str | None
) -> None:
    uri = str(mor_tables / name)
    theirs = hudi_rs_read_optimized(uri, as_of)
    columns = data_columns(theirs)
    expected = comparable(theirs.to_pylist(), columns)
    read = tidemark.spark.read(spark, uri, as_of=as_of, query_type=RO)
    assert comparable(spark_rows(read), columns) == expected
    snapshot = tidemark.spark.read(spark, uri, as_of=as_of)
    assert comparable(spark_rows(snapshot), columns) != expected
    scanned = tidemark.spark.read(
        spark, uri, ReadOptions(as_of=as_of, query_type=RO, reader="scan")
    )
    assert comparable(spark_rows(scanned), columns) == expected
    at = {"as_of": as_of} if as_of else {}
    hudi_option = _source(spark, uri, **at, **{"hoodie.datasource.query.type": RO})
    assert comparable(spark_rows(hudi_option), columns) == expected
    assert comparable(spark_rows(_source(spark, uri, **at, query_type=RO)), columns) == expected
    assert comparable(spark_rows(_source(spark, uri, **at)), columns) != expected
    tidemark.spark.register_view(spark, "ro", uri, as_of=as_of, query_type=RO)
    assert comparable(spark_rows(spark.sql("SELECT * FROM ro")), columns) == expected
    output = tmp_path / "ro.parquet"
    argv = ["read", "--table", uri, "--query-type", RO, "--output", str(output)]
    assert main([*argv, *(["--as-of", as_of] if as_of else [])]) == 0
    assert comparable(pq.read_table(output).to_pylist(), columns) == expected


def test_a_lookup_returns_the_base_files_row(spark: SparkSession, mor_tables: Path) -> None:
    """rider-D's fare was updated to 25.0 in a log: the read-optimized lookup reads the
    inserted 33.9, the snapshot lookup the update."""
    uri = str(mor_tables / "v6_trips_8i1u")
    theirs = hudi_rs_read_optimized(uri)
    key = next(r[RECORD_KEY] for r in theirs.to_pylist() if r["rider"] == "rider-D")
    for reader in ("driver", "spark"):
        found = spark_rows(tidemark.spark.lookup(spark, uri, [key], query_type=RO, reader=reader))
        assert [(r["rider"], r["fare"]) for r in found] == [("rider-D", 33.9)]
    merged = spark_rows(tidemark.spark.lookup(spark, uri, [key]))
    assert [(r["rider"], r["fare"]) for r in merged] == [("rider-D", 25.0)]
    updated = tidemark.spark.read(spark, uri, filters=[("fare", "=", 25.0)], query_type=RO)
    assert updated.count() == 0


def test_as_of_reads_the_base_files_of_that_time(spark: SparkSession, mor_tables: Path) -> None:
    """Before its compaction, v8_trips_8i3u1d's base files hold its eight inserts as
    written; the snapshot then had seven riders, two fares updated."""
    uri = str(mor_tables / "v8_trips_8i3u1d")
    theirs = hudi_rs_read_optimized(uri, V8_BEFORE_COMPACTION)
    columns = data_columns(theirs)
    expected = comparable(theirs.to_pylist(), columns)
    assert len(expected) == 8
    read = tidemark.spark.read(spark, uri, as_of=V8_BEFORE_COMPACTION, query_type=RO)
    assert comparable(spark_rows(read), columns) == expected
    source = _source(spark, uri, as_of=V8_BEFORE_COMPACTION, query_type=RO)
    assert comparable(spark_rows(source), columns) == expected
    assert tidemark.spark.read(spark, uri, as_of=V8_BEFORE_COMPACTION).count() == 7
    keys = [row[RECORD_KEY] for row in theirs.to_pylist()]
    options = LookupOptions(as_of=V8_BEFORE_COMPACTION, query_type=RO)
    looked_up = tidemark.spark.lookup(spark, uri, keys, options)
    assert comparable(spark_rows(looked_up), columns) == expected


def test_a_bad_query_type_is_refused_everywhere(
    spark: SparkSession, mor_tables: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(mor_tables / "v6_trips_8i1u")
    for make in (ReadOptions, LookupOptions):
        with pytest.raises(InvalidArgumentError) as refused:
            make(query_type="incremental")
        assert refused.value.field == "query_type"
    with pytest.raises(InvalidArgumentError) as refused:
        tidemark.spark.read(spark, uri, query_type="incremental")
    assert refused.value.field == "query_type"
    with pytest.raises(InvalidArgumentError) as refused:
        tidemark.spark.lookup(spark, uri, ["k"], query_type="incremental")
    assert refused.value.field == "query_type"
    with pytest.raises(InvalidArgumentError) as refused:
        tidemark.spark.register_view(spark, "bad", uri, query_type="incremental")
    assert refused.value.field == "query_type"
    with pytest.raises(AnalysisException, match="query_type: use one of snapshot"):
        _source(spark, uri, **{"hoodie.datasource.query.type": "incremental"}).count()
    with pytest.raises(AnalysisException, match=r"query_type: .* name different query types"):
        _source(spark, uri, query_type=RO, **{"hoodie.datasource.query.type": "snapshot"}).count()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["read", "--table", uri, "--query-type", "incremental"])
    assert exited.value.code == 2
    assert "--query-type: invalid choice: 'incremental'" in capsys.readouterr().err
