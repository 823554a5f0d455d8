"""The Spark data source reads a table Hudi 1.1 wrote (table version 9), now and as of an
earlier completion time, with the rows hudi-rs reads."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hudi import HudiReadOptions, HudiTableBuilder
from pyspark.sql import SparkSession
from table.v1x_testkit import unzip_fixture

import tidemark.spark
from spark.sparkkit import hudi_rs_table, rows_by_key
from tidemark.table import HoodieTable


def test_a_version_9_table_reads_as_hudi_rs_reads_it(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(unzip_fixture("v9_txns_simple_meta", tmp_path))
    frame = tidemark.spark.read(spark, uri)
    ours = rows_by_key(frame.toArrow())
    assert ours == rows_by_key(hudi_rs_table(uri)) and len(ours) == 12
    clustered = HoodieTable.open(uri).timeline.find("20260307162454799")
    assert clustered.completion_time is not None
    old = tidemark.spark.read(spark, uri, as_of=clustered.completion_time)
    options = HudiReadOptions().with_as_of_timestamp(clustered.completion_time)
    theirs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(uri).build().read(options))
    assert rows_by_key(old.toArrow()) == rows_by_key(theirs)
    assert rows_by_key(old.toArrow()) != ours
