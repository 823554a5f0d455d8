"""Helpers for the merge-on-read Spark tests: rows of the tables Apache Hudi wrote
(tests/fixtures/hudi-mor, the ``mor_tables`` fixture) compared by value, and a table
Tidemark writes keyed by ``id``, partitioned by ``region``, ordered by ``ts``, with its rows
as hudi-rs and ``tidemark.spark.read`` read them (by id, the data columns only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

import tidemark.spark
from spark.sparkkit import hudi_rs_table
from tidemark.jobs.write import WriteResult
from tidemark.jobs.write_options import WriteOptions
from tidemark.table.records.keys import RECORD_KEY

COLUMNS = ["id", "name", "score", "ts", "region"]
MOR = "MERGE_ON_READ"


def comparable(rows: list[dict], columns: list[str]) -> list[tuple]:
    """``rows``' values of ``columns``, sorted (a key may hold rows in two file groups)."""
    return sorted(tuple(repr(row[c]) for c in columns) for row in rows)


def spark_rows(frame: DataFrame) -> list[dict]:
    return frame.toArrow().to_pylist()


def data_columns(theirs: pa.Table) -> list[str]:
    """The record key and the table's own columns (hudi-rs leaves out a virtual-key table's
    null meta columns)."""
    return [RECORD_KEY, *(n for n in theirs.column_names if not n.startswith("_hoodie_"))]


def mor_options(version: int, **fields: object) -> WriteOptions:
    """Direct markers; ``fields`` replace any other option (``table_type`` too)."""
    options: dict[str, object] = {
        "record_key_fields": ["id"],
        "partition_fields": ["region"],
        "precombine_field": "ts",
        "table_type": MOR,
        "table_version": version,
        "markers": "direct",
        **fields,
    }
    return WriteOptions(**options)  # type: ignore[arg-type]


def mor_frame(spark: SparkSession, rows: list[tuple]) -> DataFrame:
    return spark.createDataFrame(
        rows, "id string, name string, score double, ts long, region string"
    )


def hudi_rs_rows(uri: str) -> dict[str, tuple]:
    table = hudi_rs_table(uri)
    rows = table.to_pylist() if table is not None else []
    return {r["id"]: tuple(r[c] for c in COLUMNS) for r in rows}


def our_rows(spark: SparkSession, uri: str) -> dict[str, tuple]:
    rows = tidemark.spark.read(spark, uri).toArrow().to_pylist()
    return {r["id"]: tuple(r[c] for c in COLUMNS) for r in rows}


@dataclass(frozen=True)
class Changed:
    """A Hudi-written table after ``upsert_and_delete``: the rows hudi-rs should read (by
    key, ``columns`` only), the two writes and the deleted key."""

    rows: dict[str, dict[str, Any]]
    columns: list[str]
    upserted: WriteResult
    deleted: WriteResult
    deleted_key: str


def upsert_and_delete(spark: SparkSession, uri: str, options: WriteOptions) -> Changed:
    """Upsert the first key with its first numeric column + 1, then delete the second."""
    before = hudi_rs_table(uri)
    assert before is not None
    columns = data_columns(before)
    rows = {row[RECORD_KEY]: row for row in before.select(columns).to_pylist()}
    updated_key, deleted_key = sorted(rows)[:2]
    frame = tidemark.spark.read(spark, uri).where(sf.col(RECORD_KEY) == updated_key)
    types = {f.name: f.dataType.typeName() for f in frame.schema.fields}
    number = next(n for n in columns[1:] if types[n] in ("double", "long"))
    update = without_meta(frame).withColumn(number, sf.col(number) + 1)
    upserted = tidemark.spark.write(update, uri, "upsert", options=options)
    rows[updated_key] = {**rows[updated_key], number: rows[updated_key][number] + 1}
    gone = tidemark.spark.read(spark, uri).where(sf.col(RECORD_KEY) == deleted_key)
    deleted = tidemark.spark.write(without_meta(gone), uri, "delete", options=options)
    del rows[deleted_key]
    return Changed(rows, columns, upserted, deleted, deleted_key)


def without_meta(frame: DataFrame) -> DataFrame:
    return frame.select(*[c for c in frame.columns if not c.startswith("_hoodie_")])
