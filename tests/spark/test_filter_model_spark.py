"""Spark's condition of each bound filter (``tidemark.jobs.filters.predicate_column``)
against the row-by-row reading the pyarrow expression, statistics and pruning are held to
(tests/table/test_filter_model.py): every operator on every column type, over a small
frame with nulls, NaN and empty strings, each type's cases answered by one query."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf
from table.filterkit import COLUMN_TYPES, spark_reading

from tidemark.jobs.driver_read import local_frame
from tidemark.jobs.filters import predicate_column
from tidemark.table.filters.expression import OPERATORS, bind

ROWS = 12


def _cases(held: list[Any], others: list[Any]) -> list[tuple[str, list[Any]]]:
    """``(op, values)``: each comparison with every value (and None), memberships with a
    few lists, the null tests."""
    values = [*held, *others, None]
    found: list[tuple[str, list[Any]]] = [("is null", []), ("is not null", [])]
    for op in OPERATORS:
        if op in ("=", "!=", "<", "<=", ">", ">="):
            found.extend((op, [value]) for value in values)
        elif op in ("in", "not in"):
            found.extend((op, members) for members in ([], held[:2], [held[-1], None], others))
    return found


def test_spark_conditions_keep_the_rows_the_reading_keeps(spark: SparkSession) -> None:
    for name, (kind, held, others) in COLUMN_TYPES.items():
        cells = [None if row % 4 == 3 else held[row % len(held)] for row in range(ROWS)]
        table = pa.table({"c": pa.array(cells, type=kind), "row": pa.array(range(ROWS))})
        schema = pa.schema([pa.field("c", kind)])
        cases = _cases(held, others)
        columns = []
        for index, (op, values) in enumerate(cases):
            value = values if op in ("in", "not in") else values[0] if values else None
            (predicate,) = bind([("c", op, value)], schema)
            kept = sf.coalesce(predicate_column(predicate), sf.lit(False))
            columns.append(kept.alias(f"case{index}"))
        answered = local_frame(spark, table).select("row", *columns).orderBy("row").collect()
        string = pa.types.is_string(kind)
        for index, (op, values) in enumerate(cases):
            expected = [spark_reading(op, cell, values, string) for cell in cells]
            assert [row[f"case{index}"] for row in answered] == expected, (name, op, values)
