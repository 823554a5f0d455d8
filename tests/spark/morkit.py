"""Helpers for the Spark tests of the merge-on-read tables Apache Hudi wrote
(tests/fixtures/hudi-mor, the ``mor_tables`` fixture): rows compared by value."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame

from tidemark.table.records.keys import RECORD_KEY


def comparable(rows: list[dict], columns: list[str]) -> list[tuple]:
    """``rows``' values of ``columns``, sorted (a key may hold rows in two file groups)."""
    return sorted(tuple(repr(row[c]) for c in columns) for row in rows)


def spark_rows(frame: DataFrame) -> list[dict]:
    return frame.toArrow().to_pylist()


def data_columns(theirs: pa.Table) -> list[str]:
    """The record key and the table's own columns (hudi-rs leaves out a virtual-key table's
    null meta columns)."""
    return [RECORD_KEY, *(n for n in theirs.column_names if not n.startswith("_hoodie_"))]
