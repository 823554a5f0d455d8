"""The filter model: ``(column, op, value)`` filters bound once to a schema.

``bind`` checks each filter (its shape, operator and column) and types its values by
``literals.literal`` once; every reader then derives what it applies from the bound
predicates (``arrow``: pyarrow expressions; ``statistics``: what min/max/null counts
rule out; ``partitions`` and ``record_keys``: which partitions and file groups to open;
``tidemark.jobs.filters``: Spark's condition), so a filter means the same wherever it
is applied. That meaning is Spark SQL's, with one rule of Hudi's:

- a null row meets no comparison (``=``, ``!=``, ``<``, ``in``, ``not in``, ...), only
  ``is null``;
- equality with None (and, on a partition field, with ``""``) means *missing*: null, or
  the empty string on a string column (Hudi stores both under
  ``__HIVE_DEFAULT_PARTITION__``); ``in`` is equality with any member (a None member:
  missing), ``!=`` and ``not in`` are their negations on rows that are not null;
- floats order as Spark orders them: NaN equals NaN and is above every number.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tidemark.errors import InvalidArgumentError
from tidemark.table.filters.literals import NO_SESSION_TIME_ZONE, column_scalar, literal

Filter = tuple[str, str, Any]
"""A filter as callers give it: ``(column, op, value)``."""
EQUALITIES = ("=", "in")
NEGATIONS = ("!=", "not in")
ORDERINGS = ("<", "<=", ">", ">=")
NULL_TESTS = ("is null", "is not null")
OPERATORS = ("=", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null")
MEMBERSHIPS = ("in", "not in")


@dataclass(frozen=True)
class Value:
    """A filter value typed like its column: ``value`` (None: missing); ``scalar``, of
    the column's type when that type holds it exactly (``exact``), else of its own (12.345
    against a decimal(12,2) column: no stored value equals it, and it compares exactly
    only in its own type, as Spark compares it)."""

    value: Any
    scalar: pa.Scalar
    exact: bool


@dataclass(frozen=True)
class Predicate:
    """One bound filter: ``column`` of Arrow type ``kind``, ``op`` (``==`` read as
    ``=``), and its typed ``values``: one for a comparison, any number for ``in`` and
    ``not in``, none for a null test."""

    column: str
    kind: pa.DataType
    op: str
    values: tuple[Value, ...]

    @property
    def missing(self) -> bool:
        """Whether an equality (or negation) names the missing value."""
        return self.op not in ORDERINGS and any(v.value is None for v in self.values)

    @property
    def present(self) -> list[Value]:
        """The values other than missing."""
        return [v for v in self.values if v.value is not None]

    def holds(self, value: Any) -> bool:
        """Whether a row holding ``value`` in the column meets the predicate; a TypeError
        when ``value`` does not compare with the filter's values."""
        if self.op in NULL_TESTS:
            return (value is None) == (self.op == "is null")
        if self.op in ORDERINGS:
            (bound,) = self.values
            return None not in (value, bound.value) and _ordered(self.op, value, bound.value)
        missing = value is None or (value == "" and is_string(self.kind))
        equal = any(
            missing if v.value is None else value is not None and _equal(value, v.value)
            for v in self.values
        )
        return equal if self.op in EQUALITIES else value is not None and not equal


@dataclass(frozen=True)
class BoundFilter:
    """The filters of a read, bound to its schema: rows must meet every predicate."""

    predicates: tuple[Predicate, ...] = ()

    def __iter__(self) -> Iterator[Predicate]:
        return iter(self.predicates)

    def __len__(self) -> int:
        return len(self.predicates)

    def __and__(self, other: BoundFilter) -> BoundFilter:
        return BoundFilter(self.predicates + other.predicates)

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(p.column for p in self.predicates))

    def equal_values(self, column: str) -> list[Value] | None:
        """The values ``=`` and ``in`` leave ``column`` (those every one of them names),
        None when none is on it."""
        found: list[Value] | None = None
        for predicate in self.predicates:
            if predicate.column == column and predicate.op in EQUALITIES:
                if found is None:
                    found = list(predicate.values)
                else:
                    found = [
                        v for v in found if any(_equal(v.value, w.value) for w in predicate.values)
                    ]
        return found

    def equal_rows(self, fields: Sequence[str]) -> pa.Table | None:
        """Every combination of the values ``=`` and ``in`` leave ``fields``, a row each,
        typed as their columns (missing: null); None unless each field has such values,
        all of its own type (another type's value, a datetime on a date column, may
        equal several of the column's)."""
        kinds = {p.column: p.kind for p in self.predicates}
        members: list[list[Any]] = []
        for name in fields:
            values = self.equal_values(name)
            if values is None or not all(v.exact for v in values):
                return None
            members.append([v.value for v in values])
        combinations = list(itertools.product(*members))
        return pa.table(
            {
                name: pa.array([row[i] for row in combinations], type=kinds[name])
                for i, name in enumerate(fields)
            }
        )


def bind(
    filters: Sequence[Filter],
    schema: pa.Schema,
    *,
    partition_fields: Sequence[str] = (),
    time_zone: str = NO_SESSION_TIME_ZONE,
) -> BoundFilter:
    """``filters`` checked against ``schema`` and typed by ``literals.literal`` (an
    InvalidArgumentError naming the field: ``filters`` for a malformed filter or unknown
    operator, the column for an unknown column or a value its type cannot hold; zone-less
    timestamps in ``time_zone``). ``""`` on a ``partition_fields`` column means missing."""
    predicates = []
    for item in filters:
        column, op, given = _check_filter(item)
        if column not in schema.names:
            raise InvalidArgumentError("no such column in the table", field=column)
        kind = schema.field(column).type
        members = list(given) if op in MEMBERSHIPS else [] if op in NULL_TESTS else [given]
        missing = ("",) if column in partition_fields and op not in ORDERINGS else ()
        values = tuple(
            _value(None if member in missing else member, kind, column, time_zone)
            for member in members
        )
        predicates.append(Predicate(column, kind, op, values))
    return BoundFilter(tuple(predicates))


def is_string(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _value(given: Any, kind: pa.DataType, column: str, time_zone: str) -> Value:
    typed = literal(given, kind, column, time_zone)
    held = column_scalar(typed, kind)
    if held is not None:
        return Value(typed, held, True)
    try:
        return Value(typed, pa.scalar(typed), False)
    except (pa.ArrowException, TypeError) as error:
        raise InvalidArgumentError(f"{given!r} is not a valid {kind}", field=column) from error


def _check_filter(item: Filter) -> Filter:
    if not isinstance(item, tuple) or len(item) != 3:
        raise InvalidArgumentError(f"{item!r} is not (column, op, value)", field="filters")
    column, op, value = item
    if op not in OPERATORS:
        raise InvalidArgumentError(
            f"unknown operator {op!r} (use one of {', '.join(OPERATORS)})", field="filters"
        )
    if op in MEMBERSHIPS and not isinstance(value, list | tuple | set | frozenset):
        raise InvalidArgumentError(f"{op!r} needs a collection of values", field=column)
    return (column, "=" if op == "==" else op, value)


def _order(value: Any) -> Any:
    """Floats keyed as Spark orders them (NaN last)."""
    if isinstance(value, float):
        return (1, 0.0) if math.isnan(value) else (0, value)
    return (0, value)


def _equal(value: Any, other: Any) -> bool:
    return bool(_order(value) == _order(other))


def _ordered(op: str, value: Any, bound: Any) -> bool:
    left, right = _order(value), _order(bound)
    return {
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[op]
