"""Bound filters as pyarrow compute expressions: the rows a read keeps (``Table.filter``)
and the row groups a dataset scan skips by their statistics. Each expression is true
exactly where ``Predicate.holds`` is, and null or false elsewhere."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.table.filters.expression import (
    EQUALITIES,
    ORDERINGS,
    BoundFilter,
    Predicate,
    Value,
    is_string,
)

_ORDERINGS: dict[str, Callable[[Any, Any], pc.Expression]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_NEVER = pc.scalar(False)


def expression(bound: BoundFilter) -> pc.Expression | None:
    """Every predicate of ``bound`` and-ed; None when it has none."""
    if not bound:
        return None
    return functools.reduce(operator.and_, (predicate_expression(p) for p in bound))


def predicate_expression(predicate: Predicate) -> pc.Expression:
    column = pc.field(predicate.column)
    if predicate.op == "is null":
        return column.is_null()
    if predicate.op == "is not null":
        return column.is_valid()
    if predicate.op in ORDERINGS:
        (value,) = predicate.values
        return _ordering(column, predicate.op, value, predicate.kind)
    equal = _equal_any(column, predicate)
    return equal if predicate.op in EQUALITIES else column.is_valid() & ~equal


def _equal_any(column: pc.Expression, predicate: Predicate) -> pc.Expression:
    """True where the column equals a value of ``predicate`` (false where it is null,
    unless missing is one of them)."""
    floating = pa.types.is_floating(predicate.kind)
    parts: list[pc.Expression] = []
    if predicate.missing:
        missing = column.is_null()
        parts.append(missing | (column == "") if is_string(predicate.kind) else missing)
    present = predicate.present
    if floating and any(_nan(v) for v in present):
        parts.append(pc.is_nan(column))
    compared = [v for v in present if not _nan(v)]
    exact = [v.scalar for v in compared if v.exact]
    if len(exact) > 1 and not floating:  # floats: == equates 0.0 and -0.0, as Spark does
        parts.append(column.isin(pa.array([s.as_py() for s in exact], type=predicate.kind)))
        compared = [v for v in compared if not v.exact]
    parts.extend(column == v.scalar for v in compared)
    return functools.reduce(operator.or_, parts) if parts else _NEVER


def _ordering(column: pc.Expression, op: str, value: Value, kind: pa.DataType) -> pc.Expression:
    """Spark's order on floats: NaN above every number; nothing is ordered against a null
    value."""
    compared = _ORDERINGS[op](column, value.scalar)
    if not pa.types.is_floating(kind) or value.value is None:
        return compared
    if _nan(value):
        return {
            "<": ~pc.is_nan(column),
            "<=": column.is_valid(),
            ">": _NEVER,
            ">=": pc.is_nan(column),
        }[op]
    return compared | pc.is_nan(column) if op in (">", ">=") else compared


def _nan(value: Value) -> bool:
    return isinstance(value.value, float) and math.isnan(value.value)
