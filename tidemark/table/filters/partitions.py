"""Bound filters against partition paths: which partitions to list (``=``/``in`` on every
partition field name them all) and which listed ones may hold a matching row (each row of
a partition holds the values its path encodes, so predicates on partition fields are
decided on those values).

Paths a time-based key generator wrote hold formatted times, not the fields' values:
they are never pruned. ``__HIVE_DEFAULT_PARTITION__`` holds null, or on a string field
null or ``""``.
"""

from __future__ import annotations

import urllib.parse

from tidemark.errors import InvalidArgumentError, TidemarkError
from tidemark.table.filters.expression import BoundFilter, is_string
from tidemark.table.filters.literals import literal
from tidemark.table.properties.config import (
    CUSTOM_KEY_GENERATOR,
    TIMESTAMP_KEY_GENERATOR,
    TableConfig,
)
from tidemark.table.records.keys import DEFAULT_PARTITION, partition_paths


def parse_partition_path(partition_path: str, config: TableConfig) -> dict[str, str] | None:
    """Partition field values encoded in a path, or None when the path cannot be decoded
    (a time-based key generator writes formatted times, not the field's values)."""
    segments = partition_path.split("/") if partition_path else []
    if len(segments) != len(config.partition_fields) or config.key_generator_class in (
        TIMESTAMP_KEY_GENERATOR,
        CUSTOM_KEY_GENERATOR,
    ):
        return None
    values: dict[str, str] = {}
    for name, segment in zip(config.partition_fields, segments, strict=True):
        if config.hive_style:
            key, sep, value = segment.partition("=")
            if not sep or key != name:
                return None
            values[name] = value
        else:
            values[name] = segment
    if config.url_encode_partitions:
        return {name: urllib.parse.unquote(value) for name, value in values.items()}
    return values


def may_hold(bound: BoundFilter, partition_path: str, config: TableConfig) -> bool:
    """False only when the values ``partition_path`` encodes meet no predicate of
    ``bound`` on a partition field."""
    decoded = parse_partition_path(partition_path, config)
    if decoded is None:
        return True
    for predicate in bound:
        text = decoded.get(predicate.column)
        if text is None:
            continue
        if text == DEFAULT_PARTITION:
            candidates = [None, ""] if is_string(predicate.kind) else [None]
        else:
            try:
                candidates = [literal(text, predicate.kind, predicate.column)]
            except InvalidArgumentError:
                continue
        try:
            if not any(predicate.holds(value) for value in candidates):
                return False
        except TypeError:
            continue
    return True


def partitions_to_list(bound: BoundFilter, config: TableConfig) -> list[str] | None:
    """The partition paths to list when ``=``/``in`` name values for every partition
    field (every combination), else None (list them all)."""
    rows = bound.equal_rows(config.partition_fields) if config.partition_fields else None
    if rows is None:
        return None
    try:
        return sorted(set(partition_paths(rows, config).to_pylist()))
    except TidemarkError:
        return None
