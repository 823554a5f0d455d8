"""Bound filters (``tidemark.table.filters.expression``) as Spark conditions: Spark
compares the typed values in its own SQL, which is the filters' meaning, plus Hudi's rule
that equality with None means null or, on a string column, empty."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as sf

from tidemark.table.filters.expression import EQUALITIES, ORDERINGS, Predicate, is_string

COMPARISONS: dict[str, Callable[[Column, Column], Column]] = {
    "=": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""Only the operation asked for is built: each Column operation is a round of calls to
the JVM."""


def predicate_column(predicate: Predicate) -> Column:
    """``predicate`` as a Spark condition, true exactly where ``Predicate.holds`` is."""
    column = sf.col(f"`{predicate.column}`")
    if predicate.op == "is null":
        return column.isNull()
    if predicate.op == "is not null":
        return column.isNotNull()
    if predicate.op in ORDERINGS:
        (value,) = predicate.values
        return COMPARISONS[predicate.op](column, sf.lit(value.value))
    equal = _equal_any(column, predicate)
    return equal if predicate.op in EQUALITIES else column.isNotNull() & ~equal


def _equal_any(column: Column, predicate: Predicate) -> Column:
    parts: list[Column] = []
    if predicate.missing:
        missing = column.isNull()
        parts.append(missing | (column == sf.lit("")) if is_string(predicate.kind) else missing)
    present = [v.value for v in predicate.present]
    if len(present) == 1:
        parts.append(column == sf.lit(present[0]))
    elif present:
        parts.append(column.isin(present))
    return functools.reduce(operator.or_, parts) if parts else sf.lit(False)
