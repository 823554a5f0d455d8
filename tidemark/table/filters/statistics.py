"""What min/max/null-count statistics (of a Parquet row group, or of a file in the table's
column statistics) say about bound filters: ``may_match`` is False only when they prove
no row meets them.

Floating-point columns are never decided: Spark orders NaN above every number and equal
to itself, and Parquet's statistics leave NaN out, so a range could skip a NaN that
matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tidemark.table.filters.expression import (
    EQUALITIES,
    NEGATIONS,
    NULL_TESTS,
    BoundFilter,
    Predicate,
    is_string,
)


@dataclass(frozen=True)
class ColumnStats:
    """One column of a file or row group: ``low``/``high`` None when unknown (or every
    value null), ``nulls`` None when unknown."""

    low: Any
    high: Any
    nulls: int | None


@dataclass(frozen=True)
class FileStats:
    rows: int
    columns: Mapping[str, ColumnStats]


def orderable(kind: pa.DataType) -> bool:
    """Types whose Parquet statistics order values as Spark and Arrow compare them."""
    return (
        pa.types.is_integer(kind)
        or is_string(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_decimal(kind)
    )


def may_match(bound: BoundFilter, stats: FileStats) -> bool:
    """False only when ``stats`` prove no row meets every predicate of ``bound``; a column
    without statistics, an operator they cannot decide (``!=``, ``not in``) or values
    that do not compare with them never rule a row out."""
    return all(_may_match(predicate, stats) for predicate in bound)


def _may_match(predicate: Predicate, stats: FileStats) -> bool:
    entry = stats.columns.get(predicate.column)
    if entry is None or not orderable(predicate.kind):
        return True
    some_null = entry.nulls is None or entry.nulls > 0
    all_null = entry.nulls is not None and entry.nulls >= stats.rows
    if predicate.op in NULL_TESTS:
        return some_null if predicate.op == "is null" else not all_null
    if predicate.missing and predicate.op in EQUALITIES:
        empty = is_string(predicate.kind) and entry.low in (None, "")
        if some_null or empty:
            return True
    if all_null:
        return False
    low, high = entry.low, entry.high
    if low is None or high is None or predicate.op in NEGATIONS:
        return True
    try:
        if predicate.op in EQUALITIES:
            return any(low <= v.value <= high for v in predicate.present)
        value = predicate.values[0].value
        return (
            value is not None
            and {
                "<": low < value,
                "<=": low <= value,
                ">": high > value,
                ">=": high >= value,
            }[predicate.op]
        )
    except TypeError:
        return True
